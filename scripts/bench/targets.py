"""targets: one exporter watching 100 small redis-servers with 3 namespaces each (10 locks per
namespace, notifications on): RSS per target (against one target), Redis connections per
target, /metrics size and scrape time (median of 21), and the slowest target's pass
duration; this build only (the base has no many-target figures to compare).
"""
import time

import common
import probe


def serve_targets(ctx, ports, count):
    """(VmRSS KiB, Redis connections, /metrics bytes, scrape median ms, slowest pass s) with
    the first `count` servers as targets, after every target's second pass and 6 s more."""
    port = common.free_port()
    cfg = ctx.path(f"targets-{count}.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\n')
        for k in range(count):
            f.write(f'[[target]]\nname = "t{k}"\nurl = "redis://127.0.0.1:{ports[k]}/0"\nsample_interval = "5s"\n')
        for ns in "abc":
            f.write(f'[[namespace]]\nname = "{ns}"\npattern = "{ns}:lock:*"\nttl = "3600s"\n')
    p = probe.serve(ctx, ctx.new_bin, cfg, port, f"serve-{count}")
    ctx.wait_for(f"{count} targets with two passes each", lambda: sum(
        v >= 2 for v in probe.values(probe.get(port), "lockwatch_sample_passes_total")) >= count, 120, every=0.2)
    time.sleep(ctx.size(6, 2))  # a few passes and reconciling steps more: the resident set settles
    rss = probe.kib(p.pid, "VmRSS")
    # each CLIENT LIST counts the redis-cli asking too
    conns = sum(len(common.redis_cli(ctx, ports[k], "CLIENT", "LIST").splitlines()) - 1 for k in range(count))
    size = len(probe.get(port).encode())
    scrape = probe.median_ms(ctx, f"http://127.0.0.1:{port}/metrics", 21)
    slowest = max(probe.values(probe.get(port), "lockwatch_sample_duration_seconds{"), default=0.0)
    ctx.stop(p)
    return rss, conns, size, scrape, slowest


def run(ctx):
    n = ctx.size(100, 5)
    common.say(f"starting {n} redis-servers…")
    ports = [common.redis_server(ctx, f"redis-{i}", "--notify-keyspace-events", "KEA")[0] for i in range(n)]
    for port in ports:
        for ns in "abc":
            common.redis_load(ctx, port, f"SET {ns}:lock:%d owner-%d PX 3600000\r\n", 10)
    f = {"targets": n}
    keys = ("rss_kib", "redis_connections", "metrics_bytes", "scrape_ms", "slowest_pass_s")
    for label, count in (("one", 1), ("many", n)):
        f.update({f"{k}_{label}": v for k, v in zip(keys, serve_targets(ctx, ports, count))})
    f["rss_per_target_kib"] = (f["rss_kib_many"] - f["rss_kib_one"]) / (n - 1)
    f["redis_connections_per_target"] = f["redis_connections_many"] / n
    f["metrics_bytes_per_target"] = (f["metrics_bytes_many"] - f["metrics_bytes_one"]) / (n - 1)
    return {"figures": f, "ratios": {}}
