"""burst: the watcher under a burst (scripts/burst.sh, one binary a run): after 1,000,000 locks
loaded and flushed, redis-benchmark -P 16 -c 20 sends 500,000 each of SET PX, PEXPIRE and DEL
on 100,000 lock keys; CPU seconds of lockwatch and of redis-server until every event is
counted, and the Redis time of lockwatch's own commands (INFO commandstats) against the
burst's; the base and this build in turn, each against its own fresh redis-server.
LOCKWATCH_BURST_RUNS (default 1) pairs of runs.
"""
import os

FIELDS = ("lockwatch_cpu_s", "redis_cpu_s", "lockwatch_reads_usec", "burst_cmds_usec", "transitions",
          "notifications", "burst_s", "exact")
EXACT = {"yes": True, "no": False, "n/a": None}


def measure(ctx, binary):
    """One scripts/burst.sh run: its one line, checked field by field."""
    env = {"LOCKWATCH_BURST_LOAD": str(ctx.size(1_000_000, 50_000)),
           "LOCKWATCH_BURST_COMMANDS": str(ctx.size(500_000, 50_000)),
           "LOCKWATCH_BURST_KEYS": str(ctx.size(100_000, 10_000))}
    out = ctx.run([os.path.join(ctx.root, "scripts/burst.sh"), binary], env=env).split()
    if len(out) != len(FIELDS) or out[-1] not in EXACT:
        ctx.fail(f"scripts/burst.sh printed {out}, not {' '.join(FIELDS)}")
    try:
        row = {k: float(v) for k, v in zip(FIELDS[:-1], out)}
    except ValueError:
        ctx.fail(f"scripts/burst.sh printed {out}, not numbers")
    row["exact"] = EXACT[out[-1]]
    row["lockwatch_over_redis"] = row["lockwatch_cpu_s"] / row["redis_cpu_s"] if row["redis_cpu_s"] else None
    row["reads_share"] = row["lockwatch_reads_usec"] / row["burst_cmds_usec"] if row["burst_cmds_usec"] else None
    return row


def run(ctx):
    base = ctx.base_bin(ctx.base_rev)
    runs = []
    for _ in range(int(os.environ.get("LOCKWATCH_BURST_RUNS", "1"))):
        runs.append({"base": measure(ctx, base), "new": measure(ctx, ctx.new_bin)})
    b, n = runs[0]["base"], runs[0]["new"]
    ratios = {"lockwatch_cpu_new_over_base": n["lockwatch_cpu_s"] / b["lockwatch_cpu_s"],
              "redis_cpu_new_over_base": n["redis_cpu_s"] / b["redis_cpu_s"]}
    return {"figures": {"runs": runs}, "ratios": ratios}
