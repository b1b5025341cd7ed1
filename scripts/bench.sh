#!/usr/bin/env bash
# `make bench` (all sections) or `scripts/bench.sh SECTION…`:
#   sampler    one sample pass over 100,000 and 1,000,000 lock keys on a local redis-server,
#              beside a SCAN-only walk of the same keys (the floor: nothing read),
#              the exporter's memory per tracked lock, and — on the same 100,000 keys in the
#              same run — the scrape time of prometheus-redis-exporter with --check-keys;
#   memory     memory per tracked lock in events mode, 1,000,000 locks announced by
#              notifications, cold and warm (scripts/memory.sh);
#   lifecycle  the lifecycle watcher under a rising rate of acquire/renew/release cycles
#              (its own redis-server and exporter, benches/lifecycle_load.rs);
#   burst      the watcher under a burst (scripts/burst.sh): after 1,000,000 locks loaded and
#              flushed, redis-benchmark -P 16 -c 20 sends 500,000 each of SET PX, PEXPIRE and DEL
#              on 100,000 lock keys; CPU seconds of lockwatch and of redis-server until every
#              event is counted, lockwatch ÷ Redis, and the Redis time of lockwatch's own
#              commands (INFO commandstats) against the burst's, each build against its own
#              fresh redis-server;
#   tracking   a shared database of 10,000,000 cache keys (~2,000 writes/s) and 10,000 lock
#              keys with churn: Redis CPU added by lockwatch in events mode and in scan mode
#              (each against the workload alone), time from SIGSTOP of a renewing holder to
#              its overdue flag in both modes, lockwatch CPU, memory per tracked lock in events
#              mode (1,000,000 locks), and prometheus-redis-exporter --check-keys on the same data;
#   intake     classification (criterion), then a generated log of 5,000,000 lines (1% lock
#              events, mixed formats) through lockwatch and through Debian's mtail with an
#              equivalent program, both pinned to one core, side by side with hyperfine;
#              and `lockwatch serve` tailing the same file.
#   shippers   OTLP/HTTP intake on one core: 2,000,000 records of the generated log, one line
#              each, as protobuf batches of 512 POSTed to /v1/logs (examples/otlp_load.rs, 4
#              requests in flight, on another core), against `lockwatch serve` tailing the same
#              lines from a file, in the same run; records/s, lines/s and their ratio.
#   api        GET /api/v1/locks?limit=10 with 1,000,000 tracked locks: median time of 11
#              requests and the RSS five concurrent requests add (peak, after resetting it),
#              side by side for this build and the base (LOCKWATCH_BENCH_API_BASE, e.g.
#              c531961, the last commit that copied every lock to answer, overrides it).
#   exposition /metrics encoding of a demo-sized exporter (benches/exposition.rs, criterion):
#              the 0.0.4 text format against OpenMetrics, without and with an exemplar on
#              every lock-event series, the encoders alone and a whole scrape's encoding;
#              this build only (the base has no OpenMetrics).
#   targets    one exporter watching 100 small redis-servers with 3 namespaces each (10 locks
#              per namespace, notifications on): RSS per target (against one target), Redis
#              connections per target, /metrics size and scrape time (median of 21), and the
#              slowest target's pass duration; this build only (no base: f2bf837 has no reload
#              or many-target figures to compare).
#   stall      the lead time of a stalled holder's overdue flag (scripts/stall.sh, issue 43): the
#              TTL left on its key (30 s, renewed every 10 s: ideally 15 s) when
#              lockwatch_locks_renewal_overdue first shows it, beside 2,000 locks of an hour
#              with churn and 5,000,000 cache keys, in events and in scan mode, each run
#              against its own fresh redis-server; for this build and the base
#              (LOCKWATCH_BENCH_STALL_BASE, default e33c20a: the last main with the bug).
#
# Every other section runs this build beside a base revision, built once from `git archive` into
# target/bench-base (LOCKWATCH_BENCH_BASE, default f2bf837; the api section's own
# LOCKWATCH_BENCH_API_BASE overrides it there), taking turns on the same data, and prints
# the ratio this build ÷ base (below 1: cheaper or faster now).
# Results: bench-results/summary.md (and criterion's report under target/criterion).
set -euo pipefail
cd "$(dirname "$0")/.."
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(sampler memory lifecycle burst intake shippers tracking api targets exposition stall)
out=bench-results
mkdir -p "$out"
: > "$out/summary.md"
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # port [polls of 50 ms, 200 by default]
  for _ in $(seq "${2:-200}"); do (echo > /dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done
  echo "nothing listens on $1" >&2; return 1; }

cargo build --release --locked --bin lockwatch >&2
new_bin=target/release/lockwatch
base_rev=${LOCKWATCH_BENCH_BASE:-f2bf837}

# The base revision's binary, built once per revision from `git archive`.
base_bin() { # revision -> path of its release binary
  local rev=$1 dir="$(pwd)/target/bench-base/$1"
  if [ ! -x "$dir/release/lockwatch" ]; then
    echo "building $rev (the base) from git archive…" >&2
    rm -rf "$work/base-$rev"; mkdir -p "$work/base-$rev"
    git archive "$rev" | tar -x -C "$work/base-$rev"
    LOCKWATCH_GIT_COMMIT="$rev" CARGO_TARGET_DIR="$dir" cargo build --release --locked --bin lockwatch \
      --manifest-path "$work/base-$rev/Cargo.toml" >&2
  fi
  echo "$dir/release/lockwatch"
}
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'{a/b:.2f}×' if b else '—')" "$1" "$2"; }

sampler() {
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" --daemonize no &
pids+=($!)
wait_port "$rport"
load() { # db n
  awk -v n="$2" 'BEGIN{for(i=0;i<n;i++) printf "SET bench:lock:%d owner-%d PX 3600000\r\n", i, i}' \
    | redis-cli -p "$rport" -n "$1" --pipe >/dev/null
}
echo "loading 100,000 keys (db 1) and 1,000,000 keys (db 2)…" >&2
load 1 100000
load 2 1000000

# 1. Pass time: criterion, on the same server.
LOCKWATCH_BENCH_REDIS_URL="redis://127.0.0.1:$rport/0" LOCKWATCH_BENCH_SIZES=100000,1000000 \
  cargo bench --locked --bench sample_pass -- --noplot >&2
mean_s() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['mean']['point_estimate']/1e9)" "target/criterion/sample_pass/$1_keys/new/estimates.json"; }
pass100k=$(mean_s 100000)
pass1m=$(mean_s 1000000)
scan100k=$(mean_s scan_only_100000)
scan1m=$(mean_s scan_only_1000000)

