"""A worker instrumented with the OpenTelemetry Python SDK: a payout job runs inside a span,
and its lock release fails with "no longer owned"; the stdlib logging bridge ships the
record over OTLP/HTTP (protobuf), and the SDK puts the span's trace and span ids on it.
Configured by the standard OTEL_* environment variables. Prints the trace id and span id
(hex) of the failing job, then also logs, outside any span, an unrelated request."""
import logging
import sys

from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider

# The exporter that counts its failed exports, and the library's exception.
from otlp_logs import Checked, LockNotOwnedError


def main():
    key = sys.argv[1]
    trace.set_tracer_provider(TracerProvider())
    tracer = trace.get_tracer("payout-worker")
    provider = LoggerProvider()
    set_logger_provider(provider)
    provider.add_log_record_processor(BatchLogRecordProcessor(Checked()))
    log = logging.getLogger("worker")
    log.setLevel(logging.INFO)
    log.addHandler(LoggingHandler(level=logging.INFO, logger_provider=provider))
    log.info("request served in 3ms")
    with tracer.start_as_current_span("payout-batch") as span:
        ctx = span.get_span_context()
        try:
            raise LockNotOwnedError("Cannot release a lock that's no longer owned")
        except LockNotOwnedError:
            log.exception("release of %s failed", key)
    provider.shutdown()
    if Checked.failures:
        print(f"{Checked.failures} exports failed", file=sys.stderr)
        sys.exit(1)
    print(f"{ctx.trace_id:032x} {ctx.span_id:016x}")


if __name__ == "__main__":
    main()
