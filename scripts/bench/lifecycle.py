"""lifecycle: the lifecycle watcher under a rising rate of acquire/renew/release cycles
(benches/lifecycle_load.rs: its own redis-server and the exporter binary it is given), the
base's binary and this build's in turn: the load steps with the memory per tracked lock
after them (warm), then a fresh exporter filled only by the notifications of the locks (cold).
"""
import os
import re

ROW = re.compile(r"^\| (\d+) \|")
MEMORY = re.compile(r"memory: (\d+) locks held at once: exporter RSS (\d+) KiB → (\d+) KiB, (\d+) bytes per tracked lock")
COLUMNS = ("target_per_s", "caused_per_s", "counted_per_s", "max_lag", "lag_at_end", "drained_ms",
           "lockwatch_cores", "redis_cores", "subscribed")


def parse(ctx, text, name):
    """The bench's markdown: a row per rate, and the memory line."""
    steps = []
    for line in text.splitlines():
        if ROW.match(line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != len(COLUMNS):
                ctx.fail(f"{name}: a row of {len(cells)} cells: {line}")
            row = dict(zip(COLUMNS, cells))
            row["drained_ms"] = None if row["drained_ms"].startswith("never") else int(row["drained_ms"].split()[0])
            row["subscribed"] = row["subscribed"] == "yes"
            for k in COLUMNS[:5] + COLUMNS[6:8]:
                row[k] = float(row[k])
            steps.append(row)
    m = MEMORY.search(text)
    if not m:
        ctx.fail(f"{name}: no memory line in the bench's output:\n{text[-500:]}")
    memory = dict(zip(("locks", "rss_before_kib", "rss_after_kib", "bytes_per_lock"), map(int, m.groups())))
    return {"steps": steps, "memory": memory}


def run(ctx):
    rates = os.environ.get("LOCKWATCH_LOAD_RATES", ctx.size("10000,25000,50000,100000,200000,300000,400000",
                                                            "10000,50000"))
    env = {"LOCKWATCH_LOAD_SECS": str(ctx.size(10, 2))} if ctx.quick else {}
    if ctx.quick:
        env["LOCKWATCH_LOAD_LOCKS"] = "100000"
    base = ctx.base_bin(ctx.base_rev)
    ctx.criterion("lifecycle_load", no_run=True)
    figures = {}
    for kind, rate in (("warm", rates), ("cold", "none")):
        for build, binary in (("base", base), ("new", ctx.new_bin)):
            out = ctx.run(["cargo", "bench", "--locked", "--bench", "lifecycle_load"],
                          env={**env, "CARGO_TARGET_DIR": ctx.criterion_dir(), **ctx.bench_profile(),
                               "LOCKWATCH_BENCH_BIN": binary, "LOCKWATCH_LOAD_RATES": rate})
            got = parse(ctx, out, f"{build} {kind}")
            if kind == "warm" and len(got["steps"]) != len(rates.split(",")):
                ctx.fail(f"{build}: {len(got['steps'])} load steps of {rates}")
            if kind == "warm":
                figures[f"{build}_steps"] = got["steps"]
            figures[f"{build}_{kind}_memory"] = got["memory"]
    ratios = {}
    for b, n in zip(figures["base_steps"], figures["new_steps"]):
        rate = int(n["target_per_s"])
        for k in ("counted_per_s", "lockwatch_cores", "redis_cores"):
            ratios[f"{rate}_{k}_new_over_base"] = n[k] / b[k] if b[k] else None
    for kind in ("warm", "cold"):
        ratios[f"{kind}_bytes_per_lock_new_over_base"] = (figures[f"new_{kind}_memory"]["bytes_per_lock"]
                                                         / figures[f"base_{kind}_memory"]["bytes_per_lock"])
    return {"figures": figures, "ratios": ratios}
