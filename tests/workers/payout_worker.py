#!/usr/bin/env python3
"""A payout worker on a real Python lock library, for the freeze tests (tests/freeze_workers.rs).

Usage: payout_worker.py --library python-redis-lock|redis-py
                        --behavior raise|swallow|plain-del|late|check|fenced
                        --url REDIS_URL --name NAME --ttl SECONDS --job SECONDS --log FILE
                        [--jobs N] [--step SECONDS] [--items]

It loops (forever, or N jobs): takes the lock of batch `payout:batch-7` (key
`lock:payout:batch-7` with both libraries), blocking until it has it; does the job (steps of
`--step` s of work, 0.1 by default, so a stop of the process delays the work and does not do
it); with `--items`, pays one item per step (`RPUSH payouts:items NAME:<job#>:<step#>` on the
lock's connection; `fenced`: through the store below); records the payout with
`RPUSH payouts:done NAME:<job#>` (a double payout shows there); releases; pauses 200 ms.

- python-redis-lock 4.0.1: `redis_lock.Lock(conn, "payout:batch-7", expire=ttl,
  auto_renewal=True)`. The library renews from a daemon thread every 2/3 of the TTL (`expire`
  is truncated to whole seconds). A waiting worker blocks in `BLPOP lock-signal:payout:batch-7`
  for up to `expire` seconds between tries: a release pushes that signal, an expiry does not, so
  an expired lock is taken over up to one TTL after it expired.
- redis-py 8.1.0: `conn.lock("lock:payout:batch-7", timeout=ttl, thread_local=False)` and an
  extend thread of our own calling `lock.extend(ttl, replace_ttl=True)` every ttl/3. Without
  `thread_local=False` the extend thread would see no token (redis-py keeps it per thread) and
  fail with "Cannot extend an unlocked lock" at once. A waiting worker tries `SET NX` every 0.1 s.

Behaviours once the lock was lost (the process stopped past the TTL, another worker took it):
- raise: the library's errors are logged with `logger.exception` and the job stops unpaid.
- swallow: the errors are caught and ignored (`except Exception: pass`); the job is paid.
- plain-del: released with `conn.delete("lock:payout:batch-7")`; renewal errors ignored.
- late (the payout incident): the renewal's failure goes unnoticed (python-redis-lock's thread
  dies with its traceback on stderr, as by default; redis-py's extend loop ignores it), the job
  runs to its end, and only the refused release is logged with the key.
- check: before each step the worker checks the key still holds its token (a `GET`); when it
  does not, it stops the job unpaid and releases (refused, logged with the key).
- fenced: each acquisition takes a fencing token (`INCR fence:payout:batch-7`); each item is
  committed by a script that refuses a token lower than the highest the store has seen
  (`store:payout:fence`), appending `NAME:<job#>:<step#>:<token>` to `payouts:items` otherwise.
  A refused item is logged as "payout write refused: stale fencing token" with the key, and the
  job goes on (the renewal's failure unnoticed, as `late`); the release's refusal is logged.

What the libraries do, seen by running this under SIGSTOP past the TTL and SIGCONT after the
other worker took the key:
- python-redis-lock: on SIGCONT the renewal thread's wait has timed out; its EXTEND script finds
  another id and `extend()` raises `redis_lock.NotAcquired("Lock lock:payout:batch-7 is not
  acquired or it already expired.")` in the renewal thread, which ends it. Python hands that to
  `threading.excepthook` (by default a bare traceback on stderr, "Exception in thread ...");
  this worker installs a hook that logs it (raise) or drops it (swallow, plain-del), and the job
  learns of the loss from that hook. Nothing tells the main thread otherwise. `release()` then
  raises `NotAcquired("Lock(lock:payout:batch-7) is not acquired or it already expired.")` and
  leaves the other worker's key alone. Logged (raise): one record for the renewal and one for
  the release, each with the traceback in `exc_info`.
- redis-py: `Lock` has no renewal of its own. On SIGCONT our extend thread's `extend()` raises
  `redis.exceptions.LockNotOwnedError("Cannot extend a lock that's no longer owned")`, and
  `release()` raises `LockNotOwnedError("Cannot release a lock that's no longer owned")`; the key
  stays the other worker's. Logged (raise): the extend failure and the release failure.
- plain-del (either library): `DEL` removes the other worker's key, which nothing reports.
A job that was stopped in its last step can finish before the renewal thread runs after the
SIGCONT (both wake at once): it is then paid even by `raise`. Stop it earlier in the job.

Logs: one JSON object per line (python-json-logger), with `"key": "lock:payout:batch-7"` and,
for failures, the exception's type, message and traceback in `exc_info`; an info line at
acquire and at release (python-redis-lock adds its own "Acquired Lock(...)" info line).
`lockwatch classify` reads raise's two records as `renew`/`not_owned` and `release`/`not_owned`
(namespace by the key) and every other line as ignored.
Stdout, one line per state change, flushed: `acquired <pid> <token>` (the value the library
wrote into the key: python-redis-lock's `lock.id`, redis-py's `lock.local.token`),
`released <pid>`, `refused <pid>` (its release was refused), `lost <pid>` (the worker saw a
library error about the lock).
"""

