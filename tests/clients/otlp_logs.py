"""Ships records to lockwatch with the OpenTelemetry Python SDK's OTLP/HTTP log exporter
(protobuf), configured only by the standard OTEL_* environment variables the README shows.
Logs, the way an application does through the stdlib bridge: noise, then lock failures with
their exception and traceback. Exits non-zero if the exporter reports a failure."""
import logging
import sys

from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExportResult


class LockNotOwnedError(Exception):
    pass


class LockError(Exception):
    pass


class Checked(OTLPLogExporter):
    failures = 0

    def export(self, batch):
        result = super().export(batch)
        if result != LogRecordExportResult.SUCCESS:
            Checked.failures += 1
        return result


def main():
    provider = LoggerProvider()
    set_logger_provider(provider)
    provider.add_log_record_processor(BatchLogRecordProcessor(Checked(), max_export_batch_size=512))
    log = logging.getLogger("worker")
    log.setLevel(logging.INFO)
    log.addHandler(LoggingHandler(level=logging.INFO, logger_provider=provider))
    for i in range(20):
        log.info("request %d served in 3ms", i)
        if i % 5 == 0:
            try:
                raise LockNotOwnedError("Cannot release a lock that's no longer owned")
            except LockNotOwnedError:
                log.exception("release of wf:lock:%d failed", i)
    # A failure whose lock key is an attribute (extra=), not in the text.
    try:
        raise LockError("Cannot extend an unlocked lock")
    except LockError:
        log.error("lease renewal failed", exc_info=True, extra={"lock.key": "payout:lock:3"})
    provider.force_flush()
    provider.shutdown()
    if Checked.failures:
        print(f"{Checked.failures} exports failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
