# Sourced by burst.sh, memory.sh and watcher_cpu.sh: a private redis-server with keyspace
# notifications on free loopback ports, answering PING, and an exporter config of one
# `bench` target and namespace (events mode) in $work/c.toml. Needs $work; sets rport,
# lport and rpid.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rport=$(port) lport=$(port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --notify-keyspace-events 'Kg$xe' --daemonize no --logfile "$work/r.log" &
rpid=$!
printf '[server]\nlisten = "127.0.0.1:%s"\n[[target]]\nname = "bench"\nurl = "redis://127.0.0.1:%s/0"
sample_interval = "1h"\nnotifications = "require"\n[[namespace]]\nname = "bench"\npattern = "bench:lock:*"
ttl = "30s"\nrenew_every = "10s"\n' "$lport" "$rport" > "$work/c.toml"
for _ in $(seq 100); do redis-cli -p "$rport" PING 2>/dev/null | grep -q PONG && break; sleep 0.05; done