import argparse
import logging
import os
import sys
import threading
import time

import redis
from pythonjsonlogger.json import JsonFormatter

KEY = "lock:payout:batch-7"
STEP = 0.1
PID = os.getpid()
log = logging.getLogger("payouts.worker")


def say(what, *rest):
    print(what, PID, *rest, flush=True)


class Job:
    """One job's lock state, shared with the renewal thread."""

    def __init__(self):
        self.lost = threading.Event()
        self.said_lost = False
        self.done = False

    def lose(self):
        if self.done:
            return
        self.lost.set()
        if not self.said_lost:
            self.said_lost = True
            say("lost")


class Library:
    """What both libraries share: the release, by behaviour. `not_owned` is the library's
    error for a lock that is no longer the worker's."""

    def __init__(self, conn, ttl, behavior):
        self.conn, self.ttl, self.behavior = conn, ttl, behavior

    def release(self):
        self.stop_renewal()
        if self.behavior == "plain-del":
            self.conn.delete(KEY)
            self.lock = None
            return True
        try:
            self.lock.release()
            return True
        except (self.not_owned if self.behavior in LOGGED else Exception):
            self.job.lose()
            say("refused")
            if self.behavior in LOGGED:
                log.exception("payout lock release failed", extra={"key": KEY})
            return False

    def mine(self):
        """The key still holds this lock's token (a GET)."""
        value = self.conn.get(KEY)
        return value is not None and value.decode() == self.token


class PythonRedisLock(Library):
    def __init__(self, conn, ttl, behavior):
        import redis_lock

        super().__init__(conn, ttl, behavior)
        self.redis_lock = redis_lock
        self.not_owned = redis_lock.NotAcquired
        self.jobs = {}  # renewal thread -> its job
        threading.excepthook = self.thread_failed

    def thread_failed(self, args):
        """The renewal thread died: python-redis-lock raises `NotAcquired` there."""
        job = self.jobs.pop(args.thread, None)
        if not issubclass(args.exc_type, self.not_owned) or job is None:
            threading.__excepthook__(args)
            return
        if self.behavior in ("late", "check", "fenced"):
            threading.__excepthook__(args)
            return
        job.lose()
        if self.behavior == "raise":
            log.exception("payout lock renewal failed", exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
                          extra={"key": KEY})

    def acquire(self, job):
        self.job = job
        self.lock = self.redis_lock.Lock(self.conn, "payout:batch-7", expire=self.ttl, auto_renewal=True)
        self.lock.acquire()
        self.jobs = {t: j for t, j in self.jobs.items() if t.is_alive()}
        self.jobs[self.lock._lock_renewal_thread] = job
        self.token = self.lock.id
        return self.lock.id

    def stop_renewal(self):
        # The library's release stops its renewal thread. A plain DEL does not: that thread
        # ends at its next wake-up once the Lock is gone (it holds a weak reference), or fails
        # there with NotAcquired, which plain-del drops.
        pass


