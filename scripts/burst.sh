#!/usr/bin/env bash
# scripts/burst.sh BINARY: the watcher's CPU under a burst, against the Redis it watches.
# A private redis-server with keyspace notifications, `BINARY serve` watching
# it in events mode. First 1,000,000 locks are loaded (SET NX PX, chunks of 50,000, each counted
# before the next) and flushed (DEL of each, the same way: a FLUSHDB publishes no per-key event,
# so the tables would keep them), leaving the exporter's tables grown to a million and emptied.
# Then the burst, three `redis-benchmark -P 16 -c 20 -r 100000 -n 500000` runs one after the
# other on 100,000 lock keys: `SET key tok PX 30000`, `PEXPIRE key 30000`, `DEL key`.
#
# CPU seconds of both processes (utime + stime in /proc/PID/stat) from just before the burst
# until lockwatch has counted everything: its transitions and notifications counters unchanged
# for 1 s (the reads it sends after the last event have answered by then; the idle second and
# the polls of /metrics are in both figures).
#
# Redis CPU of lockwatch's own commands: `INFO commandstats`, reset before the burst. The burst
# sends only SET, PEXPIRE and DEL, so every other command but this script's (INFO, CONFIG,
# DBSIZE) is lockwatch's: its reads (MULTI, MGET, PTTL, HGETALL), its canary, its
# checks. A command run inside MULTI/EXEC is counted in its own line as well as in EXEC's,
# so EXEC is left out and each command counts once. This is measured in the same run as the
# burst, apart from the pub/sub delivery and from the machine's load (a run without lockwatch
# would differ from this one by noise of the same size as the reads); like the burst
# commands' usec, it leaves out parsing and writing replies, so the ratio compares like with
# like.
#
# Checks: the counters settle; the lock table's `lockwatch_locks_held` equals the lock keys in
# Redis (`SCAN MATCH bench:lock:*`, called DBSIZE below; a build
# with no events-mode lock table, such as f2bf837, holds 0: said, not failed); and over the
# burst, acquired − released − expired − evicted = the lock keys after − before.
#
# LOCKWATCH_BURST_COMMANDS and LOCKWATCH_BURST_KEYS: each run's -n (500,000) and -r (100,000).
# LOCKWATCH_BURST_PERF=FILE: `perf record -F 499 --call-graph dwarf` of lockwatch over the
# burst into FILE (the profile of docs/performance.md; use a `--profile bench` binary, which
# keeps its symbols). LOCKWATCH_BURST_LOAD: the locks loaded and flushed first (1,000,000).
# LOCKWATCH_BURST_METRICS=FILE: lockwatch's /metrics at the end into FILE, its held locks
# (/api/v1/locks) into FILE.locks.json and the lock keys in Redis into FILE.keys.
#
# Prints one line: lockwatch_cpu_s redis_cpu_s lockwatch_reads_usec burst_cmds_usec transitions
# notifications burst_s exact(yes|no|n/a) and, on stderr, the details.
set -euo pipefail
bin=$1
work=$(mktemp -d)
. "$(dirname "$0")/bench-redis.sh"
trap 'kill ${lpid:-} $rpid 2>/dev/null; wait ${lpid:-} $rpid 2>/dev/null; rm -rf $work' EXIT
"$bin" serve -c "$work/c.toml" --log-level warn &
lpid=$!
m() { curl -sf "http://127.0.0.1:$lport/metrics" | awk -v p="$1" 'index($0,p)==1{s+=$NF} END{printf "%d", s}'; }
r() { redis-cli -p "$rport" "$@"; }
tick=$(getconf CLK_TCK)
cpu() { awk -v t="$tick" '{printf "%.2f", ($14+$15)/t}' "/proc/$1/stat"; }
for _ in $(seq 400); do [ "$(m lockwatch_notifications_connected)" = 1 ] && break; sleep 0.05; done
[ "$(m lockwatch_notifications_connected)" = 1 ] || { echo "$bin: not subscribed" >&2; exit 1; }
# waits until the transitions counter is at least $1 (the load and the flush: exact figures)
upto() { for _ in $(seq 1200); do [ "$(m lockwatch_lock_transitions_total)" -ge "$1" ] && return 0; sleep 0.05; done
  echo "$bin: counted $(m lockwatch_lock_transitions_total) transitions of $1" >&2; return 1; }
n=${LOCKWATCH_BURST_LOAD:-1000000} # the locks loaded and flushed first
t0=$(m lockwatch_lock_transitions_total)
for ((c = 0; c < n; c += 50000)); do
  awk -v a=$c 'BEGIN{for(i=a;i<a+50000;i++) printf "SET bench:lock:load:%08d owner-%08d NX PX 600000\r\n", i, i}' | r --pipe >/dev/null
  upto $((t0 + c + 50000))
done
for ((c = 0; c < n; c += 50000)); do
  awk -v a=$c 'BEGIN{for(i=a;i<a+50000;i++) printf "DEL bench:lock:load:%08d\r\n", i}' | r --pipe >/dev/null
  upto $((t0 + n + c + 50000))
