"""tracking: a shared database of 10,000,000 cache keys (~2,000 writes/s) and 10,000 lock keys
with churn (bench/tracking_load.py): Redis CPU added by lockwatch in events mode and in scan
mode (each against the workload alone), the time from SIGSTOP of a renewing holder to its
overdue flag in both modes, lockwatch CPU; memory per tracked lock in events mode (1,000,000
locks) for this build and the base; prometheus-redis-exporter --check-keys on the same data.
"""
import os
import signal
import time

import common
import probe


def config(ctx, name, rport, port, body):
    path = ctx.path(f"{name}.toml")
    with open(path, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\n[[target]]\nname = "bench"\n'
                f'url = "redis://127.0.0.1:{rport}/{body}')
    return path


def window_cpu(ctx, rport, window, pid=None):
    """(Redis CPU, lockwatch CPU) over `window` s, in % of a core."""
    r0, l0 = probe.redis_cpu_s(ctx, rport), probe.cpu_s(pid) if pid else 0.0
    time.sleep(window)
    r1, l1 = probe.redis_cpu_s(ctx, rport), probe.cpu_s(pid) if pid else 0.0
    return (r1 - r0) / window * 100, (l1 - l0) / window * 100


def stall_ms(ctx, rport, lport):
    """A holder renewing a 6 s lock every 2 s, stopped just after a renewal: ms from the
    overdue mark (TTL left below 6 - 2 - 1 = 3 s) to the flag, or None when it expired first."""
    cli = lambda *a: common.redis_cli(ctx, rport, *a)
    cli("SET", "lock:stall:1", "h", "NX", "PX", "6000")
    renew = ("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
             "else return 0 end")
    holder = ctx.spawn(["bash", "-c", f'while true; do sleep 2; redis-cli -p {rport} EVAL "{renew}" 1 lock:stall:1 h 6000'
                        ' >/dev/null; done'], "holder", new_session=True)
    try:
        time.sleep(5)
        p0 = int(cli("PTTL", "lock:stall:1"))
        while (p := int(cli("PTTL", "lock:stall:1"))) <= p0 and p < 5900:
            p0 = p
            time.sleep(0.005)
        os.killpg(holder.pid, signal.SIGSTOP)
        mark = time.monotonic() + (int(cli("PTTL", "lock:stall:1")) - 3000) / 1000
        series = 'lockwatch_locks_renewal_overdue{namespace="stall",target="bench"}'
        while time.monotonic() < mark + 4:
            asked = time.monotonic()
            if (probe.value(probe.get(lport), series) or 0) >= 1:
                return round((asked - mark) * 1000)
            time.sleep(0.02)
        return None
    finally:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.killpg(holder.pid, sig)
            except ProcessLookupError:
                pass
        ctx.stop(holder)
        cli("DEL", "lock:stall:1")


def rss_events(ctx, rport, db, held, binary, name, reconcile):
    """VmHWM KiB of `binary serve` on database `db` once its held gauge shows `held` (the base
    has no reconcile_rate: it kept no events-mode lock table to fill)."""
    port = common.free_port()
    cfg = config(ctx, name, rport, port, f'{db}"\nsample_interval = "60s"\nsample_budget = "30s"\n'
                 + ('reconcile_rate = 10000000\n' if reconcile else '')
                 + '[[namespace]]\nname = "job"\npattern = "lock:job:*"\nttl = "3600s"\n')
    p = probe.serve(ctx, binary, cfg, port, name)
    gauge = 'lockwatch_locks_held{namespace="job",target="bench"}'
    ctx.wait_for(f"{name}: {held} locks held", lambda: probe.value(probe.get(port), gauge) == held, 300, every=0.5)
    time.sleep(2)
    hwm = probe.kib(p.pid, "VmHWM")
    ctx.stop(p)
    return hwm


