#!/usr/bin/env bash
# Regenerates tests/fixtures/libraries/<library>.log and .expected for the lock libraries
# that run here: installs their pinned versions (PyPI, npm) into a work directory, starts a
# private redis-server, and runs scripts/libraries/python_locks.py and node_locks.js, which
# make each library fail for real (a worker SIGSTOPped past its TTL, the key taken over)
# and keep what the worker logged. The test suite reads the committed files and needs no
# network. The fixtures of libraries that cannot run here are composed from their sources
# by hand (tests/fixtures/libraries/README.md) and are left alone.
#
# Usage: scripts/library-fixtures.sh [LIBRARY...]   (default: all of them)
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/fixtures/libraries
# A fixed directory, so the paths in the captured stack traces stay the same from run to run.
work=${TMPDIR:-/tmp}/lockwatch-libraries
python_libs=(redis-py python-redis-lock pottery aioredlock)
node_libs=(redlock @sesamecare-oss/redlock redis-semaphore)
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=("${python_libs[@]}" "${node_libs[@]}")

for bin in redis-server python3 node npm; do
  command -v "$bin" >/dev/null || { echo "needs $bin (redis-server: apt-get install redis-server; node and npm: apt-get install nodejs npm)" >&2; exit 1; }
done

mkdir -p "$work/app"
cp scripts/libraries/python_locks.py scripts/libraries/node_locks.js "$work/app/"
if [ ! -x "$work/venv/bin/python" ]; then
  python3 -m venv "$work/venv"
fi
"$work/venv/bin/pip" install --quiet redis==8.1.0 python-redis-lock==4.0.1 pottery==3.0.1 aioredlock==0.7.3 \
  python-json-logger==4.2.0
(cd "$work/app" && [ -f package.json ] || echo '{"private": true}' > package.json)
(cd "$work/app" && npm install --silent --no-audit --no-fund redlock@5.0.0-beta.2 @sesamecare-oss/redlock@1.4.0 \
  redis-semaphore@5.8.0 ioredis@6.0.0 pino@10.4.0 winston@3.19.0)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
url="redis://127.0.0.1:$port/0"

for lib in "${wanted[@]}"; do
  name=$(echo "$lib" | tr -d @ | tr / -)
  echo "$lib → $out/$name.log" >&2
  if [[ " ${python_libs[*]} " == *" $lib "* ]]; then
    (cd "$work/app" && "$work/venv/bin/python" python_locks.py "$lib" "$url" "$work/$name.log" "$work/$name.expected")
  elif [[ " ${node_libs[*]} " == *" $lib "* ]]; then
    (cd "$work/app" && node node_locks.js "$lib" "$url" "$work/$name.log" "$work/$name.expected")
  else
    echo "unknown library $lib: one of ${python_libs[*]} ${node_libs[*]}" >&2
    exit 2
  fi
  cp "$work/$name.log" "$out/$name.log"
  { echo "# captured by scripts/library-fixtures.sh: $lib run against redis-server, made to fail for real"
    cat "$work/$name.expected"; } > "$out/$name.expected"
done
