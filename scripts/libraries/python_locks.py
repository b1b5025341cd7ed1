#!/usr/bin/env python3
"""Make real Python lock libraries fail for real and keep what they log.

Usage: python_locks.py LIBRARY REDIS_URL OUT.log OUT.expected

A worker process takes a lock with a 1 s TTL; this driver SIGSTOPs it past the TTL,
another holder takes the key over, and the worker is SIGCONTed: its renewal and its
release then fail the way the library makes them fail, and the worker logs that the way
Python services do (`logging`, `logger.exception` with the traceback, or JSON lines with
`exc_info`). Then it tries to acquire the lock the other holder keeps. A success line comes
first. Each logged record's first and last line and what it means are written to
OUT.expected, from what the scenario did (not from lockwatch).
Run by scripts/library-fixtures.sh, which installs the pinned libraries.
"""

import asyncio
import logging
import os
import signal
import sys
import time

KEY = "payout:lock:batch-7"
TTL = 1.0


class Expect:
    """The expected table: (first line, last line, namespace, op, outcome, what)."""

    def __init__(self, log_path, out_path):
        self.log_path, self.out_path, self.rows = log_path, out_path, []

    def lines(self):
        for h in logging.getLogger().handlers:
            h.flush()
        sys.stderr.flush()
        with open(self.log_path, "rb") as f:
            return f.read().count(b"\n")

    def record(self, what, namespace, op, outcome, action):
        """Run `action`, which logs the record (and, before `begin`, others that must be ignored)."""
        self.first = self.lines() + 1
        result = action()
        if asyncio.iscoroutine(result):
            asyncio.get_event_loop().run_until_complete(result)
        last = self.lines()
        assert last >= self.first, f"{what}: nothing was logged"
        self.rows.append((self.first, last, namespace, op, outcome, what))

    def begin(self):
        """The record starts with the next line logged."""
        self.first = self.lines() + 1

    def write(self):
        with open(self.out_path, "w") as f:
            f.write("first\tlast\tnamespace\top\toutcome\twhat\n")
            for r in self.rows:
                f.write("\t".join(map(str, r)) + "\n")


def plain_logging(fmt):
    logging.basicConfig(level=logging.INFO, format=fmt, stream=sys.stderr)


def json_logging():
    from pythonjsonlogger import jsonlogger

    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(jsonlogger.JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[h])


# Each library: acquire(ttl) -> handle; extend(handle); release(handle); try_acquire() -> bool.


class RedisPy:
    """redis-py's `Lock` (`redis.lock.Lock`): a context manager around SET NX PX."""

    def __init__(self, url):
        import redis

        self.r = redis.Redis.from_url(url)

    def lock(self, ttl, **kw):
        return self.r.lock(KEY, timeout=ttl, **kw)


def redis_py(url, ex, ctl):
    plain_logging("%(asctime)s %(levelname)s %(name)s %(message)s")
    log = logging.getLogger("worker.payout")
    lib = RedisPy(url)
    held = lib.lock(30)
    held.acquire()
    ex.record("success", "-", "-", "ignored", lambda: log.info("payout lock acquired, processing batch-7"))
    held.release()

    lock = lib.lock(TTL)
    lock.acquire()
    stall(ctl)

    def extend():
        try:
            lock.extend(5)
        except Exception:
            log.exception("payout lock extend failed")

    ex.record("extend after the lock expired and was taken", "payout", "renew", "not_owned", extend)

    def release():
        try:
            lock.release()
        except Exception:
            log.exception("payout batch-7 aborted")

    ex.record("release after the lock expired and was taken", "payout", "release", "not_owned", release)

    # The context manager that does not raise on release logs redis-py's own warning.
    lib.r.delete(KEY)  # the other worker is done with it

    def leave():
        with lib.lock(TTL, raise_on_release_error=False):
            stall(ctl)

    ex.record("release when the context manager exits, lock taken (redis-py's own warning)", "unknown", "release",
              "not_owned", leave)

    def contend():
        try:
            with lib.lock(30, blocking_timeout=0.3):
                pass
        except Exception:
            log.exception("payout batch-7 skipped")

    ex.record("acquire while another worker holds it", "payout", "acquire", "busy", contend)


def python_redis_lock(url, ex, ctl):
    plain_logging("[%(asctime)s] %(levelname)s [%(name)s:%(lineno)d] %(message)s")
    import redis
    import redis_lock

    r = redis.Redis.from_url(url)
    log = logging.getLogger("payouts.tasks")
    ok = redis_lock.Lock(r, KEY, expire=30)
    ok.acquire()
    ex.record("success (the library's own info line)", "-", "-", "ignored",
              lambda: log.info("payout lock taken for batch-7"))
    ok.release()
    # The renewal thread: when the lock is lost, its extend raises in the thread and
    # Python prints the thread's traceback on stderr.
    lock = redis_lock.Lock(r, KEY, expire=1, auto_renewal=True)
    lock.acquire()
    ex.record("automatic renewal after the lock expired and was taken (thread traceback)", "payout", "renew",
              "not_owned", lambda: (stall(ctl), time.sleep(1.2)))

    def release():
        try:
            lock.release()
        except redis_lock.NotAcquired:
            log.exception("could not release payout lock")

    ex.record("release after the lock expired and was taken", "payout", "release", "not_owned", release)

    def contend():
        other = redis_lock.Lock(r, KEY, expire=30)
        if not other.acquire(blocking=False):
            log.debug("payout batch-7 skipped")

    ex.record("acquire while another worker holds it (the library's own warning)", "payout", "acquire", "busy",
              contend)


