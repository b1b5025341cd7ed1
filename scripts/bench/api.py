"""api: GET /api/v1/locks?namespace=bench&limit=10 with 1,000,000 tracked locks (scan mode):
the median time of 11 sequential requests and the RSS that five concurrent requests add
(peak, after resetting it), for the base (LOCKWATCH_BENCH_API_BASE, else LOCKWATCH_BENCH_BASE)
and this build in turn.
"""
import os
import subprocess

import common
import probe


def measure(ctx, rport, binary, n, name):
    """(median ms, VmRSS KiB before the concurrent requests, VmHWM growth KiB)."""
    port = common.free_port()
    cfg = ctx.path(f"{name}.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\n[[target]]\nname = "bench"\n'
                f'url = "redis://127.0.0.1:{rport}/0"\nsample_interval = "1h"\nsample_budget = "60s"\n'
                'scan_count = 1000\nnotifications = "off"\n[[namespace]]\nname = "bench"\n'
                'pattern = "bench:lock:*"\nttl = "3600s"\n')
    p = probe.serve(ctx, binary, cfg, port, name)
    ctx.wait_for(f"{name}: {n} locks held", lambda: probe.total(probe.get(port), "lockwatch_locks_held{") == n, 120)
    url = f"http://127.0.0.1:{port}/api/v1/locks?namespace=bench&limit=10"
    probe.curl_s(ctx, url)
    median = probe.median_ms(ctx, url, 11)
    rss = probe.kib(p.pid, "VmRSS")
    with open(f"/proc/{p.pid}/clear_refs", "w") as f:
        f.write("5")
    clients = [subprocess.Popen(["curl", "-sf", "-o", "/dev/null", url]) for _ in range(5)]
    if any(c.wait() != 0 for c in clients):
        ctx.fail(f"{name}: a concurrent request failed")
    growth = probe.kib(p.pid, "VmHWM") - rss
    ctx.stop(p)
    return median, rss, growth


def run(ctx):
    n = ctx.size(1_000_000, 50_000)
    rport, _ = common.redis_server(ctx)
    common.say(f"loading {n:,} lock keys…")
    common.redis_load(ctx, rport, "SET bench:lock:%d owner-%d PX 3600000\r\n", n)
    base = ctx.base_bin(os.environ.get("LOCKWATCH_BENCH_API_BASE", ctx.base_rev))
    f = {"locks": n}
    f["base_median_ms"], f["base_rss_before_kib"], f["base_rss_growth_kib"] = measure(ctx, rport, base, n, "base")
    f["median_ms"], f["rss_before_kib"], f["rss_growth_kib"] = measure(ctx, rport, ctx.new_bin, n, "new")
    r = {"median_new_over_base": f["median_ms"] / f["base_median_ms"],
         "rss_growth_new_over_base": f["rss_growth_kib"] / f["base_rss_growth_kib"] if f["base_rss_growth_kib"] else None}
    return {"figures": f, "ratios": r}
