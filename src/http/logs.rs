//! The log shippers' endpoints: `POST /v1/logs` (OTLP/HTTP), `POST /loki/api/v1/push`
//! and `POST /api/v1/logs` (plain records), each counted under its own `source`
//! (`otlp`, `loki`, `http`). They share the push's token, room and time limit (`push`).
//!
//! Order: token (401), content type and encoding (415), room (503 + `Retry-After`), the
//! body read within `MAX_DECODED` and the time (413, 503), then, on the blocking pool,
//! decompression counted after it (413), reading (400: nothing of the body counted), and
//! counting. OTLP answers in the request's content type, errors as a `google.rpc.Status`.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;
use serde_json::json;

use super::push::{account, busy, read_body};
use super::{AppState, HttpError};
use crate::intake::batch::Batch;
use crate::intake::decode::{self, DecodeError, Encoding, MAX_DECODED};
use crate::intake::wire::{ExportLogsPartialSuccess, ExportLogsServiceResponse, Status};
use crate::intake::{Counters, IntakeMetrics, Tally, loki, otlp, plain, push as events};
use crate::vocab::{HTTP_SOURCE, LOKI_SOURCE, OTLP_SOURCE};

/// The counters of the three endpoints.
pub(crate) struct SourceCounters {
    otlp: Counters,
    loki: Counters,
    http: Counters,
}

impl SourceCounters {
    pub(crate) fn new(metrics: &IntakeMetrics, namespaces: &[String]) -> Self {
        SourceCounters {
            otlp: Counters::new(metrics, namespaces, OTLP_SOURCE),
            loki: Counters::new(metrics, namespaces, LOKI_SOURCE),
            http: Counters::new(metrics, namespaces, HTTP_SOURCE),
        }
    }
}

/// Which endpoint, and how its body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Otlp { json: bool },
    Loki { json: bool },
    Plain,
}

/// What was counted of an accepted body.
struct Counted {
    /// Lines by result: matched, ignored, malformed.
    lines: [u64; 3],
    /// Records that could not be read (OTLP's `rejectedLogRecords`) and why the first was.
    rejected: u64,
    why: Option<String>,
}

pub(crate) async fn otlp(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let answer = otlp_answer(&s, headers, body).await;
    account(&s, OTLP_SOURCE, answer)
}

async fn otlp_answer(s: &AppState, headers: HeaderMap, body: Body) -> Response {
    if let Some(refused) = s.push.refused(&headers) {
        return refused;
    }
    let json = match essence(&headers).as_str() {
        "application/x-protobuf" | "application/protobuf" => false,
        "application/json" => true,
        other => return unsupported(other, "application/x-protobuf or application/json (OTLP/HTTP)"),
    };
    let p = Protocol::Otlp { json };
    match take(s, &headers, body, p).await {
        Ok(c) => {
            let partial = (c.rejected > 0).then(|| ExportLogsPartialSuccess {
                rejected_log_records: i64::try_from(c.rejected).unwrap_or(i64::MAX),
                error_message: format!(
                    "{} log records could not be read and were counted as malformed: {}",
                    c.rejected,
                    c.why.unwrap_or_default()
                ),
            });
            if json {
                let body = match partial {
                    Some(p) => json!({"partialSuccess": {
                        "rejectedLogRecords": p.rejected_log_records.to_string(),
                        "errorMessage": p.error_message,
                    }}),
                    None => json!({}),
                };
                ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
            } else {
                let resp = ExportLogsServiceResponse {
                    partial_success: partial,
                };
                ([(header::CONTENT_TYPE, "application/x-protobuf")], resp.encode_to_vec()).into_response()
            }
        }
        Err(refusal) => refusal.otlp(json),
    }
}

pub(crate) async fn loki(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let answer = loki_answer(&s, headers, body).await;
    account(&s, LOKI_SOURCE, answer)
}

async fn loki_answer(s: &AppState, headers: HeaderMap, body: Body) -> Response {
    if let Some(refused) = s.push.refused(&headers) {
        return refused;
    }
    let json = match essence(&headers).as_str() {
        "application/x-protobuf" | "application/protobuf" => false,
        "application/json" => true,
        other => return unsupported(other, "application/x-protobuf (snappy) or application/json (Loki push)"),
    };
    match take(s, &headers, body, Protocol::Loki { json }).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => refusal.text(),
    }
}

pub(crate) async fn plain(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let answer = plain_answer(&s, headers, body).await;
    account(&s, HTTP_SOURCE, answer)
}

async fn plain_answer(s: &AppState, headers: HeaderMap, body: Body) -> Response {
    if let Some(refused) = s.push.refused(&headers) {
        return refused;
    }
    match essence(&headers).as_str() {
        ""
        | "application/json"
        | "application/x-ndjson"
        | "application/ndjson"
        | "application/jsonl"
        | "application/json-seq"
        | "application/x-json-stream"
        | "text/plain" => {}
        other => {
            return unsupported(
                other,
                "application/json (an array, NDJSON or objects back to back), application/x-ndjson or text/plain",
            );
        }
    }
    match take(s, &headers, body, Protocol::Plain).await {
        Ok(c) => {
            let [matched, ignored, malformed] = c.lines;
            axum::Json(json!({"lines": matched + ignored + malformed, "matched": matched,
                "ignored": ignored, "malformed": malformed}))
            .into_response()
        }
        Err(refusal) => refusal.text(),
    }
}