def pottery(url, ex, ctl):
    plain_logging("%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    import redis
    from pottery import Redlock

    r = redis.Redis.from_url(url)
    log = logging.getLogger("billing.payout")
    ok = Redlock(key=KEY, masters={r}, auto_release_time=30)
    ok.acquire()
    ex.record("success", "-", "-", "ignored", lambda: log.info("payout lock acquired"))
    ok.release()
    lock = Redlock(key=KEY, masters={r}, auto_release_time=TTL)
    lock.acquire()
    stall(ctl)

    def extend():
        try:
            lock.extend()
        except Exception:
            log.exception("could not extend payout lock")

    ex.record("extend after the lock expired and was taken", "payout", "renew", "not_owned", extend)

    def release():
        try:
            lock.release()
        except Exception as e:
            log.error("payout batch-7 release failed: %r", e)

    ex.record("release after the lock expired and was taken (repr of the exception)", "payout", "release",
              "not_owned", release)

    def contend():
        other = Redlock(key=KEY, masters={r}, auto_release_time=30)
        if not other.acquire(timeout=0.3):
            ex.begin()
            log.warning("payout lock is busy, batch-7 postponed")

    ex.record("acquire while another worker holds it", "payout", "acquire", "busy", contend)


def aioredlock(url, ex, ctl):
    json_logging()
    from aioredlock import Aioredlock, LockError

    log = logging.getLogger("payout.worker")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mgr = Aioredlock([url], retry_count=2, retry_delay_min=0.1, retry_delay_max=0.2, internal_lock_timeout=30)
    ok = loop.run_until_complete(mgr.lock(KEY, lock_timeout=30))
    ex.record("success", "-", "-", "ignored", lambda: log.info("payout lock acquired", extra={"batch": "batch-7"}))
    loop.run_until_complete(mgr.unlock(ok))
    lock = loop.run_until_complete(mgr.lock(KEY, lock_timeout=TTL))
    stall(ctl)

    async def extend():
        try:
            await mgr.extend(lock, lock_timeout=5)
        except Exception:
            log.exception("payout lock extend failed", extra={"batch": "batch-7"})

    ex.record("extend after the lock expired and was taken", "payout", "renew", "not_owned", extend)

    async def release():
        try:
            await mgr.unlock(lock)
        except LockError:
            log.exception("payout lock release failed", extra={"batch": "batch-7"})

    ex.record("release after the lock expired and was taken", "payout", "release", "not_owned", release)

    async def contend():
        try:
            await mgr.lock(KEY, lock_timeout=30)
        except LockError:
            log.exception("payout batch-7 skipped", extra={"batch": "batch-7"})

    ex.record("acquire while another worker holds it", "payout", "acquire", "busy", contend)
    # At shutdown the manager releases the locks it still knows, on connections it closes.
    ex.record("release at shutdown on a closed connection (the library's own error)", "payout", "release", "error",
              lambda: loop.run_until_complete(mgr.destroy()))


# The scenario of each library, and the prefix it puts before the lock name in Redis.
LIBRARIES = {
    "redis-py": (redis_py, ""),
    "python-redis-lock": (python_redis_lock, "lock:"),
    "pottery": (pottery, "redlock:"),
    "aioredlock": (aioredlock, ""),
}


def stall(ctl):
    """Ask the driver to stop this process past the TTL and let another holder take the
    key; returns once the process runs again."""
    w, r = ctl
    os.write(w, b"s")
    os.read(r, 1)


def take_over(url, key):
    import redis

    r = redis.Redis.from_url(url)
    # Another worker's lock: the key expired while the worker was stopped.
    for _ in range(100):
        if r.set(key, "another-worker", nx=True, px=30000):
            return
        time.sleep(0.05)
    raise SystemExit("the stalled worker's lock never expired")


def main():
    lib, url, log_path, expected_path = sys.argv[1:5]
    import redis

    scenario, prefix = LIBRARIES[lib]
    redis.Redis.from_url(url).delete(prefix + KEY)
    from_parent, to_child = os.pipe()
    from_child, to_parent = os.pipe()
    pid = os.fork()
    if pid == 0:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        ex = Expect(log_path, expected_path)
        scenario(url, ex, (to_parent, from_parent))
        ex.write()
        logging.shutdown()
        os._exit(0)
    os.close(to_parent)
    while True:
        b = os.read(from_child, 1)
        if not b:
            break
        os.kill(pid, signal.SIGSTOP)
        time.sleep(TTL + 0.5)
        take_over(url, prefix + KEY)
        os.kill(pid, signal.SIGCONT)
        os.write(to_child, b"c")
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit(f"{lib}: the worker failed ({status})")


if __name__ == "__main__":
    main()
