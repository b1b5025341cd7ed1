"""intake: the event intake on one core. Classification alone (criterion, benches/classify.rs);
a generated log of 5,000,000 lines (1% lock events, mixed formats) through `lockwatch classify
--summary` of this build and the base and through Debian's mtail with an equivalent program
(bench/locks.mtail), pinned with `taskset -c 1`, side by side with hyperfine, after checking
that all three count the same events; then `lockwatch serve` of each build tailing the file.
"""
import os
import shlex
import shutil
import time

import common
import probe

# The generated log's namespaces, on a target that is never reached.
INTAKE_TOML = """[[target]]
name = "bench"
url = "redis://127.0.0.1:1/0"
[[namespace]]
name = "workflow"
pattern = "cordum:wf:run:lock:*"
ttl = "30s"
log_phrases = ["run lock"]
[[namespace]]
name = "approval"
pattern = "cordum:approval:lock:*"
ttl = "10s"
log_phrases = ["approval lock"]
[[namespace]]
name = "payout"
pattern = "payout:batch:lock:*"
ttl = "30s"
log_phrases = ["payout"]
"""


def generated_log(ctx, lines):
    """examples/gen_log's file of `lines` lines, written once per run, and the intake config."""
    if lines not in ctx.logs:
        ctx.build_new("--example", "gen_log")
        path = ctx.path(f"app-{lines}.log")
        ctx.run([os.path.join(ctx.root, "target/release/examples/gen_log"), path, str(lines)])
        ctx.logs[lines] = path
    cfg = ctx.path("intake.toml")
    with open(cfg, "w") as f:
        f.write(INTAKE_TOML)
    return ctx.logs[lines], cfg


def serve_config(ctx, cfg, port, log=None):
    """The intake config served on `port`, no notifications; tailing `log` from its start."""
    with open(cfg) as f:
        text = f.read().replace('name = "bench"\n', 'name = "bench"\nnotifications = "off"\n', 1)
    path = ctx.path(f"serve-{port}.toml")
    with open(path, "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\n{text}')
        if log:
            f.write(f'[[logs]]\nname = "app"\npath = "{log}"\nstart_at = "beginning"\n')
    return path


def summary_counts(ctx, cmd):
    """`classify --summary`'s rows (namespace, op, outcome, count), sorted."""
    rows = [tuple(l.split("\t")) for l in ctx.run(cmd).splitlines()[1:] if l.strip()]
    if any(len(r) != 4 for r in rows):
        ctx.fail(f"unexpected classify --summary output: {rows}")
    return sorted(rows)


def mtail_counts(ctx, cmd):
    out, rows = ctx.run(cmd), []
    for line in out.splitlines():
        if line.startswith("lockwatch_lock_events_total{"):
            labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.index("}")].split(","))
            rows.append(tuple(labels[k].strip('"') for k in ("namespace", "op", "outcome"))
                        + (str(int(float(line.rsplit(None, 1)[1]))),))
    return sorted(rows)


def serve_time(ctx, binary, log, cfg, lines, name):
    """`binary serve` pinned to core 1, tailing `log` from its start, /metrics polled every
    20 ms. Its intake rate is timed from the first poll that shows lines counted to the poll
    that shows every line but the last record (which waits for 1 s of quiet: multiline =
    "auto"): (lines counted in between) ÷ (time in between), start-up excluded whenever the
    port answers. Also the seconds from the port answering to every line but the last record
    and to every line, and both from the process's start. Returns a dict."""
    port = common.free_port()
    spawned = time.monotonic()
    p = probe.serve(ctx, binary, serve_config(ctx, cfg, port, log), port, name, pin=1, level="error")
    t0, t_read, n, first = time.monotonic(), None, 0, None
    for _ in range(3000):
        n = probe.total(probe.get(port), "lockwatch_log_lines_total{")
        now = time.monotonic()
        if first is None and n > 0:
            first = (now, n)
        if t_read is None and n >= lines - 2:
            t_read, n_read = now, n
        if n >= lines:
            break
        time.sleep(0.02)
    t_all = time.monotonic()
    ctx.stop(p)
    if n < lines:
        ctx.fail(f"{binary} serve counted only {n:.0f} of {lines} lines")
    span = t_read - first[0]
    rate = (n_read - first[1]) / span if span > 0 else None
    if rate is None or n_read - first[1] < lines / 2:
        ctx.fail(f"{binary} serve had counted {first[1]:.0f} of {lines} lines at the first poll that showed any: "
                 "too few polls to time its intake (a larger file is needed)")
    return {"read_s": t_read - t0, "all_s": t_all - t0, "read_from_start_s": t_read - spawned,
            "all_from_start_s": t_all - spawned, "rate_lines_per_s": rate, "rate_span_s": span,
            "first_counted": first[1]}


