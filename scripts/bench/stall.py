"""stall: the lead time of a stalled holder's overdue flag (scripts/stall.sh, one binary and
mode a run; issue 43): the TTL left on its key (30 s, renewed every 10 s: ideally 15 s) when
lockwatch_locks_renewal_overdue first shows it, beside 2,000 locks of an hour with churn and
5,000,000 cache keys, in events and in scan mode, each run against its own fresh
redis-server; for this build and the base (LOCKWATCH_BENCH_STALL_BASE, default e33c20a).
"""
import os


def measure(ctx, binary, mode):
    """One scripts/stall.sh run: lead_s (None: never flagged), at_stop_s, after_s, passes, cut."""
    env = {"LOCKWATCH_STALL_CACHE_KEYS": str(ctx.size(5_000_000, 100_000)),
           "LOCKWATCH_STALL_TTL": str(ctx.size(30, 9))}
    out = ctx.run([os.path.join(ctx.root, "scripts/stall.sh"), binary, mode], env=env).split()
    try:
        lead, at_stop, after, passes, cut = out
        return {"lead_s": None if lead == "never" else float(lead), "pttl_at_stop_s": float(at_stop),
                "flagged_after_stop_s": None if after == "-" else float(after),
                "passes_after_stop": int(passes), "passes_cut": int(cut)}
    except ValueError:
        ctx.fail(f"scripts/stall.sh printed {out}, not lead at_stop after passes cut")


def run(ctx):
    base = ctx.base_bin(os.environ.get("LOCKWATCH_BENCH_STALL_BASE", "e33c20a"))
    figures = {"ttl_s": ctx.size(30, 9), "cache_keys": ctx.size(5_000_000, 100_000)}
    for mode in ("events", "scan"):
        figures[f"{mode}_base"] = measure(ctx, base, mode)
        figures[f"{mode}_new"] = measure(ctx, ctx.new_bin, mode)
    return {"figures": figures, "ratios": {}}
