#!/usr/bin/env bash
# `make bench`: one sample pass over 100,000 and 1,000,000 lock keys on a local
# redis-server, the exporter's memory per tracked lock, and — on the same 100,000 keys in
# the same run — the scrape time of prometheus-redis-exporter with --check-keys; then the
# lifecycle watcher under a rising rate of acquire/renew/release cycles (its own
# redis-server and exporter, benches/lifecycle_load.rs).
# Results: bench-results/summary.md (and criterion's report under target/criterion).
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-results
mkdir -p "$out"
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (echo > /dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing listens on $1" >&2; return 1; }

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

cargo build --release --locked --bin lockwatch >&2

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

cat > "$out/summary.md" <<MD
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
cat "$out/summary.md"

# 4. The lifecycle watcher under load (starts its own redis-server and lockwatch serve).
kill "${pids[@]}" 2>/dev/null || true
pids=()
cargo bench --locked --bench lifecycle_load > "$out/lifecycle.md"
{ echo; cat "$out/lifecycle.md"; } >> "$out/summary.md"
cat "$out/lifecycle.md"
