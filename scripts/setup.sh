#!/usr/bin/env bash
# Install what lockwatch's make targets need and the machine lacks (Debian/Ubuntu).
#   scripts/setup.sh test    redis-server, redis-cli, redis-sentinel, promtool and prometheus, prometheus-alertmanager
#                            (the HA pair test), chromium (status page test),
#                            openssl (test certificates), dpkg-deb and systemd-analyze (the package test);
#                            then the lock clients `discover` is tested with (tests/discover.rs) and the
#                            payout workers of tests/workers/ run on (tests/freeze_workers.rs): PyPI redis,
#                            python-redis-lock and python-json-logger in target/test-tools/venv, npm redlock
#                            and ioredis in target/test-tools/node;
#                            and the log shippers' clients the push tests run (tests/shippers.rs), pinned,
#                            in target/push-clients (scripts/push-clients.sh)
#   scripts/setup.sh demo    redis-server
#   scripts/setup.sh bench   the above, plus hyperfine, prometheus-redis-exporter, mtail, taskset
# Nothing is installed when everything is present already.
set -euo pipefail

want=(redis-server:redis-server redis-cli:redis-tools)
case "${1:-test}" in
  demo) ;;
  test) want+=(redis-sentinel:redis-sentinel promtool:prometheus prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager chromium:chromium openssl:openssl dpkg-deb:dpkg systemd-analyze:systemd python3:python3 npm:npm) ;;
  bench) want+=(promtool:prometheus hyperfine:hyperfine prometheus-redis-exporter:prometheus-redis-exporter curl:curl mtail:mtail taskset:util-linux python3:python3) ;;
  *) echo "usage: $0 test|demo|bench" >&2; exit 2 ;;
esac

# The real lock clients of tests/discover.rs and tests/workers/, pinned, in target/test-tools
# (kept between runs); then the log shippers' clients of tests/shippers.rs.
clients() {
  local tools sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  tools="$(cd "$(dirname "$0")/.." && pwd)/target/test-tools"
  mkdir -p "$tools/node"
  if [ ! -x "$tools/venv/bin/python" ] \
    || ! "$tools/venv/bin/python" -c 'import redis, redis_lock, pythonjsonlogger' 2>/dev/null; then
    echo "installing: PyPI redis, python-redis-lock and python-json-logger into $tools/venv" >&2
    if ! python3 -m venv "$tools/venv" >/dev/null 2>&1; then
      rm -rf "$tools/venv"
      command -v apt-get >/dev/null 2>&1 || { echo "missing: python3-venv — install it with your package manager" >&2; exit 1; }
      $sudo apt-get install -y --no-install-recommends python3-venv >/dev/null
      python3 -m venv "$tools/venv"
    fi
    "$tools/venv/bin/pip" install --quiet --disable-pip-version-check redis==8.1.0 python-redis-lock==4.0.1 \
      python-json-logger==4.2.0
  fi
  if [ ! -d "$tools/node/node_modules/redlock" ] || [ ! -d "$tools/node/node_modules/ioredis" ]; then
    echo "installing: npm redlock and ioredis into $tools/node" >&2
    [ -f "$tools/node/package.json" ] || echo '{"private": true}' > "$tools/node/package.json"
    (cd "$tools/node" && npm install --silent --no-audit --no-fund redlock@5.0.0-beta.2 ioredis@6.0.0)
  fi
  "$(dirname "$0")/push-clients.sh"
}

missing=()
for pair in "${want[@]}"; do
  bin=${pair%%:*} pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/bin/$bin" ] || [ -x "/usr/sbin/$bin" ] || missing+=("$pkg")
done
finish() { if [ "${1:-test}" = test ]; then clients; fi; exit 0; }
[ ${#missing[@]} -eq 0 ] && finish "${1:-test}"

if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${missing[*]} — install these packages with your package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; then
  $sudo apt-get update >/dev/null
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian packages start system services; lockwatch's tests and demo start their own
# servers on free ports and need none of them.
for svc in redis-server redis-sentinel prometheus prometheus-alertmanager prometheus-redis-exporter mtail; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    $sudo systemctl stop "$svc" >/dev/null 2>&1 || true
  fi
done
finish "${1:-test}"
