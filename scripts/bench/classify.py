"""classify: `lockwatch classify --summary` against the practical floor, ripgrep counting the
lines with a lock word (`rg -c -i lock`), on intake's generated file of 5,000,000 lines and
config (3 namespaces), the page cache warm, everything pinned with `taskset -c 1`; this build
and the base, which must print the same summary first; beside them `rg --no-mmap` and `wc -l`
(what read()ing the file and counting its lines costs). hyperfine --warmup 1 --runs 5: the best
of 5 (min) and the mean of each, in seconds, GB/s and lines/s.
"""
import os
import shlex

import common
import intake

TOOLS = ("ripgrep", "ripgrep_read", "wc", "lockwatch", "base")


def warm(path):
    """Reads the file once so that every run finds it in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def run(ctx):
    lines = ctx.size(5_000_000, 200_000)
    rg = common.require("rg", "ripgrep")
    log, cfg = intake.generated_log(ctx, lines)
    base = ctx.base_bin(ctx.base_rev)
    pin = ["taskset", "-c", "1"]
    # Beside them, what reading the file costs a reader that read()s it (lockwatch may not map
    # it: no unsafe code) and counts every line: ripgrep without its memory map, and wc -l.
    cmds = {"ripgrep": pin + [rg, "-c", "-i", "lock", log],
            "ripgrep_read": pin + [rg, "--no-mmap", "-c", "-i", "lock", log],
            "wc": pin + ["wc", "-l", log],
            "lockwatch": pin + [ctx.new_bin, "classify", "--summary", "-c", cfg, log],
            "base": pin + [base, "classify", "--summary", "-c", cfg, log]}
    ours, based = intake.summary_counts(ctx, cmds["lockwatch"]), intake.summary_counts(ctx, cmds["base"])
    if not ours or ours != based:
        ctx.fail(f"the base ({ctx.base_rev}) and this build print different summaries:\n{based}\n---\n{ours}")
    matched = int(ctx.run(cmds["ripgrep"]).strip())
    warm(log)
    t = ctx.hyperfine([(name, shlex.join(cmds[name])) for name in TOOLS],
                      warmup=ctx.size(1, 0), runs=ctx.size(5, 2))
    size = os.path.getsize(log)
    figures = {"lines": lines, "file_bytes": size, "events": sum(int(r[3]) for r in ours),
               "ripgrep_lines_matched": matched, "hyperfine_runs": len(t["lockwatch"]["times"])}
    for name in TOOLS:
        best, mean = t[name]["min"], t[name]["mean"]
        figures.update({f"{name}_min_s": best, f"{name}_mean_s": mean, f"{name}_gb_per_s": size / best / 1e9,
                        f"{name}_lines_per_s": lines / best, f"{name}_mean_lines_per_s": lines / mean})
    ratios = {"lockwatch_over_ripgrep": t["lockwatch"]["min"] / t["ripgrep"]["min"],
              "base_over_ripgrep": t["base"]["min"] / t["ripgrep"]["min"],
              "base_over_lockwatch": t["base"]["min"] / t["lockwatch"]["min"],
              "lockwatch_over_ripgrep_read": t["lockwatch"]["min"] / t["ripgrep_read"]["min"],
              "wc_over_ripgrep": t["wc"]["min"] / t["ripgrep"]["min"],
              "lockwatch_over_ripgrep_mean": t["lockwatch"]["mean"] / t["ripgrep"]["mean"],
              "base_over_lockwatch_mean": t["base"]["mean"] / t["lockwatch"]["mean"]}
    tools = {"ripgrep": ctx.run([rg, "--version"]).splitlines()[0]}
    return {"figures": figures, "ratios": ratios, "tools": tools}
