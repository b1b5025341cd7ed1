#!/usr/bin/env bash
# scripts/stall.sh BINARY MODE (events|scan): the lead time of a stalled holder's overdue flag
# (issue 43), in a namespace with other lock traffic. Used by `make bench`'s stall section.
#
# A private redis-server with keyspace notifications (KEA) and 5,000,000 cache keys
# (DEBUG POPULATE), `BINARY serve` watching it: namespace `workflow` (`wf:run:lock:*`, ttl 30s,
# renew_every 10s: overdue below 15 s left), sample_interval 5s, notifications "require"
# (events) or "off" (scan). Once it is in MODE: 2,000 locks taken with a 1 h TTL, one of them
# released and taken again (new token) every 100 ms throughout, and the exporter holding
# 2,000. Then the holder, a bash loop with redis-cli in its own process group: SET NX PX 30000,
# PEXPIRE 30000 every 10 s; after its second renewal the whole group is stopped (SIGSTOP).
# /metrics is polled every 100 ms until `lockwatch_locks_renewal_overdue` of the namespace is
# at least 1, and the key's PTTL read at that moment is the lead time (ideal: 15 s).
#
# Prints one line: lead_s (or "never": the key expired unflagged) pttl_at_stop_s
# flagged_after_stop_s (or "-") and the sample passes from the stop to the flag or the expiry,
# all and those cut by sample_budget (in scan mode a namespace's gauges change only when a
# cycle, one walk of the keyspace over as many passes as it takes, completes); the details on
# stderr. Smaller runs (make bench --quick): LOCKWATCH_STALL_CACHE_KEYS (5,000,000) and
# LOCKWATCH_STALL_TTL (30 s; renew_every and the holder's renewals a third of it).
set -euo pipefail
shopt -s inherit_errexit
bin=$1 mode=$2
case "$mode" in
  events) notifications=require ;;
  scan) notifications=off ;;
  *) echo "usage: $0 BINARY events|scan" >&2; exit 2 ;;
esac
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ttl=${LOCKWATCH_STALL_TTL:-30} # the holder's TTL (s); it renews every third of it
work=$(mktemp -d)
pids=() groups=()
cleanup() { # errexit off: every step runs, whatever fails
  set +e
  for g in "${groups[@]}"; do kill -KILL -- "-$g"; kill -CONT -- "-$g"; done 2>/dev/null
  for p in "${pids[@]}"; do kill "$p"; done 2>/dev/null
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { echo "stall.sh $bin $mode: $*" >&2; }
alive() { local state; state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ "$state" != Z ]; }
# wait_until SECONDS WHAT COMMAND…: COMMAND every 100 ms until it succeeds, while what this
# script started runs
wait_until() {
  local limit=$1 what=$2 p; shift 2
  for _ in $(seq $((limit * 10))); do
    for p in "${pids[@]}"; do alive "$p" || { say "process $p exited while waiting for $what"; exit 1; }; done
    "$@" && return 0
    sleep 0.1
  done
  say "$what: not within $limit s"; exit 1
}

rport=$(free_port) lport=$(free_port)
r() { redis-cli -p "$rport" "$@"; }
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" \
  --notify-keyspace-events KEA --enable-debug-command local --daemonize no &
pids+=($!)
pong() { [ "$(r PING 2>/dev/null)" = PONG ]; }
wait_until 10 "redis-server answering on $rport" pong
reply=$(r DEBUG POPULATE "${LOCKWATCH_STALL_CACHE_KEYS:-5000000}" cache:)
[ "$reply" = OK ] || { say "DEBUG POPULATE: $reply"; exit 1; }

