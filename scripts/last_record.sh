#!/usr/bin/env bash
# scripts/last_record.sh BINARY: ms from the end of a 10,000-line burst to every line counted, with [state]:
# last line JSON, then last line logfmt.
set -euo pipefail
bin=$1; work=$(mktemp -d)
lport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
: > $work/app.log
cat > $work/c.toml <<T
[server]
listen = "127.0.0.1:$lport"
[state]
dir = "$work/state"
[[target]]
name = "bench"
url = "redis://127.0.0.1:1/0"
notifications = "off"
[[namespace]]
name = "payout"
pattern = "payout:batch:lock:*"
ttl = "30s"
[[logs]]
name = "app"
path = "$work/app.log"
start_at = "beginning"
T
"$bin" serve -c $work/c.toml --log-level error &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf $work' EXIT
sleep 1.5
m() { curl -sf http://127.0.0.1:$lport/metrics | awk '/^lockwatch_log_lines_total\{.*source="app"/{s+=$2} END{printf "%d", s}'; }
total=0
for last in '{"level":"info","msg":"batch done"}' 'level=info msg="batch done"'; do
  python3 - "$work/app.log" "$last" <<'PY'
import sys
with open(sys.argv[1], "a") as f:
    for i in range(9999):
        f.write(f'level=info msg="request {i}" path=/x\n' if i % 2 else f'{{"level":"info","msg":"request {i}"}}\n')
    f.write(sys.argv[2] + "\n")
PY
  t0=$(date +%s%N); total=$((total + 10000))
  while [ "$(m)" -lt $total ]; do sleep 0.005; done
  echo "last line $last: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  sleep 1.5
done
