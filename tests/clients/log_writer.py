"""An application writing its log as the rotation tests need one (tests/rotation.rs).

Python's logging.FileHandler keeps one handle open on the file (append mode, each record
flushed), so after logrotate renames the file it goes on writing into the rotated one, as
applications do when nobody tells them; SIGHUP (what a logrotate `postrotate` script sends)
reopens the file at its path. Every record is a lock failure lockwatch counts once — a
not-owned release in namespace `workflow` — numbered from 0 by `key=wf:lock:N`.

Commands on stdin, one a line, each answered on stdout with the records written so far:
  write N   N records now
  rate R    then R records a second, in a thread, until `pause`
  pause     stop the rate (answered once it has stopped)
  quit      answer and exit

Usage: log_writer.py PATH
"""

import logging
import signal
import sys
import threading
import time

path = sys.argv[1]
lock = threading.Lock()
written = 0
handler = logging.FileHandler(path, mode="a")
handler.setFormatter(
    logging.Formatter('ts=%(created).3f level=error msg="lock not owned" key=wf:lock:%(seq)d')
)
log = logging.getLogger("payout-worker")
log.addHandler(handler)
log.setLevel(logging.INFO)
log.propagate = False


def record():
    global written
    with lock:
        log.error("lock not owned", extra={"seq": written})
        written += 1


def reopen(_signum, _frame):
    """Reopen the file at its path, as applications do on SIGHUP."""
    with lock:
        old = handler.setStream(open(path, "a"))
        if old is not None:
            old.close()


signal.signal(signal.SIGHUP, reopen)

running = threading.Event()
thread = None


def at_rate(per_second):
    tick = 0.01
    per_tick = max(1, per_second // 100)
    next_at = time.monotonic()
    while running.is_set():
        for _ in range(per_tick):
            record()
        next_at += tick
        time.sleep(max(0.0, next_at - time.monotonic()))


def answer():
    with lock:
        n = written
    sys.stdout.write(f"{n}\n")
    sys.stdout.flush()


for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "write":
        for _ in range(int(words[1])):
            record()
    elif words[0] == "rate":
        running.set()
        thread = threading.Thread(target=at_rate, args=(int(words[1]),), daemon=True)
        thread.start()
    elif words[0] == "pause":
        running.clear()
        if thread is not None:
            thread.join()
            thread = None
    elif words[0] == "quit":
        answer()
        break
    answer()