# 2. Memory: peak RSS of `lockwatch serve` tracking 0, 100k and 1M locks.
rss_kib() { # db [binary] -> "VmHWM_KiB sample_duration_s"
  local lport cfg pid
  lport=$(free_port)
  cfg="$work/lw-$1.toml"
  cat > "$cfg" <<TOML
[server]
listen = "127.0.0.1:$lport"
[[target]]
name = "bench"
url = "redis://127.0.0.1:$rport/$1"
sample_interval = "10s"
sample_budget = "10s"
scan_count = 1000
notifications = "off"
[[namespace]]
name = "bench"
pattern = "bench:lock:*"
ttl = "3600s"
renew_every = "1200s"
TOML
  "${2:-$new_bin}" serve -c "$cfg" --log-level warn &
  pid=$!
  wait_port "$lport"
  for _ in $(seq 600); do
    passes=$(curl -sf "http://127.0.0.1:$lport/metrics" | awk '/^lockwatch_sample_passes_total/{print $2}')
    [ "${passes:-0}" -ge 2 ] && break
    sleep 0.1
  done
  local dur
  dur=$(curl -sf "http://127.0.0.1:$lport/metrics" | awk '/^lockwatch_sample_duration_seconds/{print $2}')
  local hwm
  hwm=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$hwm $dur"
}
read -r rss0 _ < <(rss_kib 3)
read -r rss100k dur100k < <(rss_kib 1)
read -r rss1m dur1m < <(rss_kib 2)
per_lock() { python3 -c "print(round(($1-$2)*1024/$3))"; }
b100k=$(per_lock "$rss100k" "$rss0" 100000)
b1m=$(per_lock "$rss1m" "$rss0" 1000000)
local base_b rss0b rss1mb dur1mb
base_b=$(base_bin "$base_rev")
read -r rss0b _ < <(rss_kib 3 "$base_b")
read -r rss1mb dur1mb < <(rss_kib 2 "$base_b")
b1mb=$(per_lock "$rss1mb" "$rss0b" 1000000)

# 3. The peer: prometheus-redis-exporter --check-keys on the same 100,000 keys.
eport=$(free_port)
prometheus-redis-exporter -redis.addr "redis://127.0.0.1:$rport" -check-keys 'db1=bench:lock:*' \
  -web.listen-address "127.0.0.1:$eport" >"$work/redis_exporter.log" 2>&1 &
pids+=($!)
wait_port "$eport"
checked=$(curl -sf "http://127.0.0.1:$eport/metrics" | grep -c '^redis_key_size{' || true)
hyperfine --warmup 1 --runs 5 --export-json "$out/redis_exporter.json" \
  "curl -sf -o /dev/null http://127.0.0.1:$eport/metrics" >&2
peer=$(python3 -c "import json; print(json.load(open('$out/redis_exporter.json'))['results'][0]['mean'])")
ratio=$(python3 -c "print(round($peer/$pass100k, 1))")

