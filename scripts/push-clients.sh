#!/usr/bin/env bash
# Installs the log shippers' client libraries the push tests (tests/shippers.rs) run, at
# pinned versions, into target/push-clients/: a Python venv (the OpenTelemetry SDK and its
# OTLP/HTTP exporter, python-logging-loki) and a node_modules (the OpenTelemetry JS logs
# SDK and exporter, winston-loki with snappy). Does nothing when the same pins are there.
#   scripts/push-clients.sh [DIR]    (default: target/push-clients)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/push-clients}
python_pins=(opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 python-logging-loki==0.3.1)
node_pins=(@opentelemetry/api-logs@0.223.1 @opentelemetry/sdk-logs@0.223.1 @opentelemetry/exporter-logs-otlp-http@0.223.1
  winston@3.19.0 winston-loki@6.1.7 snappy@7.4.3)
stamp="${python_pins[*]} ${node_pins[*]}"
[ -f "$dir/installed" ] && [ "$(cat "$dir/installed")" = "$stamp" ] && exit 0

for bin in python3 node npm; do
  command -v "$bin" >/dev/null || { echo "the push tests need $bin: apt-get install python3 python3-venv nodejs npm" >&2; exit 1; }
done
mkdir -p "$dir/node"
rm -f "$dir/installed"
if [ ! -x "$dir/venv/bin/python" ]; then
  python3 -m venv "$dir/venv" || { echo "python3 -m venv failed: apt-get install python3-venv" >&2; exit 1; }
fi
echo "installing the push tests' clients into $dir" >&2
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check "${python_pins[@]}"
[ -f "$dir/node/package.json" ] || echo '{"private": true}' > "$dir/node/package.json"
(cd "$dir/node" && npm install --silent --no-audit --no-fund --save-exact "${node_pins[@]}")
echo "$stamp" > "$dir/installed"
