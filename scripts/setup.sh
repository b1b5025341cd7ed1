#!/usr/bin/env bash
# Install what lockwatch's make targets need and the machine lacks (Debian/Ubuntu).
#   scripts/setup.sh test    redis-server, redis-cli, redis-sentinel, promtool and prometheus, prometheus-alertmanager
#                            (the HA pair test), chromium (status page test),
#                            openssl (test certificates), dpkg-deb and systemd-analyze (the package test)
#   scripts/setup.sh demo    redis-server
#   scripts/setup.sh bench   the above, plus hyperfine, prometheus-redis-exporter, mtail, taskset
# Nothing is installed when everything is present already.
set -euo pipefail

want=(redis-server:redis-server redis-cli:redis-tools)
case "${1:-test}" in
  demo) ;;
  test) want+=(redis-sentinel:redis-sentinel promtool:prometheus prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager chromium:chromium openssl:openssl dpkg-deb:dpkg systemd-analyze:systemd) ;;
  bench) want+=(promtool:prometheus hyperfine:hyperfine prometheus-redis-exporter:prometheus-redis-exporter curl:curl mtail:mtail taskset:util-linux python3:python3) ;;
  *) echo "usage: $0 test|demo|bench" >&2; exit 2 ;;
esac

missing=()
for pair in "${want[@]}"; do
  bin=${pair%%:*} pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/bin/$bin" ] || [ -x "/usr/sbin/$bin" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

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
