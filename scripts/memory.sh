#!/usr/bin/env bash
# scripts/memory.sh BINARY N [warm]: memory per tracked lock in events mode. A private
# redis-server with keyspace notifications, `BINARY serve` watching it; N locks are written
# (SET NX PX, 23-byte keys) in chunks of 50,000, each counted before the next, into a fresh
# exporter (cold) or one that first took 1,000,000 acquire/release transitions (warm, in
# chunks the same way: a faster burst overflows Redis's pub/sub buffer on a loaded machine). Prints
# the RSS before and 2 s after, and the growth per lock. Used by `scripts/bench.sh memory`.
set -euo pipefail
bin=$1; n=$2; warm=${3:-}
work=$(mktemp -d)
. "$(dirname "$0")/bench-common.sh"
bench_setup "$work"
"$bin" serve -c $work/c.toml --log-level warn &
lpid=$!
trap 'kill $lpid $rpid 2>/dev/null; rm -rf $work' EXIT
m() { curl -sf http://127.0.0.1:$lport/metrics | awk -v p="$1" 'index($0,p)==1{s+=$NF} END{printf "%d", s}'; }
for _ in $(seq 200); do [ "$(m lockwatch_notifications_connected)" = 1 ] && break; sleep 0.05; done
if [ -n "$warm" ]; then
  # a churn first: 1,000,000 acquire + release on 20,000 keys, as a load would leave the exporter
  for ((c = 0; c < 500000; c += 25000)); do
    awk -v a=$c 'BEGIN{for(i=a;i<a+25000;i++){k=i%20000; printf "SET bench:lock:w:%d o%d NX PX 30000\r\nDEL bench:lock:w:%d\r\n", k, i, k}}' | redis-cli -p $rport --pipe >/dev/null
    for _ in $(seq 1200); do [ "$(m lockwatch_lock_transitions_total)" -ge $(( (c + 25000) * 2 )) ] && break; sleep 0.05; done
  done
  sleep 2
fi
base=$(m lockwatch_lock_transitions_total)
sleep 0.5
before=$(awk '/VmRSS/{print $2}' /proc/$lpid/status)
t0=$(date +%s.%N)
# in chunks of 50,000, each counted before the next (a faster burst overflows Redis's
# pub/sub output buffer on a loaded machine, and the subscriber is disconnected)
for ((c = 0; c < n; c += 50000)); do
  awk -v a=$c -v n=$n 'BEGIN{for(i=a;i<a+50000&&i<n;i++) printf "SET bench:lock:mem:%08d owner-%08d-0123456789abcdef NX PX 600000\r\n", i, i}' | redis-cli -p $rport --pipe >/dev/null
  for _ in $(seq 1200); do [ $(( $(m lockwatch_lock_transitions_total) - base )) -ge $((c < n - 50000 ? c + 50000 : n)) ] && break; sleep 0.05; done
done
t1=$(date +%s.%N)
held=$(m 'lockwatch_locks_held{')
sleep 2
after=$(awk '/VmRSS/{print $2}' /proc/$lpid/status)
hwm=$(awk '/VmHWM/{print $2}' /proc/$lpid/status)
# (a revision before events mode keeps no lock table from notifications: held stays 0)
[ "$held" = "$n" ] || echo "$bin: the lock table holds $held of $n locks" >&2
python3 -c "print(f'{($after-$before)*1024/$n:.0f} $before $after $hwm {$t1-$t0:.1f}')"
