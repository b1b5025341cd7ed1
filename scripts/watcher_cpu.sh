#!/usr/bin/env bash
# scripts/watcher_cpu.sh BINARY CYCLES: callgrind instruction count of `BIN serve` (events mode) while CYCLES
# acquire (SET NX PX) -> renew (compare-and-pexpire) -> release (compare-and-delete) cycles run.
set -euo pipefail
bin=$1; n=$2; work=$(mktemp -d)
. "$(dirname "$0")/bench-redis.sh"
valgrind --tool=callgrind --callgrind-out-file=$work/cg.out "$bin" serve -c $work/c.toml --log-level warn 2>$work/vg.log &
lpid=$!
trap 'kill $rpid 2>/dev/null; rm -rf $work' EXIT
m() { curl -sf -m 5 http://127.0.0.1:$lport/metrics | awk -v p="$1" 'index($0,p)==1{s+=$NF} END{printf "%d", s}'; }
for _ in $(seq 600); do [ "$(m lockwatch_notifications_connected 2>/dev/null || echo 0)" = 1 ] && break; sleep 0.1; done
R='if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end'
D='if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end'
for ((c = 0; c < n; c += 1000)); do
  python3 - $c "$R" "$D" > $work/p.txt <<'PY'
import sys
a, r, d = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def cmd(*xs):
    return f"*{len(xs)}\r\n" + "".join(f"${len(x.encode())}\r\n{x}\r\n" for x in xs)
out = []
for i in range(a, a + 1000):
    k, t = f"bench:lock:{i % 5000}", f"o{i}"
    out += [cmd("SET", k, t, "NX", "PX", "30000"), cmd("EVAL", r, "1", k, t, "30000"), cmd("EVAL", d, "1", k, t)]
sys.stdout.write("".join(out))
PY
  redis-cli -p $rport --pipe < $work/p.txt >/dev/null
  for _ in $(seq 600); do [ "$(m lockwatch_lock_transitions_total)" -ge $(( (c + 1000) * 3 )) ] && break; sleep 0.1; done
done
echo "counted $(m lockwatch_lock_transitions_total) of $((n * 3))"
kill -TERM $lpid; wait $lpid 2>/dev/null || true
grep -E "Collected" $work/vg.log
