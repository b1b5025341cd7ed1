#!/usr/bin/env bash
# `make compat`: the server-facing integration test files against each server of the
# compatibility matrix that `scripts/setup.sh compat` installs into target/servers/, one
# server after the other, then a table of each server's passed and failed tests per file.
# Debian's redis-server 7.0.15, the fourth server of the matrix, is the one `make test`
# runs every file on; it is not run again here.
#
# The server is chosen by LOCKWATCH_REDIS_SERVER (src/access/child.rs); sentinels are that
# binary with `--sentinel` (tests/common/topo.rs; a Valkey build has no `redis-sentinel`);
# `redis-cli` stays Debian's, which speaks to all of them (`--cluster create` included).
# Each server is started once first: one that does not start fails the run, named. TLS is
# tried the same way (`--tls-port` with a throwaway certificate): a build without it skips
# tests/tls.rs alone, and says so.
#
#   scripts/compat.sh [SERVER…]      SERVER: redis-6.2.5, redis-8.2.3, valkey-9.1.2 (default: all)
#   COMPAT_TESTS="serve acl" scripts/compat.sh redis-6.2.5    only these test files
# Logs: target/compat/<server>/<file>.log; scripts/compat_matrix.py turns them into the table
# (and, for a whole run, docs/compat-matrix.md). Exit 1 when any test failed or a server did
# not start.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
servers_dir="$root/target/servers"
out_dir="$root/target/compat"

all_servers=(redis-6.2.5 redis-8.2.3 valkey-9.1.2)
# Every integration test file whose subject is what a server does (tls last: skipped on
# builds without TLS). Files that start a server only to have a target (the HTTP, log
# intake, rules, dashboard and package tests) run on Debian's in `make test` alone.
all_files="serve target_info tracking lifecycle sampler headroom stall cluster sentinel managed discover inspect cli
  reload many_targets advise keyed_events drill drill_inprocess drill_scenarios drill_live drill_freeze
  drill_freeze_safety freeze_workers server_commands pubsub acl tls"
files=(${COMPAT_TESTS:-$all_files})
whole=whole
[ -n "${COMPAT_TESTS:-}" ] && whole=part
[ $# -gt 0 ] && all_servers=("$@") && whole=part

binary_of() { case "$1" in valkey-*) echo "$servers_dir/$1/valkey-server" ;; *) echo "$servers_dir/$1/redis-server" ;; esac; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Start $1 with `--port` (and the rest of the arguments) and PING it; 0 when it answered.
starts() {
  local bin=$1 port dir ok=1
  shift
  port=$(free_port)
  dir=$(mktemp -d)
  "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --logfile "$dir/log" "$@" &
  local pid=$!
  for _ in $(seq 50); do
    if redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; then ok=0; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [ $ok -ne 0 ] && last_log=$(tail -n 3 "$dir/log" 2>/dev/null | tr '\n' ' ')
  rm -rf "$dir"
  return $ok
}

# Whether $1 speaks TLS: started with `--tls-port` and a throwaway certificate, it answers
# `redis-cli --tls` there. Sets `tls_why` when it does not.
has_tls() {
  local bin=$1 dir port pid ok=1
  dir=$(mktemp -d)
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -keyout "$dir/key.pem" -out "$dir/cert.pem" >/dev/null 2>&1
  port=$(free_port)
  "$bin" --port 0 --tls-port "$port" --bind 127.0.0.1 --save '' --dir "$dir" --logfile "$dir/log" \
    --tls-cert-file "$dir/cert.pem" --tls-key-file "$dir/key.pem" --tls-ca-cert-file "$dir/cert.pem" \
    --tls-auth-clients no >"$dir/out" 2>&1 &
  pid=$!
  for _ in $(seq 50); do
    if redis-cli --tls --cacert "$dir/cert.pem" -p "$port" PING 2>/dev/null | grep -q PONG; then ok=0; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if [ $ok -ne 0 ]; then
    tls_why=$(cat "$dir/log" "$dir/out" 2>/dev/null | grep -E 'TLS|tls|directive' | tail -n 2 | tr '\n' ' ' \
      | sed -E 's/[0-9]+:[A-Z] [0-9]+ [A-Za-z]+ [0-9]+ [0-9:.]+ [#*] //g; s/ +$//')
    [ -n "$tls_why" ] || tls_why="it did not answer over TLS"
  fi
  rm -rf "$dir"
  return $ok
}

started=$(date +%s)
echo "building the tests once" >&2
mkdir -p "$out_dir"
# The commit tested, and each test file's binary, taken now: a tree edited during the run
# changes neither (the binaries run directly, never rebuilt).
scripts/compat_matrix.py --commit >"$out_dir/commit"
cargo test --locked --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])' >"$out_dir/binaries" \
  || { cargo test --locked --no-run; exit 1; }
binary_of_test() { awk -v f="$1" '$1 == f { print $2 }' "$out_dir/binaries"; }

for server in "${all_servers[@]}"; do
  bin=$(binary_of "$server")
  if [ ! -x "$bin" ]; then
    echo "compat: $server: $bin is missing — run scripts/setup.sh compat (make compat does)" >&2
    exit 1
  fi
  last_log=""
  if ! starts "$bin"; then
    echo "compat: $server ($bin) did not start: $last_log" >&2
    exit 1
  fi
  tls=yes
  tls_why=""
  has_tls "$bin" || tls=no
  rm -rf "${out_dir:?}/$server"
  mkdir -p "$out_dir/$server"
  server_started=$(date +%s)
  for f in "${files[@]}"; do
    if [ "$f" = tls ] && [ "$tls" = no ]; then
      echo "this build has no TLS (started with --tls-port: $tls_why)" >"$out_dir/$server/$f.skipped"
      echo "compat: $server: tests/tls.rs skipped — this build has no TLS ($tls_why)" >&2
      continue
    fi
    log="$out_dir/$server/$f.log"
    t0=$(date +%s)
    # --show-output: the lines naming what the build lacked (tests/common/compat.rs).
    exe=$(binary_of_test "$f")
    [ -n "$exe" ] || { echo "compat: tests/$f.rs was not built" >&2; exit 1; }
    LOCKWATCH_REDIS_SERVER="$bin" "$exe" --show-output >"$log" 2>&1
    echo $? >"$out_dir/$server/$f.rc"
    passed=$(grep -hE '^test result:' "$log" | grep -oE '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
    nfailed=$(grep -hE '^test result:' "$log" | grep -oE '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
    echo "compat: $server: $f: $passed passed, $nfailed failed ($(( $(date +%s) - t0 )) s) — $log" >&2
    grep -h '^compat-lacks:' "$log" | sort -u | sed "s/^/compat: $server: $f: /" >&2
  done
  echo "$(( $(date +%s) - server_started ))" >"$out_dir/$server/time"
done

# The table (and docs/compat-matrix.md when the whole matrix ran), then each failure.
scripts/compat_matrix.py "${all_servers[*]}" "${files[*]}" "$whole"
rc=$?
echo "compat: $(( ($(date +%s) - started) / 60 )) min $(( ($(date +%s) - started) % 60 )) s"
exit $rc
