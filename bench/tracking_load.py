#!/usr/bin/env python3
"""Load for the tracking benchmark (make bench's tracking section, scripts/bench/tracking.py):
cache writes and lock churn on one redis-server, at fixed rates, until killed.

  tracking_load.py PORT CACHE_KEYS LOCKS CACHE_WRITES_PER_S LOCK_OPS_PER_S

Lock churn: each op picks a lock key and renews it (compare-and-pexpire), or releases it
(compare-and-delete) and acquires it again under a new token. Speaks RESP on a raw socket
so it needs nothing beyond Python.
"""
import random
import socket
import sys
import time

RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def pipeline(self, cmds):
        self.s.sendall(b"".join(encode(*c) for c in cmds))
        return [self.read() for _ in cmds]

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        if kind == b":":
            return int(rest)
        return rest


def main():
    port, cache_keys, locks, cache_rate, lock_rate = map(int, sys.argv[1:6])
    c = Conn(port)
    tokens = {}
    for i in range(locks):
        tokens[i] = b"owner-%d" % i
    tick = 0.01
    n = 0
    start = time.monotonic()
    while True:
        n += 1
        cmds = []
        for _ in range(max(1, cache_rate // 100)):
            k = random.randrange(cache_keys)
            cmds.append(("SET", "cache:%d" % k, "v%d" % n))
        for _ in range(max(1, lock_rate // 100)):
            i = random.randrange(locks)
            key, token = "lock:job:%d" % i, tokens[i]
            if random.random() < 0.8:
                cmds.append(("EVAL", RENEW, 1, key, token, 60000))
            else:
                cmds.append(("EVAL", RELEASE, 1, key, token))
                tokens[i] = b"owner-%d-%d" % (i, n)
                cmds.append(("SET", key, tokens[i], "NX", "PX", 60000))
        c.pipeline(cmds)
        delay = start + n * tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)


if __name__ == "__main__":
    main()
