#!/usr/bin/env bash
# scripts/memory.sh BINARY N [warm]: memory per tracked lock in events mode. A private
# redis-server with keyspace notifications, `BINARY serve` watching it; N locks are written
# (SET NX PX, 23-byte keys) in chunks of 50,000, each counted before the next, into a fresh
# exporter (cold) or one that first took 1,000,000 acquire/release transitions (warm, in
# chunks the same way: a faster burst overflows Redis's pub/sub buffer on a loaded machine;
# LOCKWATCH_MEMORY_CHURN acquire/release pairs, 500,000 by default). Prints one line: the
# growth per lock (bytes), the RSS before and 2 s after, the peak (KiB), the load's seconds
# and the locks held. A wait that times out fails (exit 1). Used by `make bench`'s memory
# section (scripts/bench/memory.py).
set -euo pipefail
bin=$1; n=$2; warm=${3:-}; churn=${LOCKWATCH_MEMORY_CHURN:-500000}
work=$(mktemp -d)
. "$(dirname "$0")/bench-redis.sh"
trap 'kill $rpid ${lpid:-} 2>/dev/null; wait 2>/dev/null; rm -rf $work' EXIT
"$bin" serve -c "$work/c.toml" --log-level warn &
lpid=$!
m() { curl -sf "http://127.0.0.1:$lport/metrics" | awk -v p="$1" 'index($0,p)==1{s+=$NF} END{printf "%d", s}'; }
# until SECONDS WHAT VALUE: polls (every 50 ms) until the metric WHAT is at least VALUE
until_at_least() {
  local v
  for _ in $(seq $(($1 * 20))); do v=$(m "$2") || v=0; [ "$v" -ge "$3" ] && return 0; sleep 0.05; done
  echo "memory.sh $bin: $2 is ${v:-none}, not $3 within $1 s" >&2; exit 1
}
until_at_least 10 lockwatch_notifications_connected 1
if [ -n "$warm" ]; then
  # a churn first: acquire + release on 20,000 keys, as a load would leave the exporter
  for ((c = 0; c < churn; c += 25000)); do
    awk -v a=$c 'BEGIN{for(i=a;i<a+25000;i++){k=i%20000; printf "SET bench:lock:w:%d o%d NX PX 30000\r\nDEL bench:lock:w:%d\r\n", k, i, k}}' | redis-cli -p "$rport" --pipe >/dev/null
    until_at_least 60 lockwatch_lock_transitions_total $(( (c + 25000) * 2 ))
  done
  sleep 2
fi
base=$(m lockwatch_lock_transitions_total)
sleep 0.5
before=$(awk '/VmRSS/{print $2}' "/proc/$lpid/status")
t0=$(date +%s%N)
# in chunks of 50,000, each counted before the next (a faster burst overflows Redis's
# pub/sub output buffer on a loaded machine, and the subscriber is disconnected)
for ((c = 0; c < n; c += 50000)); do
  awk -v a=$c -v n="$n" 'BEGIN{for(i=a;i<a+50000&&i<n;i++) printf "SET bench:lock:mem:%08d owner-%08d-0123456789abcdef NX PX 600000\r\n", i, i}' | redis-cli -p "$rport" --pipe >/dev/null
  until_at_least 60 lockwatch_lock_transitions_total $((base + (c < n - 50000 ? c + 50000 : n)))
done
t1=$(date +%s%N)
held=$(m 'lockwatch_locks_held{')
sleep 2
after=$(awk '/VmRSS/{print $2}' "/proc/$lpid/status")
hwm=$(awk '/VmHWM/{print $2}' "/proc/$lpid/status")
# (a revision before events mode keeps no lock table from notifications: held stays 0)
[ "$held" = "$n" ] || echo "memory.sh $bin: the lock table holds $held of $n locks" >&2
awk -v a="$after" -v b="$before" -v n="$n" -v h="$hwm" -v t="$((t1 - t0))" -v held="$held" \
  'BEGIN{printf "%.1f %d %d %d %.2f %d\n", (a - b) * 1024 / n, b, a, h, t / 1e9, held}'