class RedisPy(Library):
    not_owned = redis.exceptions.LockNotOwnedError

    def acquire(self, job):
        self.job = job
        self.lock = self.conn.lock(KEY, timeout=self.ttl, thread_local=False)
        self.lock.acquire()
        self.stop = threading.Event()
        self.renewer = threading.Thread(target=self.extend, daemon=True)
        self.renewer.start()
        self.token = self.lock.local.token.decode()
        return self.token

    def extend(self):
        while not self.stop.wait(self.ttl / 3):
            try:
                self.lock.extend(self.ttl, replace_ttl=True)
            except (self.not_owned if self.behavior == "raise" else Exception):
                self.job.lose()
                if self.behavior == "raise":
                    log.exception("payout lock extend failed", extra={"key": KEY})
                    return

    def stop_renewal(self):
        self.stop.set()
        self.renewer.join()


LIBRARIES = {"python-redis-lock": PythonRedisLock, "redis-py": RedisPy}


LOGGED = ("raise", "late", "check", "fenced")

# The store's commit: refused (0) for a token lower than the highest it has seen.
COMMIT = """
local seen = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token < seen then return 0 end
redis.call('set', KEYS[1], token)
redis.call('rpush', KEYS[2], ARGV[2])
return 1
"""


def main():
    p = argparse.ArgumentParser(description="A payout worker holding lock:payout:batch-7.")
    p.add_argument("--library", required=True, choices=sorted(LIBRARIES))
    p.add_argument("--behavior", required=True, choices=["raise", "swallow", "plain-del", "late", "check", "fenced"])
    p.add_argument("--url", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--ttl", required=True, type=float)
    p.add_argument("--job", required=True, type=float)
    p.add_argument("--log", required=True)
    p.add_argument("--jobs", type=int)
    p.add_argument("--step", type=float, default=STEP)
    p.add_argument("--items", action="store_true")
    a = p.parse_args()

    handler = logging.FileHandler(a.log)
    handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(process)d %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    conn = redis.Redis.from_url(a.url)
    commit = conn.register_script(COMMIT)
    lib = LIBRARIES[a.library](conn, a.ttl, a.behavior)
    steps = max(1, round(a.job / a.step))
    n = 0
    while a.jobs is None or n < a.jobs:
        n += 1
        job = Job()
        token = lib.acquire(job)
        fence = conn.incr("fence:payout:batch-7") if a.behavior == "fenced" else None
        say("acquired", token)
        log.info("payout lock acquired", extra={"key": KEY, "job": n})
        for i in range(steps):
            time.sleep(a.step)
            if a.behavior == "raise" and job.lost.is_set():
                log.warning("payout job %d abandoned, nothing paid", n, extra={"key": KEY, "job": n})
                break
            if a.behavior == "check" and not lib.mine():
                job.lose()
                log.warning("payout job %d stopped: the lock is no longer ours", n, extra={"key": KEY, "job": n})
                break
            if a.behavior == "fenced":
                if not commit(keys=["store:payout:fence", "payouts:items"], args=[fence, f"{a.name}:{n}:{i}:{fence}"]):
                    log.warning("payout write refused: stale fencing token %d", fence, extra={"key": KEY, "job": n})
            elif a.items:
                conn.rpush("payouts:items", f"{a.name}:{n}:{i}")
        else:
            conn.rpush("payouts:done", f"{a.name}:{n}")
        if lib.release():
            say("released")
            log.info("payout lock released", extra={"key": KEY, "job": n})
        job.done = True
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
