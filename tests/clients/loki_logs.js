// Ships records to lockwatch's Loki push endpoint with winston-loki: protobuf compressed
// with Snappy (the default, `json: false`) or Loki's JSON (`json`), batched. Noise, then
// lock failures whose stack winston puts in the line's JSON. The stream's `namespace`
// label is a Kubernetes namespace, not a lock namespace: the key in the text decides.
// Arguments: the Loki base URL, the bearer token, "protobuf" or "json".
const winston = require('winston')
const LokiTransport = require('winston-loki')

async function main () {
  const [host, token, format] = process.argv.slice(2)
  let failures = 0
  const transport = new LokiTransport({
    host,
    json: format === 'json',
    labels: { app: 'orders', namespace: 'prod' },
    headers: { Authorization: `Bearer ${token}` },
    interval: 0.2,
    gracefulShutdown: false,
    onConnectionError: (e) => { failures++; console.error('push failed:', e && e.message) }
  })
  // winston-loki falls back to JSON when snappy cannot load: make sure it did not.
  if (transport.batcher.options.json !== (format === 'json')) throw new Error(`not sending ${format}`)
  const logger = winston.createLogger({ transports: [transport] })
  for (let i = 0; i < 9; i++) {
    logger.info(`order ${i} shipped`)
    if (i % 3 === 0) {
      const err = new Error('Lock was released in the store due to expiration.')
      logger.error(`lock extend failed for wf:lock:${i}`, { stack: err.stack })
    }
  }
  await transport.flush()
  await transport.close()
  if (failures) process.exit(1)
}

main().catch((e) => { console.error(e); process.exit(1) })
