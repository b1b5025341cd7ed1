#!/usr/bin/env bash
# Install what lockwatch's make targets need and the machine lacks (Debian/Ubuntu).
#   scripts/setup.sh test    redis-server, redis-cli, redis-sentinel, promtool and prometheus, chromium (status page test),
#                            openssl (test certificates), dpkg-deb and systemd-analyze (the package test),
#                            python3 with venv, node and npm; then the log shippers' client libraries
#                            at pinned versions (scripts/push-clients.sh, into target/push-clients)
#   scripts/setup.sh demo    redis-server
#   scripts/setup.sh bench   the above, plus hyperfine, prometheus-redis-exporter, mtail, taskset
# Nothing is installed when everything is present already.
set -euo pipefail

want=(redis-server:redis-server redis-cli:redis-tools)
mode=${1:-test}
case "$mode" in
  demo) ;;
  test) want+=(redis-sentinel:redis-sentinel promtool:prometheus prometheus:prometheus chromium:chromium openssl:openssl dpkg-deb:dpkg systemd-analyze:systemd
               python3:python3 node:nodejs npm:npm) ;;
  bench) want+=(promtool:prometheus hyperfine:hyperfine prometheus-redis-exporter:prometheus-redis-exporter curl:curl mtail:mtail taskset:util-linux python3:python3) ;;
  *) echo "usage: $0 test|demo|bench" >&2; exit 2 ;;
esac

missing=()
for pair in "${want[@]}"; do
  bin=${pair%%:*} pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/bin/$bin" ] || [ -x "/usr/sbin/$bin" ] || missing+=("$pkg")
done
# python3 without its venv module (Debian splits it out).
if [ "$mode" = test ] && command -v python3 >/dev/null 2>&1 && ! python3 -c 'import ensurepip' 2>/dev/null; then
  missing+=(python3-venv)
fi
# The push tests' clients, once the interpreters are there.
clients() { [ "$mode" != test ] || "$(dirname "$0")/push-clients.sh"; }
[ ${#missing[@]} -eq 0 ] && { clients; exit 0; }

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
for svc in redis-server redis-sentinel prometheus prometheus-redis-exporter mtail; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    $sudo systemctl stop "$svc" >/dev/null 2>&1 || true
  fi
done
clients