cat > "$out/sampler.md" <<MD
### Sampler
| measurement | value |
|---|---|
| lockwatch pass, 100,000 keys (criterion mean) | $(python3 -c "print(f'{$pass100k*1000:.0f} ms, {100000/$pass100k:,.0f} keys/s')") |
| lockwatch pass, 1,000,000 keys (criterion mean) | $(python3 -c "print(f'{$pass1m:.2f} s, {1000000/$pass1m:,.0f} keys/s')") |
| lockwatch serve, peak RSS with 0 / 100k / 1M locks | $((rss0/1024)) / $((rss100k/1024)) / $((rss1m/1024)) MiB |
| exporter memory per tracked lock (100k / 1M) | $b100k / $b1m bytes |
| pass duration reported by serve (100k / 1M) | ${dur100k} s / ${dur1m} s |
| prometheus-redis-exporter --check-keys scrape, 100,000 keys (hyperfine mean of 5) | $(python3 -c "print(f'{$peer:.2f} s')") ($checked keys exported) |
| ratio, peer scrape ÷ lockwatch pass on the same 100,000 keys | ${ratio}× |
| SCAN-only walk, same pages (\`SCAN MATCH … COUNT 1000\`, nothing read), 100,000 / 1,000,000 keys (criterion mean) | $(python3 -c "print(f'{$scan100k*1000:.0f} ms / {$scan1m:.2f} s')") |
| pass ÷ SCAN-only walk (criterion, 100,000 / 1,000,000 keys) | $(ratio "$pass100k" "$scan100k") / $(ratio "$pass1m" "$scan1m") |
| pass reported by serve ÷ SCAN-only walk, 1,000,000 keys | $(ratio "$dur1m" "$scan1m") |

| side by side, scan mode, 1,000,000 keys | base ($base_rev) | this build | this ÷ base |
|---|---:|---:|---:|
| pass duration reported by serve | ${dur1mb} s | ${dur1m} s | $(ratio "$dur1m" "$dur1mb") |
| the same ÷ the SCAN-only walk | $(ratio "$dur1mb" "$scan1m") | $(ratio "$dur1m" "$scan1m") | |
| memory per tracked lock (peak RSS) | $b1mb B | $b1m B | $(ratio "$b1m" "$b1mb") |
MD
kill "${pids[@]}" 2>/dev/null || true
pids=()
}

# The lifecycle watcher under load (starts its own redis-server and lockwatch serve), the
# base's binary and this build's taking turns under the same harness: the load steps with
# the memory per tracked lock after them (warm), then a fresh exporter filled only by the
# notifications of the locks (cold).
lifecycle() {
local base_b rates=${LOCKWATCH_LOAD_RATES:-10000,25000,50000,100000,200000,300000,400000}
base_b=$(base_bin "$base_rev")
cargo bench --locked --bench lifecycle_load --no-run >&2
run_ll() { LOCKWATCH_BENCH_BIN="$1" LOCKWATCH_LOAD_RATES="$2" cargo bench --locked --bench lifecycle_load 2>/dev/null; }
run_ll "$base_b" "$rates" > "$work/ll-base-warm.md"
run_ll "$new_bin" "$rates" > "$work/ll-new-warm.md"
run_ll "$base_b" none > "$work/ll-base-cold.md"
run_ll "$new_bin" none > "$work/ll-new-cold.md"
python3 - "$work" "$base_rev" > "$out/lifecycle.md" <<'PY'
import re, sys
work, base = sys.argv[1], sys.argv[2]
def read(name):
    text = open(f"{work}/ll-{name}.md").read()
    rows = {int(r[0]): r for r in (l.strip("|").split("|") for l in text.splitlines() if re.match(r"^\| \d", l))}
    rows = {k: [c.strip() for c in v] for k, v in rows.items()}
    mem = re.search(r"(\d+) bytes per tracked lock", text)
    locks = re.search(r"memory: (\d+) locks", text)
    return text, rows, float(mem.group(1)) if mem else float("nan"), locks.group(1) if locks else "?"
bw, nw, bc, nc = (read(n) for n in ("base-warm", "new-warm", "base-cold", "new-cold"))
r = lambda a, b: f"{a / b:.2f}×" if b else "—"
print("### Lifecycle watcher")
print(f"`benches/lifecycle_load.rs` of this tree, run with the base's binary ({base}) and this build's in turn.\n")
print(f"#### Base ({base})\n")
print(bw[0])
print("#### This build\n")
print(nw[0])
print("#### Side by side\n")
print(f"| measurement | base ({base}) | this build | this ÷ base |")
print("|---|---:|---:|---:|")
for rate in sorted(set(bw[1]) & set(nw[1])):
    b, n = bw[1][rate], nw[1][rate]
    print(f"| {rate}/s: counted/s | {b[2]} | {n[2]} | {r(float(n[2]), float(b[2]))} |")
    print(f"| {rate}/s: lockwatch CPU (cores) | {b[6]} | {n[6]} | {r(float(n[6]), float(b[6]))} |")
    print(f"| {rate}/s: redis CPU (cores) | {b[7]} | {n[7]} | {r(float(n[7]), float(b[7]))} |")
print(f"| memory per tracked lock, {nw[3]} held after the load steps (warm) | {bw[2]:.0f} B | {nw[2]:.0f} B | {r(nw[2], bw[2])} |")
print(f"| memory per tracked lock, {nc[3]} announced into a fresh exporter (cold) | {bc[2]:.0f} B | {nc[2]:.0f} B | {r(nc[2], bc[2])} |")
PY
}

# The watcher under a burst (scripts/burst.sh), the base's binary and this build's in turn,
# each against its own fresh redis-server; LOCKWATCH_BURST_RUNS (default 1) pairs of runs.
burst() {
local base_b runs=${LOCKWATCH_BURST_RUNS:-1} rows=()
base_b=$(base_bin "$base_rev")
for _ in $(seq "$runs"); do
  rows+=("$(scripts/burst.sh "$base_b") $(scripts/burst.sh "$new_bin")")
done
python3 - "$base_rev" "${rows[@]}" > "$out/burst.md" <<'PY'
import sys
base, rows = sys.argv[1], [r.split() for r in sys.argv[2:]]
r = lambda a, b: f"{a / b:.2f}×" if b else "—"
print("### The watcher under a burst (scripts/burst.sh)")
print("1,000,000 locks loaded and flushed, then `redis-benchmark -P 16 -c 20 -r 100000 -n 500000` of `SET key tok PX 30000`, `PEXPIRE key 30000` and `DEL key` on 100,000 lock keys, one after the other; CPU seconds (`/proc/PID/stat`) from the burst's start until lockwatch's counters settle. Redis time of lockwatch's commands: `INFO commandstats` usec of every command the burst does not send, against the usec of the burst's SET, PEXPIRE and DEL.")
print()
print(f"| run | build | lockwatch CPU | Redis CPU | lockwatch ÷ Redis | Redis usec, lockwatch's commands ÷ the burst's | transitions counted | notifications | burst | counts exact |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
for i, row in enumerate(rows, 1):
    for name, v in ((f"base ({base})", row[:8]), ("this build", row[8:])):
        lw, rc, lu, bu = float(v[0]), float(v[1]), float(v[2]), float(v[3])
        print(f"| {i} | {name} | {lw:.2f} s | {rc:.2f} s | {r(lw, rc)} | {lu/1e6:.3f} s ÷ {bu/1e6:.3f} s = {100*lu/bu if bu else 0:.1f} % | {int(v[4]):,} | {int(v[5]):,} | {float(v[6]):.1f} s | {v[7]} |")
print()
print("| side by side (run 1) | base | this build | this ÷ base |")
print("|---|---:|---:|---:|")
b, n = rows[0][:8], rows[0][8:]
for label, i in (("lockwatch CPU (s)", 0), ("Redis CPU (s)", 1)):
    print(f"| {label} | {float(b[i]):.2f} | {float(n[i]):.2f} | {r(float(n[i]), float(b[i]))} |")
print(f"| lockwatch ÷ Redis | {r(float(b[0]), float(b[1]))} | {r(float(n[0]), float(n[1]))} | |")
print(f"| Redis usec of lockwatch's commands ÷ the burst's | {100*float(b[2])/float(b[3]):.1f} % | {100*float(n[2])/float(n[3]):.1f} % | |")
PY
}

# Events mode against scan mode on a shared keyspace (see the header).
tracking() {
local cache=${LOCKWATCH_BENCH_CACHE_KEYS:-10000000} locks=10000 window=${LOCKWATCH_BENCH_WINDOW:-60}
local rport lport lpid gen
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis-t.log" \
  --notify-keyspace-events KEA --daemonize no &
pids+=($!)
wait_port "$rport"
echo "loading $cache cache keys and $locks lock keys…" >&2
awk -v n="$cache" 'BEGIN{for(i=0;i<n;i++) printf "SET cache:%d v%d\r\n", i, i}' | redis-cli -p "$rport" --pipe >/dev/null
awk -v n="$locks" 'BEGIN{for(i=0;i<n;i++) printf "SET lock:job:%d owner-%d PX 60000\r\n", i, i}' | redis-cli -p "$rport" --pipe >/dev/null
python3 bench/tracking_load.py "$rport" "$cache" "$locks" 2000 200 &
gen=$!
pids+=($gen)
redis_cpu() { redis-cli -p "$rport" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/{s+=$2} END{printf "%.3f", s}'; }
proc_cpu() { awk '{printf "%.3f", ($14+$15)/100}' "/proc/$1/stat"; }
tconfig() { # notifications port -> config path
  cat > "$work/t-$1.toml" <<TOML
[server]
listen = "127.0.0.1:$2"
[[target]]
name = "bench"
url = "redis://127.0.0.1:$rport/0"
notifications = "$1"
[[namespace]]
name = "job"
pattern = "lock:job:*"
ttl = "60s"
renew_every = "20s"
[[namespace]]
name = "stall"
pattern = "lock:stall:*"
ttl = "6s"
renew_every = "2s"
TOML
  echo "$work/t-$1.toml"
}
metric() { curl -sf "http://127.0.0.1:$lport/metrics" | awk -v m="$1" '$1==m{print $2}'; }
# A renewing holder, stopped just after a renewal: milliseconds from the overdue mark
# (remaining TTL below 6 - 2 - 1 = 3 s) to the flag, or "never" when the lock expired first.
stall_ms() {
  redis-cli -p "$rport" SET lock:stall:1 h NX PX 6000 >/dev/null
  setsid bash -c "while true; do sleep 2; redis-cli -p $rport EVAL \"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end\" 1 lock:stall:1 h 6000 >/dev/null; done" &
  local hp=$!
  sleep 5
  local p0 p
  p0=$(redis-cli -p "$rport" PTTL lock:stall:1)
  while p=$(redis-cli -p "$rport" PTTL lock:stall:1); [ "$p" -le "$p0" ] && [ "$p" -lt 5900 ]; do p0=$p; sleep 0.005; done
  kill -STOP -- "-$hp"
  python3 - "$lport" "$rport" <<'PY'
import re, socket, subprocess, sys, time, urllib.request
lport, rport = sys.argv[1], sys.argv[2]
pttl = int(subprocess.check_output(["redis-cli", "-p", rport, "PTTL", "lock:stall:1"]))
mark = time.monotonic() + (pttl - 3000) / 1000
series = 'lockwatch_locks_renewal_overdue{namespace="stall",target="bench"} 1'
while time.monotonic() < mark + 4:
    asked = time.monotonic()
    body = urllib.request.urlopen(f"http://127.0.0.1:{lport}/metrics", timeout=5).read().decode()
    if series in body:
        print(round((asked - mark) * 1000))
        sys.exit(0)
    time.sleep(0.02)
print("never")
PY
  kill -KILL -- "-$hp" 2>/dev/null; kill -CONT -- "-$hp" 2>/dev/null; wait "$hp" 2>/dev/null || true
  redis-cli -p "$rport" DEL lock:stall:1 >/dev/null
}
window_cpu() { # pid or "" -> "redis% lockwatch%"
  local r0 r1 l0=0 l1=0
  r0=$(redis_cpu); [ -n "$1" ] && l0=$(proc_cpu "$1")
  sleep "$window"
  r1=$(redis_cpu); [ -n "$1" ] && l1=$(proc_cpu "$1")
  python3 -c "print(f'{($r1-$r0)/$window*100:.2f} {($l1-$l0)/$window*100:.2f}')"
}
echo "workload alone, $window s…" >&2
read -r base _ <<< "$(window_cpu "")"
local mode results=()
for mode in auto off; do
  lport=$(free_port)
  cfgp=$(tconfig "$mode" "$lport")
  target/release/lockwatch serve -c "$cfgp" --log-level warn &
  lpid=$!
  pids+=($lpid)
  wait_port "$lport"
  sleep 10
  echo "lockwatch notifications=$mode, $window s…" >&2
  read -r rc lc <<< "$(window_cpu "$lpid")"
  local tm stall truncated
  tm=$(curl -sf "http://127.0.0.1:$lport/metrics" | awk '/^lockwatch_tracking_mode\{mode="events"/{print ($2=="1") ? "events" : "scan"}')
  stall=$(stall_ms)
  truncated=$(metric 'lockwatch_sample_truncated_total{target="bench"}')
  results+=("$mode $tm $rc $lc $stall ${truncated:-0}")
  kill "$lpid"; wait "$lpid" 2>/dev/null || true
done
kill "$gen" 2>/dev/null || true

# Memory per tracked lock in events mode: 1,000,000 locks in db 3 against an empty db 4.
awk 'BEGIN{for(i=0;i<1000000;i++) printf "SET lock:job:%d owner-%d PX 3600000\r\n", i, i}' | redis-cli -p "$rport" -n 3 --pipe >/dev/null
rss_events() { # db held [binary] -> VmHWM KiB once the held gauge is stable (the base has no
  # reconcile_rate: it kept no events-mode lock table to fill)
  lport=$(free_port)
  cat > "$work/m.toml" <<TOML
[server]
listen = "127.0.0.1:$lport"
[[target]]
name = "bench"
url = "redis://127.0.0.1:$rport/$1"
sample_interval = "60s"
sample_budget = "30s"
$([ -z "${3:-}" ] && echo "reconcile_rate = 10000000")
[[namespace]]
name = "job"
pattern = "lock:job:*"
ttl = "3600s"
TOML
  "${3:-$new_bin}" serve -c "$work/m.toml" --log-level warn &
  local pid=$!
  wait_port "$lport"
  for _ in $(seq 600); do
    [ "$(metric 'lockwatch_locks_held{namespace="job",target="bench"}')" = "$2" ] && break
    sleep 0.5
  done
  sleep 2
  awk '/VmHWM/{print $2}' "/proc/$pid/status"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
local m0 m1 m0b m1b base_b
base_b=$(base_bin "$base_rev")
m0b=$(rss_events 4 0 "$base_b")
m1b=$(rss_events 3 1000000 "$base_b")
m0=$(rss_events 4 0)
m1=$(rss_events 3 1000000)

# The peer on the same shared keyspace: one --check-keys scrape walks it all.
local eport r0 r1
eport=$(free_port)
prometheus-redis-exporter -redis.addr "redis://127.0.0.1:$rport" -web.listen-address "127.0.0.1:$eport" \
  -check-keys 'lock:job:*' >/dev/null 2>&1 &
pids+=($!)
wait_port "$eport"
r0=$(redis_cpu)
hyperfine --runs 3 --export-json "$out/tracking_peer.json" "curl -sf -o /dev/null http://127.0.0.1:$eport/metrics" >&2
r1=$(redis_cpu)
local peer
peer=$(python3 -c "import json; print(json.load(open('$out/tracking_peer.json'))['results'][0]['mean'])")
python3 - "$cache" "$locks" "$window" "$base" "$m0" "$m1" "$peer" "$r0" "$r1" "$m0b" "$m1b" "$base_rev" "${results[@]}" > "$out/tracking.md" <<'PY'
import sys
cache, locks, window, base, m0, m1, peer, r0, r1, m0b, m1b, base_rev = sys.argv[1:13]
rows = [r.split() for r in sys.argv[13:]]
print("### Tracking: events mode against scan mode on a shared keyspace")
print(f"{int(cache):,} cache keys (~2,000 writes/s) and {int(locks):,} lock keys (~200 renew/release/acquire ops/s) in one database; Redis CPU measured over {window} s windows as `used_cpu_user + used_cpu_sys`; workload alone: {float(base):.2f} % of a core.")
print()
print("| mode (notifications) | mode reported | Redis CPU added by lockwatch | lockwatch CPU | stalled holder flagged, ms after the mark | passes cut by the budget |")
print("|---|---|---|---|---|---|")
for mode, tm, rc, lc, stall, trunc in rows:
    added = float(rc) - float(base)
    print(f"| {mode} | {tm} | {added:.2f} % of a core | {float(lc):.2f} % of a core | {stall} | {trunc} |")
per = (int(m1) - int(m0)) * 1024 / 1_000_000
print()
perb = (int(m1b) - int(m0b)) * 1024 / 1_000_000
print(f"Memory per tracked lock in events mode: {per:.0f} B (peak RSS {int(m1)//1024} MiB with 1,000,000 locks, {int(m0)//1024} MiB with none); the base ({base_rev}) on the same keys: {perb:.0f} B, this ÷ base {per/perb:.2f}×.")
print(f"prometheus-redis-exporter --check-keys 'lock:job:*' on the same database: {float(peer):.2f} s per scrape (hyperfine mean of 3), {(float(r1)-float(r0))/ (3+1):.2f} s of Redis CPU per scrape (4 scrapes incl. warm-up, averaged).")
PY
kill "${pids[@]}" 2>/dev/null || true
pids=()
}

# The config of the generated log's namespaces (a target that is never reached).
intake_toml() {
cat <<TOML
[[target]]
name = "bench"
url = "redis://127.0.0.1:1/0"
[[namespace]]
name = "workflow"
pattern = "cordum:wf:run:lock:*"
ttl = "30s"
log_phrases = ["run lock"]
[[namespace]]
name = "approval"
pattern = "cordum:approval:lock:*"
ttl = "10s"
log_phrases = ["approval lock"]
[[namespace]]
name = "payout"
pattern = "payout:batch:lock:*"
ttl = "30s"
log_phrases = ["payout"]
TOML
}

intake() {
local lines=5000000 log="$work/app.log" progs="$work/mtail" cfg="$work/intake.toml"
cargo bench --locked --bench classify -- --noplot >&2
cargo build --release --locked --example gen_log >&2
target/release/examples/gen_log "$log" "$lines"
mkdir -p "$progs"
cp bench/locks.mtail "$progs/"
local size_mb
size_mb=$(( $(stat -c %s "$log") / 1000000 ))
intake_toml > "$cfg"
local mport
mport=$(free_port)
local base_b
base_b=$(base_bin "$base_rev")
local lw="taskset -c 1 $new_bin classify --summary -c $cfg $log"
local lwb="taskset -c 1 $base_b classify --summary -c $cfg $log"
local mt="taskset -c 1 mtail --one_shot --one_shot_format prometheus --progs $progs --logs $log --logtostderr --address 127.0.0.1 --port $mport"
# Both must count the same events before their speed means anything.
local a b
a=$($lw 2>/dev/null | awk 'NR>1{print $1, $2, $3, $4}' | sort)
b=$($mt 2>/dev/null | sed -n 's/^lockwatch_lock_events_total{namespace="\([a-z]*\)",op="\([a-z]*\)",outcome="\([a-z_]*\)".*} \([0-9]*\)$/\1 \2 \3 \4/p' | sort)
if [ "$a" != "$b" ]; then
  printf 'lockwatch and mtail disagree:\n%s\n---\n%s\n' "$a" "$b" >&2
  exit 1
fi
if [ "$a" != "$($lwb 2>/dev/null | awk 'NR>1{print $1, $2, $3, $4}' | sort)" ]; then
  echo "the base ($base_rev) counts other events than this build" >&2
  exit 1
fi
hyperfine --warmup 1 --runs 5 --export-json "$out/intake.json" -n base "$lwb" -n lockwatch "$lw" -n mtail "$mt" >&2
local lwb_s lw_s mt_s
lwb_s=$(python3 -c "import json; print(json.load(open('$out/intake.json'))['results'][0]['mean'])")
lw_s=$(python3 -c "import json; print(json.load(open('$out/intake.json'))['results'][1]['mean'])")
mt_s=$(python3 -c "import json; print(json.load(open('$out/intake.json'))['results'][2]['mean'])")

# lockwatch serve tailing the file from its start, pinned to one core: time until all
# lines are counted (polling /metrics every 20 ms). With multiline = "auto" the file's last
# two lines (its last record, and the line before it, kept in case an exception follows)
# are counted once the file has been quiet for 1 s: the time until all lines but those is
# the reading time, the time until all of them includes that wait.
local scfg="$work/serve.toml"
serve_time() { # binary -> "seconds to all lines but the last record, seconds to every line"
  local sport spid t0 t1 tread="" n=0
  sport=$(free_port)
  { echo "[server]"; echo "listen = \"127.0.0.1:$sport\""; cat "$cfg"; } > "$scfg"
  sed -i 's/^name = "bench"$/name = "bench"\nnotifications = "off"/' "$scfg"
  printf '[[logs]]\nname = "app"\npath = "%s"\nstart_at = "beginning"\n' "$log" >> "$scfg"
  taskset -c 1 "$1" serve -c "$scfg" --log-level error &
  spid=$!
  wait_port "$sport"
  t0=$(date +%s.%N)
  for _ in $(seq 3000); do
    n=$(curl -sf "http://127.0.0.1:$sport/metrics" | awk '/^lockwatch_log_lines_total\{.*source="app"/{s+=$2} END{printf "%d", s}')
    [ -z "$tread" ] && [ "$n" -ge $((lines - 2)) ] && tread=$(date +%s.%N)
    [ "$n" -ge "$lines" ] && break
    sleep 0.02
  done
  t1=$(date +%s.%N)
  kill "$spid"; wait "$spid" 2>/dev/null || true
  if [ "$n" -lt "$lines" ]; then
    echo "$1 serve counted only $n of $lines lines" >&2
    exit 1
  fi
  python3 -c "print($tread-$t0, $t1-$t0)"
}
local read_s serve_s bread_s bserve_s
read -r bread_s bserve_s < <(serve_time "$base_b")
read -r read_s serve_s < <(serve_time "$new_bin")
python3 - "$lines" "$size_mb" "$lw_s" "$mt_s" "$serve_s" "$read_s" "$lwb_s" "$bserve_s" "$bread_s" "$base_rev" > "$out/intake.md" <<'PY'
import json, sys
lines, mb, lw, mt, serve, read, blw, bserve, bread = int(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:10])
base = sys.argv[10]
def crit(name):
    ns = json.load(open(f"target/criterion/classify/{name}/new/estimates.json"))["mean"]["point_estimate"]
    return 10_000 / (ns / 1e9)
print("### Event intake")
print(f"Generated log: {lines:,} lines, {mb} MB, 1% lock events in JSON, logfmt and text; both tools pinned to one core (taskset -c 1) and counting the same events.")
print()
print("| measurement | value |")
print("|---|---|")
print(f"| classification alone, criterion, 1% events / ordinary only / events only | {crit('mix_1pct_events'):,.0f} / {crit('ordinary_only'):,.0f} / {crit('events_only'):,.0f} lines/s |")
print(f"| lockwatch classify --summary (hyperfine mean of 5) | {lw:.2f} s, {lines/lw:,.0f} lines/s |")
print(f"| mtail --one_shot, equivalent program (hyperfine mean of 5) | {mt:.2f} s, {lines/mt:,.0f} lines/s |")
print(f"| ratio, mtail time ÷ lockwatch time | {mt/lw:.1f}× |")
print(f"| lockwatch serve tailing the file from its start, until /metrics shows every line but the last record | {read:.2f} s, {lines/read:,.0f} lines/s |")
print(f"| the same, until every line | {serve:.2f} s |")
print()
print(f"| side by side | base ({base}) | this build | this ÷ base |")
print("|---|---:|---:|---:|")
print(f"| classify --summary, lines/s | {lines/blw:,.0f} | {lines/lw:,.0f} | {blw/lw:.2f}× the speed |")
print(f"| serve, to every line but the last record, lines/s | {lines/bread:,.0f} | {lines/read:,.0f} | {bread/read:.2f}× the speed |")
print(f"| serve, to every line | {bserve:.2f} s | {serve:.2f} s | {serve/bserve:.2f}× |")
PY
}

# OTLP records against tailed lines: the same 2,000,000 lines, `lockwatch serve` pinned to
# core 1 either way, the time until /metrics counts them all (polled every 20 ms; for the
# file, every line but the last record, which waits for 1 s of quiet).
shippers() {
local lines=2000000 log="$work/shippers.log"
cargo build --release --locked --bin lockwatch --example gen_log --example otlp_load >&2
target/release/examples/gen_log "$log" "$lines"
local port cfg="$work/shippers.toml"
port=$(free_port)
{ printf '[server]\nlisten = "127.0.0.1:%s"\n' "$port"; intake_toml | sed 's/^name = "bench"$/name = "bench"\nnotifications = "off"/'; } > "$cfg"
# The file, tailed.
cp "$cfg" "$cfg.tail"
printf '[[logs]]\nname = "app"\npath = "%s"\nstart_at = "beginning"\n' "$log" >> "$cfg.tail"
taskset -c 1 target/release/lockwatch serve -c "$cfg.tail" --log-level error &
local spid=$!
pids+=($spid)
wait_port "$port"
local t0 n=0 tail_s=""
t0=$(date +%s.%N)
for _ in $(seq 3000); do
  n=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^lockwatch_log_lines_total\{.*source="app"/{s+=$2} END{printf "%d", s}')
  [ "$n" -ge $((lines - 2)) ] && { tail_s=$(python3 -c "print($(date +%s.%N)-$t0)"); break; }
  sleep 0.02
done
kill "$spid"; wait "$spid" 2>/dev/null || true
[ -n "$tail_s" ] || { echo "lockwatch serve counted only $n of $lines lines" >&2; exit 1; }
# The same lines as OTLP records.
taskset -c 1 target/release/lockwatch serve -c "$cfg" --log-level error &
spid=$!
pids+=($spid)
wait_port "$port"
local otlp_s
otlp_s=$(taskset -c 0 target/release/examples/otlp_load "127.0.0.1:$port" "$log" "$lines" 512 4)
kill "$spid"; wait "$spid" 2>/dev/null || true
python3 - "$lines" "$otlp_s" "$tail_s" > "$out/shippers.md" <<'PY'
import sys
lines, otlp, tail = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print("### OTLP intake against the file tailer")
print(f"The same {lines:,} generated lines (1% lock events, JSON, logfmt and text), `lockwatch serve` pinned to one core (taskset -c 1) both times.")
print()
print("| measurement | value |")
print("|---|---|")
print(f"| POST /v1/logs, protobuf batches of 512 records, 4 in flight, until /metrics counts every record | {otlp:.2f} s, {lines/otlp:,.0f} records/s |")
print(f"| the file tailed from its start, until /metrics counts every line but the last record | {tail:.2f} s, {lines/tail:,.0f} lines/s |")
print(f"| ratio, OTLP records/s ÷ tailed lines/s | {tail/otlp:.2f} |")
PY
}

# Memory per tracked lock in events mode at 1,000,000 locks (scripts/memory.sh), cold and
# warm, the base and this build in turn.
memory() {
local base_b n=${LOCKWATCH_BENCH_LOCKS:-1000000} rows=()
base_b=$(base_bin "$base_rev")
for kind in cold warm; do
  local w=""; [ "$kind" = warm ] && w=warm
  read -r bb bbefore bafter _ _ < <(scripts/memory.sh "$base_b" "$n" $w)
  read -r nb nbefore nafter _ _ < <(scripts/memory.sh "$new_bin" "$n" $w)
  rows+=("| $kind | $bb B ($((bbefore / 1024)) → $((bafter / 1024)) MiB) | $nb B ($((nbefore / 1024)) → $((nafter / 1024)) MiB) | $(ratio "$nb" "$bb") |")
done
{
  echo "### Memory per tracked lock, events mode, $n locks (scripts/memory.sh)"
  echo
  echo "| | base ($base_rev) | this build | this ÷ base |"
  echo "|---|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} > "$out/memory.md"
}

# The lock listing at 1,000,000 tracked locks, this build against the base revision.
api() {
local base=${LOCKWATCH_BENCH_API_BASE:-$base_rev} n=1000000 rport base_b
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis-api.log" --daemonize no &
pids+=($!)
wait_port "$rport"
echo "loading $n lock keys…" >&2
awk -v n="$n" 'BEGIN{for(i=0;i<n;i++) printf "SET bench:lock:%d owner-%d PX 3600000\r\n", i, i}' | redis-cli -p "$rport" --pipe >/dev/null
base_b=$(base_bin "$base")
measure() { # binary -> "median_ms rss_before_kib hwm_growth_kib"
  local lport pid
  lport=$(free_port)
  cat > "$work/api.toml" <<TOML
[server]
listen = "127.0.0.1:$lport"
[[target]]
name = "bench"
url = "redis://127.0.0.1:$rport/0"
sample_interval = "1h"
sample_budget = "60s"
scan_count = 1000
notifications = "off"
[[namespace]]
name = "bench"
pattern = "bench:lock:*"
ttl = "3600s"
TOML
  "$1" serve -c "$work/api.toml" --log-level warn &
  pid=$!
  wait_port "$lport"
  for _ in $(seq 1200); do
    [ "$(curl -sf "http://127.0.0.1:$lport/metrics" | awk '/^lockwatch_locks_held\{/{print $2}')" = "$n" ] && break
    sleep 0.1
  done
  local url="http://127.0.0.1:$lport/api/v1/locks?namespace=bench&limit=10" times=()
  curl -sf -o /dev/null "$url"
  for _ in $(seq 11); do times+=("$(curl -sf -o /dev/null -w '%{time_total}' "$url")"); done
  local rss
  rss=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
  echo 5 > "/proc/$pid/clear_refs"
  local c=()
  for _ in 1 2 3 4 5; do curl -sf -o /dev/null "$url" & c+=($!); done
  wait "${c[@]}"
  local hwm
  hwm=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c "import statistics,sys; print(round(statistics.median(map(float, sys.argv[1:]))*1000, 1))" "${times[@]}" | tr '\n' ' '
  echo "$rss $((hwm - rss))"
}
mib() { python3 -c "print(f'{$1/1024:.1f}')"; }
read -r before_ms before_rss before_growth < <(measure "$base_b")
read -r after_ms after_rss after_growth < <(measure target/release/lockwatch)
cat > "$out/api.md" <<MD
### Lock listing at 1,000,000 tracked locks
\`GET /api/v1/locks?namespace=bench&limit=10\`, one exporter in scan mode tracking $n locks, for the base ($base) and this build.

| measurement | base ($base) | this build |
|---|---|---|
| median of 11 sequential requests | ${before_ms} ms | ${after_ms} ms |
| RSS before the concurrent requests | $(mib "$before_rss") MiB | $(mib "$after_rss") MiB |
| peak RSS added by 5 concurrent requests | $(mib "$before_growth") MiB | $(mib "$after_growth") MiB |
MD
kill "${pids[@]}" 2>/dev/null || true
pids=()
}

# One exporter, 100 targets: what a target costs.
targets() {
local n=100 ports=() p i
echo "starting $n redis-servers…" >&2
for i in $(seq "$n"); do
  p=$(free_port)
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "" \
    --notify-keyspace-events KEA --daemonize no >/dev/null &
  pids+=($!)
  ports+=("$p")
done
for p in "${ports[@]}"; do
  wait_port "$p"
  for ns in a b c; do
    awk -v ns="$ns" 'BEGIN{for(i=0;i<10;i++) printf "SET %s:lock:%d owner-%d PX 3600000\r\n", ns, i, i}' \
      | redis-cli -p "$p" --pipe >/dev/null
  done
done
serve_targets() { # count -> "rss_kib conns_total metrics_bytes scrape_ms slowest_pass_s"
  local count=$1 lport cfg pid k
  lport=$(free_port)
  cfg="$work/targets-$count.toml"
  printf '[server]\nlisten = "127.0.0.1:%s"\n' "$lport" > "$cfg"
  for k in $(seq 0 $((count - 1))); do
    printf '[[target]]\nname = "t%s"\nurl = "redis://127.0.0.1:%s/0"\nsample_interval = "5s"\n' "$k" "${ports[$k]}" >> "$cfg"
  done
  for ns in a b c; do
    printf '[[namespace]]\nname = "%s"\npattern = "%s:lock:*"\nttl = "3600s"\n' "$ns" "$ns" >> "$cfg"
  done
  target/release/lockwatch serve -c "$cfg" --log-level warn &
  pid=$!
  wait_port "$lport"
  for _ in $(seq 600); do
    [ "$(curl -sf "http://127.0.0.1:$lport/metrics" | awk '/^lockwatch_sample_passes_total/ && $2 >= 2 {c++} END{print c+0}')" -ge "$count" ] && break
    sleep 0.2
  done
  sleep 6 # a few passes and reconciling steps more: the resident set settles
  local rss conns=0 c body times=()
  rss=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
  for k in $(seq 0 $((count - 1))); do
    c=$(redis-cli -p "${ports[$k]}" client list | wc -l)
    conns=$((conns + c - 1))
  done
  body=$(curl -sf "http://127.0.0.1:$lport/metrics" | wc -c)
  for _ in $(seq 21); do times+=("$(curl -sf -o /dev/null -w '%{time_total}' "http://127.0.0.1:$lport/metrics")"); done
  local slowest
  slowest=$(curl -sf "http://127.0.0.1:$lport/metrics" | awk '/^lockwatch_sample_duration_seconds\{/{if ($2 > m) m = $2} END{print m+0}')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$rss $conns $body $(python3 -c "import statistics,sys; print(round(statistics.median(map(float, sys.argv[1:]))*1000, 1))" "${times[@]}") $slowest"
}
read -r rss1 conns1 body1 ms1 slow1 < <(serve_targets 1)
read -r rssn connsn bodyn msn slown < <(serve_targets "$n")
cat > "$out/targets.md" <<MD
### Many targets
One \`lockwatch serve\` watching 1 and $n local redis-servers, 3 namespaces each (10 locks per namespace), keyspace notifications on (events mode), \`sample_interval = "5s"\`.

| measurement | 1 target | $n targets | per target |
|---|---|---|---|
| RSS | $((rss1 / 1024)) MiB | $((rssn / 1024)) MiB | $(python3 -c "print(f'{($rssn-$rss1)/($n-1):.0f} KiB')") |
| Redis connections (\`CLIENT LIST\`) | $conns1 | $connsn | $(python3 -c "print(f'{$connsn/$n:.1f}')") |
| /metrics size | $body1 bytes | $bodyn bytes | $(python3 -c "print(f'{($bodyn-$body1)/($n-1):,.0f} bytes')") |
| /metrics scrape time (median of 21, curl) | $ms1 ms | $msn ms | |
| slowest target's last pass | $slow1 s | $slown s | |
MD
kill "${pids[@]}" 2>/dev/null || true
pids=()
}

exposition() {
cargo bench --locked --bench exposition -- --noplot 2>"$work/exposition.err" >&2
cat "$work/exposition.err" >&2
us() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['mean']['point_estimate']/1e3)" "target/criterion/exposition/$1/new/estimates.json"; }
fmt_us() { python3 -c "print(f'{float(\"$1\"):,.0f} µs')"; }
local et eo eox st so sox
et=$(us encoder_text); eo=$(us encoder_openmetrics); eox=$(us encoder_openmetrics_exemplars)
st=$(us scrape_text); so=$(us scrape_openmetrics); sox=$(us scrape_openmetrics_exemplars)
cat > "$out/exposition.md" <<MD
### /metrics encoding
The demo's shape (one target with notifications, three namespaces, a fence pattern, a log source) served in-process over a private redis-server (\`benches/exposition.rs\`, criterion means). *Encoder*: the encoder alone on the same gathered families; *scrape*: what a request runs (before-scrape hooks, gather, encode). Exemplars: one on each of the 96 lock-event series.

| | 0.0.4 text | OpenMetrics | ÷ 0.0.4 | OpenMetrics, 96 exemplars | ÷ 0.0.4 |
|---|---:|---:|---:|---:|---:|
| encoder | $(fmt_us "$et") | $(fmt_us "$eo") | $(ratio "$eo" "$et") | $(fmt_us "$eox") | $(ratio "$eox" "$et") |
| scrape | $(fmt_us "$st") | $(fmt_us "$so") | $(ratio "$so" "$st") | $(fmt_us "$sox") | $(ratio "$sox" "$st") |

The same taking turns in one loop (minimum and median of each; on a shared machine the minimum is the cost without interference):

$(sed -n 's/^paired: /- /p' "$work/exposition.err")
MD
}

# A stalled holder's lead time (scripts/stall.sh): the TTL left when it is first flagged
# overdue, in events and scan mode, the base and this build in turn.
stall() {
local base=${LOCKWATCH_BENCH_STALL_BASE:-e33c20a} base_b mode line rows=()
base_b=$(base_bin "$base")
for mode in events scan; do
  line=$(scripts/stall.sh "$base_b" "$mode")
  rows+=("$mode base $line")
  line=$(scripts/stall.sh "$new_bin" "$mode")
  rows+=("$mode new $line")
done
python3 - "$base" "${rows[@]}" > "$out/stall.md" <<'PY'
import sys
base, rows = sys.argv[1], [r.split() for r in sys.argv[2:]]
print("### A stalled holder's lead time (scripts/stall.sh, issue 43)")
print("Namespace `workflow` (ttl 30s, renew_every 10s: overdue below 15 s left), sample_interval 5s, beside 2,000 locks of an hour (one released and taken again every 100 ms) and 5,000,000 cache keys; the holder (SET NX PX 30000, PEXPIRE 30000 every 10 s) stopped by SIGSTOP after its second renewal. Lead time: the key's PTTL when `lockwatch_locks_renewal_overdue` first shows it (/metrics polled every 100 ms); ideal 15 s, the issue's goal at least 10 s. Events mode: `notifications = \"require\"`; scan mode: `\"off\"`.")
print()
print("| mode | build | lead time (TTL left when flagged) | flagged after the stop | TTL left at the stop | sample passes after the stop (cut by sample_budget) |")
print("|---|---|---:|---:|---:|---:|")
for mode, build, lead, at_stop, after, passes, cut in rows:
    name = f"base ({base})" if build == "base" else "this build"
    lead = "never (expired unflagged)" if lead == "never" else f"{lead} s"
    after = "—" if after == "-" else f"{after} s"
    print(f"| {mode} | {name} | {lead} | {after} | {at_stop} s | {passes} ({cut}) |")
PY
}

for s in "${sections[@]}"; do
  case "$s" in
    sampler|memory|lifecycle|burst|intake|shippers|tracking|api|targets|exposition|stall) "$s"; { cat "$out/$s.md"; echo; } >> "$out/summary.md" ;;
    *) echo "unknown section $s: use sampler, memory, lifecycle, burst, intake, shippers, tracking, api, targets, exposition or stall" >&2; exit 2 ;;
  esac
done
cat "$out/summary.md"
