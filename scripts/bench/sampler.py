"""sampler: one sample pass over 100,000 and 1,000,000 lock keys on a local redis-server
(criterion, benches/sample_pass.rs) beside a SCAN-only walk of the same keys (the floor:
nothing read); the peak RSS of `lockwatch serve` (scan mode) tracking 0, 100k and 1M locks
and the pass duration it reports, this build and the base on the 1M; and, on the same
100,000 keys, the scrape time of prometheus-redis-exporter with --check-keys.
"""
import common
import probe

KEY = "SET bench:lock:%d owner-%d PX 3600000\r\n"


def serve_rss(ctx, rport, db, binary, name):
    """(VmHWM KiB, sample duration s) of `binary serve` in scan mode on database `db`, after
    its second pass."""
    port = common.free_port()
    cfg = ctx.path(f"{name}.toml")
    with open(cfg, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\n[[target]]\nname = "bench"\n'
                f'url = "redis://127.0.0.1:{rport}/{db}"\nsample_interval = "10s"\nsample_budget = "10s"\n'
                'scan_count = 1000\nnotifications = "off"\n[[namespace]]\nname = "bench"\n'
                'pattern = "bench:lock:*"\nttl = "3600s"\nrenew_every = "1200s"\n')
    p = probe.serve(ctx, binary, cfg, port, name)
    ctx.wait_for(f"{name}: two sample passes",
                 lambda: probe.total(probe.get(port), "lockwatch_sample_passes_total") >= 2, 60)
    body = probe.get(port)
    duration = probe.values(body, "lockwatch_sample_duration_seconds")
    hwm = probe.kib(p.pid, "VmHWM")
    ctx.stop(p)
    if not duration:
        ctx.fail(f"{name}: no lockwatch_sample_duration_seconds on /metrics")
    return hwm, duration[0]


def run(ctx):
    small, large = ctx.size(100_000, 10_000), ctx.size(1_000_000, 50_000)
    peer = common.require("prometheus-redis-exporter", "prometheus-redis-exporter")
    rport, _ = common.redis_server(ctx)
    common.say(f"loading {small:,} keys (db 1) and {large:,} keys (db 2)…")
    common.redis_load(ctx, rport, KEY, small, db=1)
    common.redis_load(ctx, rport, KEY, large, db=2)
    # 1. Pass time: criterion, on the same server.
    ctx.criterion("sample_pass", env={"LOCKWATCH_BENCH_REDIS_URL": f"redis://127.0.0.1:{rport}/0",
                                      "LOCKWATCH_BENCH_SIZES": f"{small},{large}"})
    mean = lambda name: ctx.criterion_mean_s("sample_pass", name)
    f = {"keys_small": small, "keys_large": large,
         "pass_small_s": mean(f"{small}_keys"), "pass_large_s": mean(f"{large}_keys"),
         "scan_small_s": mean(f"scan_only_{small}_keys"), "scan_large_s": mean(f"scan_only_{large}_keys")}
    # 2. Memory: peak RSS of `lockwatch serve` tracking none, the small and the large set.
    f["rss_empty_kib"], _ = serve_rss(ctx, rport, 3, ctx.new_bin, "serve-empty")
    f["rss_small_kib"], f["serve_pass_small_s"] = serve_rss(ctx, rport, 1, ctx.new_bin, "serve-small")
    f["rss_large_kib"], f["serve_pass_large_s"] = serve_rss(ctx, rport, 2, ctx.new_bin, "serve-large")
    base = ctx.base_bin(ctx.base_rev)
    f["base_rss_empty_kib"], _ = serve_rss(ctx, rport, 3, base, "base-empty")
    f["base_rss_large_kib"], f["base_serve_pass_large_s"] = serve_rss(ctx, rport, 2, base, "base-large")
    per_lock = lambda rss, empty, n: (rss - empty) * 1024 / n
    f["bytes_per_lock_small"] = per_lock(f["rss_small_kib"], f["rss_empty_kib"], small)
    f["bytes_per_lock_large"] = per_lock(f["rss_large_kib"], f["rss_empty_kib"], large)
    f["base_bytes_per_lock_large"] = per_lock(f["base_rss_large_kib"], f["base_rss_empty_kib"], large)
    # 3. The peer: prometheus-redis-exporter --check-keys on the same small set.
    eport = common.free_port()
    ctx.spawn([peer, "-redis.addr", f"redis://127.0.0.1:{rport}", "-check-keys", "db1=bench:lock:*",
               "-web.listen-address", f"127.0.0.1:{eport}"], "redis_exporter")
    common.wait_port(ctx, eport, "prometheus-redis-exporter")
    f["peer_keys_exported"] = sum(1 for l in probe.get(eport, timeout=300).splitlines()
                                  if l.startswith("redis_key_size{"))
    t = ctx.hyperfine([("peer", f"curl -sf -o /dev/null http://127.0.0.1:{eport}/metrics")],
                      warmup=ctx.size(1, 0), runs=ctx.size(5, 2))
    f["peer_scrape_s"] = t["peer"]["mean"]
    r = {"peer_over_pass_small": f["peer_scrape_s"] / f["pass_small_s"],
         "pass_over_scan_small": f["pass_small_s"] / f["scan_small_s"],
         "pass_over_scan_large": f["pass_large_s"] / f["scan_large_s"],
         "serve_pass_over_scan_large": f["serve_pass_large_s"] / f["scan_large_s"],
         "base_serve_pass_over_scan_large": f["base_serve_pass_large_s"] / f["scan_large_s"],
         "serve_pass_large_new_over_base": f["serve_pass_large_s"] / f["base_serve_pass_large_s"],
         "bytes_per_lock_large_new_over_base": f["bytes_per_lock_large"] / f["base_bytes_per_lock_large"]}
    return {"figures": f, "ratios": r}
