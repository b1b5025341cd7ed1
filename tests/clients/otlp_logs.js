// Ships records to lockwatch with the OpenTelemetry JS SDK's OTLP/HTTP log exporter
// (@opentelemetry/exporter-logs-otlp-http: proto3 JSON), configured by the standard
// OTEL_* environment variables. Noise, then lock failures as an application emits them:
// the error's name, message and stack as exception.* attributes; one kvlist body.
// Exits non-zero if an export fails.
const { SeverityNumber } = require('@opentelemetry/api-logs')
const { LoggerProvider, BatchLogRecordProcessor } = require('@opentelemetry/sdk-logs')
const { OTLPLogExporter } = require('@opentelemetry/exporter-logs-otlp-http')

let failures = 0
// The exporter, with each export's result checked.
class Checked {
  constructor () { this.inner = new OTLPLogExporter() }
  export (records, done) {
    this.inner.export(records, (result) => {
      if (result.code !== 0) {
        failures++
        console.error('export failed:', result.error && result.error.message)
      }
      done(result)
    })
  }

  forceFlush () { return this.inner.forceFlush() }
  shutdown () { return this.inner.shutdown() }
}

async function main () {
  const provider = new LoggerProvider({
    processors: [new BatchLogRecordProcessor({ exporter: new Checked(), maxExportBatchSize: 512 })]
  })
  const log = provider.getLogger('worker')
  for (let i = 0; i < 12; i++) {
    log.emit({ severityNumber: SeverityNumber.INFO, severityText: 'INFO', body: `job ${i} done` })
    if (i % 4 === 0) {
      const err = new Error('Lock was released in the store due to expiration.')
      err.name = 'IllegalStateException'
      log.emit({
        severityNumber: SeverityNumber.ERROR,
        severityText: 'ERROR',
        body: `lock extend failed for wf:lock:${i}`,
        attributes: { 'exception.type': err.name, 'exception.message': err.message, 'exception.stacktrace': err.stack }
      })
    }
  }
  // A structured body (a kvlist): its message field is the text, its lock_key a field.
  log.emit({ severityNumber: SeverityNumber.ERROR, body: { msg: 'lock not owned', lock_key: 'payout:lock:9' } })
  await provider.forceFlush()
  await provider.shutdown()
  if (failures) process.exit(1)
}

main().catch((e) => { console.error(e); process.exit(1) })
