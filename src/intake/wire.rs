//! The protobuf messages the log endpoints read and write, declared with `prost` derive
//! (no protoc at build time): OTLP's `ExportLogsServiceRequest` and its response, and
//! Loki's `PushRequest`. Only the fields lockwatch reads are declared; protobuf skips the
//! others. Field numbers follow opentelemetry-proto's `logs/v1`, `common/v1`,
//! `collector/logs/v1` and `google/rpc/status`, and Loki's `pkg/push/push.proto`.

/// `opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportLogsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub(crate) resource_logs: Vec<ResourceLogs>,
}

/// The resource's attributes are read only for who sent a record (`process.pid`,
/// `host.name`, `service.instance.id`), kept beside a keyed event: never labels.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ResourceLogs {
    #[prost(message, optional, tag = "1")]
    pub(crate) resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) scope_logs: Vec<ScopeLogs>,
}

/// `opentelemetry.proto.resource.v1.Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub(crate) attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopeLogs {
    #[prost(message, repeated, tag = "2")]
    pub(crate) log_records: Vec<LogRecord>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LogRecord {
    #[prost(int32, tag = "2")]
    pub(crate) severity_number: i32,
    #[prost(string, tag = "3")]
    pub(crate) severity_text: String,
    #[prost(message, optional, tag = "5")]
    pub(crate) body: Option<AnyValue>,
    #[prost(message, repeated, tag = "6")]
    pub(crate) attributes: Vec<KeyValue>,
    /// 16 bytes, or empty: the record was not written in a span.
    #[prost(bytes = "vec", tag = "9")]
    pub(crate) trace_id: Vec<u8>,
    /// 8 bytes, or empty.
    #[prost(bytes = "vec", tag = "10")]
    pub(crate) span_id: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AnyValue {
    #[prost(oneof = "Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub(crate) value: Option<Value>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Value {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(int64, tag = "3")]
    Int(i64),
    #[prost(double, tag = "4")]
    Double(f64),
    #[prost(message, tag = "5")]
    Array(ArrayValue),
    #[prost(message, tag = "6")]
    Kvlist(KeyValueList),
    #[prost(bytes, tag = "7")]
    Bytes(Vec<u8>),
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub(crate) values: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub(crate) values: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeyValue {
    #[prost(string, tag = "1")]
    pub(crate) key: String,
    #[prost(message, optional, tag = "2")]
    pub(crate) value: Option<AnyValue>,
}

/// `ExportLogsServiceResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportLogsServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) partial_success: Option<ExportLogsPartialSuccess>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExportLogsPartialSuccess {
    #[prost(int64, tag = "1")]
    pub(crate) rejected_log_records: i64,
    #[prost(string, tag = "2")]
    pub(crate) error_message: String,
}

/// `google.rpc.Status`, the body of an OTLP/HTTP error answer (details left out).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Status {
    #[prost(int32, tag = "1")]
    pub(crate) code: i32,
    #[prost(string, tag = "2")]
    pub(crate) message: String,
}

/// Loki's `logproto.PushRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PushRequest {
    #[prost(message, repeated, tag = "1")]
    pub(crate) streams: Vec<StreamAdapter>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StreamAdapter {
    /// The stream's labels in Prometheus' text form: `{app="x", namespace="y"}`.
    #[prost(string, tag = "1")]
    pub(crate) labels: String,
    #[prost(message, repeated, tag = "2")]
    pub(crate) entries: Vec<EntryAdapter>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct EntryAdapter {
    #[prost(string, tag = "2")]
    pub(crate) line: String,
    #[prost(message, repeated, tag = "3")]
    pub(crate) structured_metadata: Vec<LabelPairAdapter>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LabelPairAdapter {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "2")]
    pub(crate) value: String,
}
