# Sourced by the bench scripts: a free loopback port, and a private redis-server with keyspace
# notifications beside an exporter config of one `bench` target and namespace (events mode).
# bench_setup WORKDIR sets rport, lport, rpid and writes WORKDIR/c.toml.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
bench_setup() {
  local work=$1
  rport=$(free_port); lport=$(free_port)
  redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
    --notify-keyspace-events 'Kg$xe' --daemonize no --logfile "$work/r.log" &
  rpid=$!
  sleep 0.5
  cat > "$work/c.toml" <<T
[server]
listen = "127.0.0.1:$lport"
[[target]]
name = "bench"
url = "redis://127.0.0.1:$rport/0"
sample_interval = "1h"
notifications = "require"
[[namespace]]
name = "bench"
pattern = "bench:lock:*"
ttl = "30s"
renew_every = "10s"
T
}