cat > "$work/c.toml" <<TOML
[server]
listen = "127.0.0.1:$lport"
[[target]]
name = "bench"
url = "redis://127.0.0.1:$rport/0"
sample_interval = "5s"
notifications = "$notifications"
[[namespace]]
name = "workflow"
pattern = "wf:run:lock:*"
ttl = "${ttl}s"
renew_every = "$((ttl / 3))s"
TOML
"$bin" serve -c "$work/c.toml" --log-level warn &
pids+=($!)
# metric NAME LABEL…: the value of the first series of NAME with every LABEL (`mode="events"`), or ""
metric() {
  local body
  body=$(curl -sf --max-time 5 "http://127.0.0.1:$lport/metrics") || return 1
  awk -v name="$1{" -v labels="${*:2}" 'BEGIN{n = split(labels, want, " ")}
    index($0, name) == 1 {for (i = 1; i <= n; i++) if (!index($0, want[i])) next; print $NF; exit}' <<< "$body"
}
is() { local v; v=$(metric "${@:2}") && [ "$v" = "$1" ]; }
wait_until 60 "lockwatch_tracking_mode{mode=\"$mode\"} 1" is 1 lockwatch_tracking_mode "mode=\"$mode\"" 'target="bench"'

# 2,000 locks of an hour, and the churn: one released and taken again every 100 ms
reply=$(awk 'BEGIN{for (i = 0; i < 2000; i++) printf "SET wf:run:lock:o%d tok%d NX PX 3600000\r\n", i, i}' | r --pipe)
[[ "$reply" == *"errors: 0, replies: 2000"* ]] || { say "loading the 2,000 locks: $reply"; exit 1; }
setsid bash -c 'for ((i = 2000; ; i++)); do
    printf "DEL wf:run:lock:o%d\nSET wf:run:lock:o%d tok%d NX PX 3600000\n" $((i % 2000)) $((i % 2000)) "$i"
    sleep 0.1
  done | redis-cli -p "$1" >/dev/null' churn "$rport" &
pids+=($!) groups+=($!)
ns=('namespace="workflow"' 'target="bench"')
wait_until 120 "lockwatch_locks_held{namespace=\"workflow\"} 2000" is 2000 lockwatch_locks_held "${ns[@]}"

# the holder: taken, renewed every 10 s, its renewals counted in a file
setsid bash -c '[ "$(redis-cli -p "$1" SET wf:run:lock:stalled holder NX PX $(($3 * 1000)))" = OK ] || exit 1
  for ((n = 1; ; n++)); do
    sleep $(($3 / 3))
    [ "$(redis-cli -p "$1" PEXPIRE wf:run:lock:stalled $(($3 * 1000)))" = 1 ] || exit 1
    echo "$n" > "$2"
  done' holder "$rport" "$work/renewals" "$ttl" &
holder=$!
pids+=($holder) groups+=($holder)
renewed() { [ "$(cat "$work/renewals" 2>/dev/null)" = "$1" ]; }
wait_until "$ttl" "the holder's second renewal" renewed 2
kill -STOP -- "-$holder"
stopped=$(date +%s%3N)
at_stop=$(r PTTL wf:run:lock:stalled)
held=$(metric lockwatch_locks_held "${ns[@]}")
passes0=$(metric lockwatch_sample_passes_total 'target="bench"')
cut0=$(metric lockwatch_sample_truncated_total 'target="bench"')
say "holder stopped with $at_stop ms left; locks held $held"
secs() { awk -v ms="$1" 'BEGIN{printf "%.1f", ms / 1000}'; } # ms -> s

lead=never after=-
for _ in $(seq 450); do # the key expires within 30 s of its last renewal
  overdue=$(metric lockwatch_locks_renewal_overdue "${ns[@]}") || { say "no /metrics from the exporter"; exit 1; }
  pttl=$(r PTTL wf:run:lock:stalled)
  now=$(date +%s%3N)
  if [ "${overdue:-0}" -ge 1 ] && [ "$pttl" -ge 0 ]; then
    lead=$(secs "$pttl") after=$(secs $((now - stopped)))
    break
  fi
  [ "$pttl" -lt 0 ] && break
  sleep 0.1
done
[ "$lead" != never ] || [ "$pttl" -lt 0 ] || { say "the key still lives 45 s after the holder stopped"; exit 1; }
passes=$(metric lockwatch_sample_passes_total 'target="bench"')
cut=$(metric lockwatch_sample_truncated_total 'target="bench"')
if [ "$lead" = never ]; then say "the key expired unflagged"; else say "lead time $lead s (flagged $after s after the stop)"; fi
echo "$lead $(secs "$at_stop") $after $((passes - passes0)) $((cut - cut0))"