def modes(ctx, rport, f):
    """Events mode (notifications auto) and scan mode (off), each over one window."""
    for mode in ("auto", "off"):
        port = common.free_port()
        cfg = config(ctx, f"t-{mode}", rport, port, f'0"\nnotifications = "{mode}"\n'
                     '[[namespace]]\nname = "job"\npattern = "lock:job:*"\nttl = "60s"\nrenew_every = "20s"\n'
                     '[[namespace]]\nname = "stall"\npattern = "lock:stall:*"\nttl = "6s"\nrenew_every = "2s"\n')
        p = probe.serve(ctx, ctx.new_bin, cfg, port, f"serve-{mode}")
        time.sleep(ctx.size(10, 3))
        common.say(f"lockwatch notifications={mode}, {f['window_s']} s…")
        redis, lockwatch = window_cpu(ctx, rport, f["window_s"], p.pid)
        events = probe.values(probe.get(port), 'lockwatch_tracking_mode{mode="events"')
        f[f"{mode}_events_mode"] = events == [1.0]
        f[f"{mode}_redis_cpu_pct"], f[f"{mode}_lockwatch_cpu_pct"] = redis, lockwatch
        f[f"{mode}_redis_cpu_added_pct"] = redis - f["workload_redis_cpu_pct"]
        f[f"{mode}_stall_flagged_ms"] = stall_ms(ctx, rport, port)
        f[f"{mode}_passes_cut"] = probe.value(probe.get(port), 'lockwatch_sample_truncated_total{target="bench"}') or 0
        ctx.stop(p)


def run(ctx):
    f = {"cache_keys": int(os.environ.get("LOCKWATCH_BENCH_CACHE_KEYS", ctx.size(10_000_000, 100_000))),
         "lock_keys": ctx.size(10_000, 1_000), "window_s": int(os.environ.get("LOCKWATCH_BENCH_WINDOW", ctx.size(60, 5))),
         "memory_locks": ctx.size(1_000_000, 50_000)}
    peer = common.require("prometheus-redis-exporter", "prometheus-redis-exporter")
    rport, _ = common.redis_server(ctx, "redis", "--notify-keyspace-events", "KEA")
    common.say(f"loading {f['cache_keys']:,} cache keys and {f['lock_keys']:,} lock keys…")
    common.redis_load(ctx, rport, "SET cache:%d v%d\r\n", f["cache_keys"])
    common.redis_load(ctx, rport, "SET lock:job:%d owner-%d PX 60000\r\n", f["lock_keys"])
    gen = ctx.spawn(["python3", "bench/tracking_load.py", str(rport), str(f["cache_keys"]), str(f["lock_keys"]),
                     "2000", "200"], "tracking_load")
    common.say(f"workload alone, {f['window_s']} s…")
    f["workload_redis_cpu_pct"], _ = window_cpu(ctx, rport, f["window_s"])
    modes(ctx, rport, f)
    ctx.stop(gen)
    # Memory per tracked lock in events mode: the locks in db 3 against an empty db 4.
    common.redis_load(ctx, rport, "SET lock:job:%d owner-%d PX 3600000\r\n", f["memory_locks"], db=3)
    base = ctx.base_bin(ctx.base_rev)
    for who, binary in (("base_", base), ("", ctx.new_bin)):
        f[f"{who}rss_empty_kib"] = rss_events(ctx, rport, 4, 0, binary, f"{who}m0", not who)
        f[f"{who}rss_locks_kib"] = rss_events(ctx, rport, 3, f["memory_locks"], binary, f"{who}m1", not who)
        f[f"{who}bytes_per_lock"] = (f[f"{who}rss_locks_kib"] - f[f"{who}rss_empty_kib"]) * 1024 / f["memory_locks"]
    # The peer on the same shared keyspace: one --check-keys scrape walks it all.
    eport = common.free_port()
    ctx.spawn([peer, "-redis.addr", f"redis://127.0.0.1:{rport}", "-web.listen-address", f"127.0.0.1:{eport}",
               "-check-keys", "lock:job:*"], "redis_exporter")
    common.wait_port(ctx, eport, "prometheus-redis-exporter")
    r0 = probe.redis_cpu_s(ctx, rport)
    t = ctx.hyperfine([("peer", f"curl -sf -o /dev/null http://127.0.0.1:{eport}/metrics")], warmup=0,
                      runs=ctx.size(3, 2))
    f["peer_scrapes"] = len(t["peer"]["times"])
    f["peer_scrape_s"] = t["peer"]["mean"]
    f["peer_redis_cpu_per_scrape_s"] = (probe.redis_cpu_s(ctx, rport) - r0) / f["peer_scrapes"]
    r = {"bytes_per_lock_new_over_base": f["bytes_per_lock"] / f["base_bytes_per_lock"]}
    return {"figures": f, "ratios": r}