/// A refused push: its status, its sentence, and whether a retry is welcome later.
struct Refusal {
    status: StatusCode,
    message: String,
    retry_after: bool,
}

impl From<HttpError> for Refusal {
    fn from(e: HttpError) -> Self {
        Refusal {
            retry_after: e.0 == StatusCode::SERVICE_UNAVAILABLE,
            status: e.0,
            message: e.1,
        }
    }
}

impl Refusal {
    fn bad(message: String) -> Refusal {
        Refusal::from(HttpError(
            StatusCode::BAD_REQUEST,
            format!("{message}; nothing in this body was counted"),
        ))
    }

    fn text(self) -> Response {
        let retry = self.retry_after;
        let mut r = HttpError(self.status, self.message).into_response();
        if retry {
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        r
    }

    /// A `google.rpc.Status` in the request's content type.
    fn otlp(self, json: bool) -> Response {
        let code = match self.status {
            StatusCode::BAD_REQUEST => 3,          // INVALID_ARGUMENT
            StatusCode::PAYLOAD_TOO_LARGE => 8,    // RESOURCE_EXHAUSTED
            StatusCode::REQUEST_TIMEOUT => 4,      // DEADLINE_EXCEEDED
            StatusCode::SERVICE_UNAVAILABLE => 14, // UNAVAILABLE
            _ => 2,                                // UNKNOWN
        };
        let (ctype, body) = if json {
            (
                "application/json",
                json!({"code": code, "message": self.message}).to_string().into_bytes(),
            )
        } else {
            let status = Status {
                code,
                message: self.message,
            };
            ("application/x-protobuf", status.encode_to_vec())
        };
        let mut r = (self.status, [(header::CONTENT_TYPE, ctype)], body).into_response();
        if self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        r
    }
}

/// Everything between the request and the counters; nothing is counted unless the whole
/// body was read.
async fn take(s: &AppState, headers: &HeaderMap, body: Body, p: Protocol) -> Result<Counted, Refusal> {
    let push = &s.push;
    let given = headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok());
    let encoding = Encoding::from_header(given).ok_or_else(|| {
        Refusal::from(HttpError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Encoding `{}` is not taken: send gzip, deflate, zstd or none",
                given.unwrap_or_default()
            ),
        ))
    })?;
    // Loki's protobuf body is Snappy's block format by the protocol, not by a header.
    let encoding = match (p, encoding) {
        (Protocol::Loki { json: false }, Encoding::Identity) => Encoding::Snappy,
        (_, e) => e,
    };
    let Ok(_reading) = push.reading.try_acquire() else {
        return Err(busy().into());
    };
    let wire = read_body(s, headers, body, MAX_DECODED).await?;
    let push = s.push.clone();
    let read = tokio::task::spawn_blocking(move || -> Result<(Tally, u64, Option<String>), Refusal> {
        let bytes = decode::decode(wire, encoding, MAX_DECODED).map_err(|e| match e {
            DecodeError::TooLarge { .. } => Refusal::from(HttpError(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())),
            DecodeError::Corrupt { .. } => Refusal::bad(e.to_string()),
        })?;
        let batch = |b: Result<Batch, String>| b.map_err(Refusal::bad);
        let batch = match p {
            Protocol::Otlp { json: false } => batch(otlp::protobuf(&bytes).map_err(|e| e.to_string()))?,
            Protocol::Otlp { json: true } => batch(otlp::json(&bytes).map_err(|e| e.to_string()))?,
            Protocol::Loki { json: false } => batch(loki::protobuf(&bytes).map_err(|e| e.to_string()))?,
            Protocol::Loki { json: true } => batch(loki::json(&bytes).map_err(|e| e.to_string()))?,
            Protocol::Plain => match plain::read(&bytes).map_err(|e| Refusal::bad(e.to_string()))? {
                plain::Plain::Records(b) => b,
                plain::Plain::Text => {
                    return Ok((events::text(&bytes, &push.classifier), 0, None));
                }
            },
        };
        // The decoded body is no longer needed: free it before the records are joined.
        drop(bytes);
        Ok((batch.tally(&push.classifier), batch.unreadable, batch.first_unreadable))
    })
    .await
    .map_err(|e| {
        Refusal::from(HttpError(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("reading the body failed: {e}"),
        ))
    })?;
    let (mut tally, rejected, why) = read?;
    let counters = match p {
        Protocol::Otlp { .. } => &s.push.sources.otlp,
        Protocol::Loki { .. } => &s.push.sources.loki,
        Protocol::Plain => &s.push.sources.http,
    };
    let lines = tally.lines;
    counters.flush(&mut tally);
    Ok(Counted { lines, rejected, why })
}

/// The content type without its parameters, lowercased ("" when absent).
fn essence(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

fn unsupported(given: &str, wanted: &str) -> Response {
    let given = if given.is_empty() {
        "no Content-Type".to_string()
    } else {
        format!("Content-Type `{given}` is not taken")
    };
    HttpError(StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("{given}: send {wanted}")).into_response()
}