done
sleep 1
# the counters by kind
kinds() { curl -sf "http://127.0.0.1:$lport/metrics" | awk '/^lockwatch_lock_transitions_total\{/{match($0,/kind="[a-z]+"/); k=substr($0,RSTART+6,RLENGTH-7); s[k]+=$NF} END{printf "%d %d %d %d %d\n", s["acquired"], s["released"], s["renewed"], s["expired"], s["evicted"]}'; }
read -r a0 rl0 rn0 x0 e0 < <(kinds)
# lock keys in Redis (DBSIZE would count a canary key of lockwatch's, PX 300, now and then)
locks() { r --scan --pattern 'bench:lock:*' | wc -l; }
db0=$(locks)
tr0=$(m lockwatch_lock_transitions_total)
nr0=$(m lockwatch_notifications_received_total)
r CONFIG RESETSTAT >/dev/null
if [ -n "${LOCKWATCH_BURST_PERF:-}" ]; then
  perf record -F 499 --call-graph dwarf,16384 -p "$lpid" -o "$LOCKWATCH_BURST_PERF" >/dev/null 2>&1 &
  perfpid=$!
  sleep 1
fi
lc0=$(cpu "$lpid"); rc0=$(cpu "$rpid")
b0=$(date +%s.%N)
for cmd in "SET bench:lock:__rand_int__ tok PX 30000" "PEXPIRE bench:lock:__rand_int__ 30000" "DEL bench:lock:__rand_int__"; do
  # shellcheck disable=SC2086
  redis-benchmark -p "$rport" -P 16 -c 20 -r "${LOCKWATCH_BURST_KEYS:-100000}" -n "${LOCKWATCH_BURST_COMMANDS:-500000}" -q $cmd >/dev/null
done
b1=$(date +%s.%N)
# settled: both counters unchanged for 1 s (10 polls)
last="" same=0
for _ in $(seq 1200); do
  now="$(m lockwatch_lock_transitions_total) $(m lockwatch_notifications_received_total)"
  if [ "$now" = "$last" ]; then same=$((same + 1)); [ $same -ge 10 ] && break; else same=0; last=$now; fi
  sleep 0.1
done
lc1=$(cpu "$lpid"); rc1=$(cpu "$rpid")
if [ -n "${perfpid:-}" ]; then kill -INT "$perfpid"; wait "$perfpid" 2>/dev/null || true; fi
[ $same -ge 10 ] || { echo "$bin: the counters did not settle within 120 s" >&2; exit 1; }
stats=$(r INFO commandstats | tr -d '\r')
read -r a1 rl1 rn1 x1 e1 < <(kinds)
db1=$(locks)
held=$(m 'lockwatch_locks_held{')
if [ -n "${LOCKWATCH_BURST_METRICS:-}" ]; then
  curl -sf "http://127.0.0.1:$lport/metrics" > "$LOCKWATCH_BURST_METRICS"
  curl -sf "http://127.0.0.1:$lport/api/v1/locks?namespace=bench&limit=100000" > "$LOCKWATCH_BURST_METRICS.locks.json" || true
  r --scan --pattern 'bench:lock:*' | sort > "$LOCKWATCH_BURST_METRICS.keys"
fi
tr1=$(m lockwatch_lock_transitions_total)
nr1=$(m lockwatch_notifications_received_total)
python3 - "$stats" <<'PY' > "$work/usec"
import re, sys
burst, ours = {"set", "pexpire", "del"}, {"info", "config", "dbsize", "config|get", "config|resetstat"}
stats = {m[0]: (int(m[1]), int(m[2])) for m in re.findall(r"^cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)", sys.argv[1], re.M)}
# Every command lockwatch ran is counted once, in its own line: those inside a MULTI/EXEC
# are there too, so EXEC (their sum) is left out.
lw = {c: v for c, v in stats.items() if c not in burst | ours | {"exec"}}
print(sum(u for _, u in lw.values()), sum(stats.get(c, (0, 0))[1] for c in burst))
print(" ".join(f"{c}:{n}:{u}" for c, (n, u) in sorted(stats.items())), file=sys.stderr)
PY
read -r lw_usec burst_usec < <(head -1 "$work/usec")
change=$(( (a1 - a0) - (rl1 - rl0) - (x1 - x0) - (e1 - e0) ))
exact=yes
[ "$change" -eq $((db1 - db0)) ] || { exact=no; echo "$bin: acquired − released − expired − evicted = $change, DBSIZE changed by $((db1 - db0))" >&2; }
if [ "$held" = 0 ] && [ "$db1" != 0 ]; then
  echo "$bin: no events-mode lock table (locks_held 0; DBSIZE $db1)" >&2
  [ $exact = yes ] && exact=n/a
elif [ "$held" != "$db1" ]; then
  exact=no; echo "$bin: locks_held $held, DBSIZE $db1" >&2
fi
echo "$bin: transitions acquired $((a1 - a0)) released $((rl1 - rl0)) renewed $((rn1 - rn0)) expired $((x1 - x0)) evicted $((e1 - e0)); DBSIZE $db0 → $db1; locks_held $held" >&2
python3 -c "print(f'{$lc1-$lc0:.2f} {$rc1-$rc0:.2f} $lw_usec $burst_usec $((tr1 - tr0)) $((nr1 - nr0)) {$b1-$b0:.1f} $exact')"