def run(ctx):
    lines = ctx.size(5_000_000, 200_000)
    mtail = common.require("mtail", "mtail")
    ctx.criterion("classify")
    crit = {name: 10_000 / ctx.criterion_mean_s("classify", name)
            for name in ("mix_1pct_events", "ordinary_only", "events_only")}
    log, cfg = generated_log(ctx, lines)
    progs = ctx.path("mtail")
    os.makedirs(progs, exist_ok=True)
    shutil.copy(os.path.join(ctx.root, "bench/locks.mtail"), progs)
    base = ctx.base_bin(ctx.base_rev)
    pin = ["taskset", "-c", "1"]
    lw = pin + [ctx.new_bin, "classify", "--summary", "-c", cfg, log]
    lwb = pin + [base, "classify", "--summary", "-c", cfg, log]
    mt = pin + [mtail, "--one_shot", "--one_shot_format", "prometheus", "--progs", progs, "--logs", log,
                "--logtostderr", "--address", "127.0.0.1", "--port", str(common.free_port())]
    # All three must count the same events before their speed means anything.
    ours, theirs, based = summary_counts(ctx, lw), mtail_counts(ctx, mt), summary_counts(ctx, lwb)
    if not ours or ours != theirs:
        ctx.fail(f"lockwatch and mtail disagree:\n{ours}\n---\n{theirs}")
    if based != ours:
        ctx.fail(f"the base ({ctx.base_rev}) counts other events than this build:\n{based}\n---\n{ours}")
    t = ctx.hyperfine([("base", shlex.join(lwb)), ("lockwatch", shlex.join(lw)), ("mtail", shlex.join(mt))],
                      warmup=ctx.size(1, 0), runs=ctx.size(5, 2))
    based_serve = [serve_time(ctx, base, log, cfg, lines, "serve-base") for _ in range(ctx.size(3, 1))]
    new_serve = [serve_time(ctx, ctx.new_bin, log, cfg, lines, "serve-new") for _ in range(ctx.size(3, 1))]
    bs, ns = max(based_serve, key=lambda r: r["rate_lines_per_s"]), max(new_serve, key=lambda r: r["rate_lines_per_s"])
    b_read, b_all, b_read0, b_all0 = bs["read_s"], bs["all_s"], bs["read_from_start_s"], bs["all_from_start_s"]
    read, every, read0, every0 = ns["read_s"], ns["all_s"], ns["read_from_start_s"], ns["all_from_start_s"]
    lw_s, lwb_s, mt_s = t["lockwatch"]["mean"], t["base"]["mean"], t["mtail"]["mean"]
    figures = {
        "lines": lines, "file_bytes": os.path.getsize(log), "events": sum(int(r[3]) for r in ours),
        "criterion_mix_1pct_events_lines_per_s": crit["mix_1pct_events"],
        "criterion_ordinary_only_lines_per_s": crit["ordinary_only"],
        "criterion_events_only_lines_per_s": crit["events_only"],
        "classify_s": lw_s, "classify_min_s": t["lockwatch"]["min"], "classify_lines_per_s": lines / lw_s,
        "base_classify_s": lwb_s, "base_classify_min_s": t["base"]["min"], "base_classify_lines_per_s": lines / lwb_s,
        "mtail_s": mt_s, "mtail_min_s": t["mtail"]["min"], "mtail_lines_per_s": lines / mt_s,
        "serve_read_s": read, "serve_read_lines_per_s": lines / read, "serve_all_s": every,
        "serve_all_lines_per_s": lines / every,
        "serve_read_from_start_s": read0, "serve_all_from_start_s": every0,
        "base_serve_read_from_start_s": b_read0, "base_serve_all_from_start_s": b_all0,
        "base_serve_read_s": b_read, "base_serve_read_lines_per_s": lines / b_read, "base_serve_all_s": b_all,
        "hyperfine_runs": ctx.size(5, 2),
        "serve_rate_lines_per_s": ns["rate_lines_per_s"], "base_serve_rate_lines_per_s": bs["rate_lines_per_s"],
        "serve_rate_span_s": ns["rate_span_s"], "base_serve_rate_span_s": bs["rate_span_s"],
        "serve_runs": len(new_serve),
    }
    ratios = {"mtail_over_classify_time": mt_s / lw_s, "classify_speed_new_over_base": lwb_s / lw_s,
              "serve_read_speed_new_over_base": b_read / read,
              "serve_rate_new_over_base": ns["rate_lines_per_s"] / bs["rate_lines_per_s"], "serve_all_time_new_over_base": every / b_all}
    return {"figures": figures, "ratios": ratios}
