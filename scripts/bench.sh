#!/usr/bin/env bash
# `make bench` (all sections) or `scripts/bench.sh SECTION…`:
#   sampler    one sample pass over 100,000 and 1,000,000 lock keys on a local redis-server,
#              the exporter's memory per tracked lock, and — on the same 100,000 keys in the
#              same run — the scrape time of prometheus-redis-exporter with --check-keys;
#   lifecycle  the lifecycle watcher under a rising rate of acquire/renew/release cycles
#              (its own redis-server and exporter, benches/lifecycle_load.rs);
#   intake     classification (criterion), then a generated log of 5,000,000 lines (1% lock
#              events, mixed formats) through lockwatch and through Debian's mtail with an
#              equivalent program, both pinned to one core, side by side with hyperfine;
#              and `lockwatch serve` tailing the same file.
# Results: bench-results/summary.md (and criterion's report under target/criterion).
set -euo pipefail
cd "$(dirname "$0")/.."
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(sampler lifecycle intake)
out=bench-results
mkdir -p "$out"
: > "$out/summary.md"
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (echo > /dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing listens on $1" >&2; return 1; }

cargo build --release --locked --bin lockwatch >&2

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

# 2. Memory: peak RSS of `lockwatch serve` tracking 0, 100k and 1M locks.
rss_kib() { # db -> "VmHWM_KiB sample_duration_s"
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
  target/release/lockwatch serve -c "$cfg" --log-level warn &
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
MD
kill "${pids[@]}" 2>/dev/null || true
pids=()
}

# The lifecycle watcher under load (starts its own redis-server and lockwatch serve).
lifecycle() {
cargo bench --locked --bench lifecycle_load > "$out/lifecycle.md"
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
cat > "$cfg" <<TOML
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
local mport
mport=$(free_port)
local lw="taskset -c 1 target/release/lockwatch classify --summary -c $cfg $log"
local mt="taskset -c 1 mtail --one_shot --one_shot_format prometheus --progs $progs --logs $log --logtostderr --address 127.0.0.1 --port $mport"
# Both must count the same events before their speed means anything.
local a b
a=$($lw 2>/dev/null | awk 'NR>1{print $1, $2, $3, $4}' | sort)
b=$($mt 2>/dev/null | sed -n 's/^lockwatch_lock_events_total{namespace="\([a-z]*\)",op="\([a-z]*\)",outcome="\([a-z_]*\)".*} \([0-9]*\)$/\1 \2 \3 \4/p' | sort)
if [ "$a" != "$b" ]; then
  printf 'lockwatch and mtail disagree:\n%s\n---\n%s\n' "$a" "$b" >&2
  exit 1
fi
hyperfine --warmup 1 --runs 5 --export-json "$out/intake.json" -n lockwatch "$lw" -n mtail "$mt" >&2
local lw_s mt_s
lw_s=$(python3 -c "import json; print(json.load(open('$out/intake.json'))['results'][0]['mean'])")
mt_s=$(python3 -c "import json; print(json.load(open('$out/intake.json'))['results'][1]['mean'])")

# lockwatch serve tailing the file from its start, pinned to one core: time until all
# lines are counted (polling /metrics every 20 ms).
local sport scfg
sport=$(free_port)
scfg="$work/serve.toml"
{ echo "[server]"; echo "listen = \"127.0.0.1:$sport\""; cat "$cfg"; } > "$scfg"
sed -i 's/^name = "bench"$/name = "bench"\nnotifications = "off"/' "$scfg"
printf '[[logs]]\nname = "app"\npath = "%s"\nstart_at = "beginning"\n' "$log" >> "$scfg"
taskset -c 1 target/release/lockwatch serve -c "$scfg" --log-level error &
local spid=$!
pids+=($spid)
wait_port "$sport"
local t0 t1 n=0
t0=$(date +%s.%N)
for _ in $(seq 3000); do
  n=$(curl -sf "http://127.0.0.1:$sport/metrics" | awk '/^lockwatch_log_lines_total\{.*source="app"/{s+=$2} END{printf "%d", s}')
  [ "$n" -ge "$lines" ] && break
  sleep 0.02
done
t1=$(date +%s.%N)
if [ "$n" -lt "$lines" ]; then
  echo "lockwatch serve counted only $n of $lines lines" >&2
  exit 1
fi
kill "$spid"; wait "$spid" 2>/dev/null || true
local serve_s
serve_s=$(python3 -c "print($t1-$t0)")
python3 - "$lines" "$size_mb" "$lw_s" "$mt_s" "$serve_s" > "$out/intake.md" <<'PY'
import json, sys
lines, mb, lw, mt, serve = int(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:6])
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
print(f"| lockwatch serve tailing the file from its start, until /metrics shows every line | {serve:.2f} s, {lines/serve:,.0f} lines/s |")
PY
}

for s in "${sections[@]}"; do
  case "$s" in
    sampler|lifecycle|intake) "$s"; { cat "$out/$s.md"; echo; } >> "$out/summary.md" ;;
    *) echo "unknown section $s: use sampler, lifecycle or intake" >&2; exit 2 ;;
  esac
done
cat "$out/summary.md"
