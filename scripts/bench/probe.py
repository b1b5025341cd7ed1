"""Reading what a running exporter and its processes say: /metrics (HTTP on loopback), the
sum or value of a series, a process's resident set and CPU seconds from /proc, Redis's own
CPU (INFO cpu), and timing requests with curl as a client would.
"""
import os
import statistics
import urllib.request

import common

TICK = os.sysconf("SC_CLK_TCK")


def get(port, path="/metrics", timeout=5):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.read().decode(errors="replace")


def total(body, prefix):
    """The sum of the values of the lines that start with `prefix` (a name, or a name and
    the start of its labels)."""
    return sum(float(line.rsplit(None, 1)[1]) for line in body.splitlines() if line.startswith(prefix))


def value(body, series):
    """The value of the line whose series (name and labels, as written) is `series`, or None."""
    for line in body.splitlines():
        name, _, v = line.rpartition(" ")
        if name == series:
            return float(v)
    return None


def values(body, prefix):
    return [float(line.rsplit(None, 1)[1]) for line in body.splitlines() if line.startswith(prefix)]


def kib(pid, field):
    """VmRSS, VmHWM… of /proc/PID/status, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise common.BenchError(f"/proc/{pid}/status has no {field}")


def cpu_s(pid):
    """utime + stime of /proc/PID/stat, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def redis_cpu_s(ctx, port):
    """used_cpu_user + used_cpu_sys of INFO cpu."""
    info = common.redis_cli(ctx, port, "INFO", "cpu")
    return sum(float(l.split(":")[1]) for l in info.splitlines() if l.startswith(("used_cpu_user:", "used_cpu_sys:")))


def curl_s(ctx, url):
    """One request by curl; its time_total in seconds (the body is dropped)."""
    return float(ctx.run(["curl", "-sf", "-o", "/dev/null", "-w", "%{time_total}", url]))


def median_ms(ctx, url, n):
    return statistics.median(curl_s(ctx, url) for _ in range(n)) * 1000


def serve(ctx, binary, cfg, port, name, *, pin=None, level="warn"):
    """`binary serve -c cfg` (pinned with taskset when `pin` is a core), once its port answers."""
    cmd = ([common.require("taskset", "util-linux"), "-c", str(pin)] if pin is not None else []) + \
        [binary, "serve", "-c", cfg, "--log-level", level]
    p = ctx.spawn(cmd, name)
    common.wait_port(ctx, port, name)
    return p
