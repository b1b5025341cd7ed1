"""memory: memory per tracked lock in events mode, 1,000,000 locks announced by notifications
into a fresh exporter (cold) and into one that first took 1,000,000 acquire/release
transitions (warm), the base and this build in turn (scripts/memory.sh, one binary a run).
"""
import os

FIELDS = ("bytes_per_lock", "rss_before_kib", "rss_after_kib", "rss_peak_kib", "load_s", "held")


def measure(ctx, binary, n, warm):
    """One scripts/memory.sh run: its one line, checked field by field."""
    cmd = [os.path.join(ctx.root, "scripts/memory.sh"), binary, str(n)] + (["warm"] if warm else [])
    out = ctx.run(cmd, env={"LOCKWATCH_MEMORY_CHURN": str(ctx.size(500_000, 50_000))}).split()
    if len(out) != len(FIELDS):
        ctx.fail(f"scripts/memory.sh printed {out}, not {' '.join(FIELDS)}")
    try:
        return {k: float(v) if k in ("bytes_per_lock", "load_s") else int(v) for k, v in zip(FIELDS, out)}
    except ValueError:
        ctx.fail(f"scripts/memory.sh printed {out}, not numbers")


def run(ctx):
    n = int(os.environ.get("LOCKWATCH_BENCH_LOCKS", ctx.size(1_000_000, 100_000)))
    base = ctx.base_bin(ctx.base_rev)
    figures, ratios = {"locks": n}, {}
    for kind in ("cold", "warm"):
        b = measure(ctx, base, n, kind == "warm")
        m = measure(ctx, ctx.new_bin, n, kind == "warm")
        if m["held"] != n:
            ctx.fail(f"this build's lock table holds {m['held']} of {n} locks ({kind})")
        for k in FIELDS:
            figures[f"{kind}_base_{k}"] = b[k]
            figures[f"{kind}_{k}"] = m[k]
        ratios[f"{kind}_bytes_per_lock_new_over_base"] = m["bytes_per_lock"] / b["bytes_per_lock"]
    return {"figures": figures, "ratios": ratios}
