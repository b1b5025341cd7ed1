"""shippers: OTLP/HTTP intake on one core: 2,000,000 records of the generated log, one line
each, as protobuf batches of 512 POSTed to /v1/logs (examples/otlp_load.rs, 4 requests in
flight, pinned to core 0) against `lockwatch serve` tailing the same lines from a file, in
the same run, `lockwatch serve` pinned to core 1 either way; records/s, lines/s, their ratio.
"""
import os
import time

import common
import intake
import probe


def run(ctx):
    lines = ctx.size(2_000_000, 100_000)
    ctx.build_new("--example", "gen_log", "--example", "otlp_load")
    log, cfg = intake.generated_log(ctx, lines)
    port = common.free_port()
    # The file, tailed: every line but the last record (which waits for 1 s of quiet).
    p = probe.serve(ctx, ctx.new_bin, intake.serve_config(ctx, cfg, port, log), port, "serve-tail",
                    pin=1, level="error")
    t0, tail_s, n = time.monotonic(), None, 0
    for _ in range(3000):
        n = probe.total(probe.get(port), "lockwatch_log_lines_total{")
        if n >= lines - 2:
            tail_s = time.monotonic() - t0
            break
        time.sleep(0.02)
    ctx.stop(p)
    if tail_s is None:
        ctx.fail(f"lockwatch serve counted only {n:.0f} of {lines} lines")
    # The same lines as OTLP records (otlp_load waits until /metrics counts every one).
    p = probe.serve(ctx, ctx.new_bin, intake.serve_config(ctx, cfg, port), port, "serve-otlp", pin=1, level="error")
    out = ctx.run(["taskset", "-c", "0", os.path.join(ctx.root, "target/release/examples/otlp_load"),
                   f"127.0.0.1:{port}", log, str(lines), "512", "4"])
    ctx.stop(p)
    try:
        otlp_s = float(out.strip())
    except ValueError:
        ctx.fail(f"otlp_load printed {out!r}, not seconds")
    figures = {"lines": lines, "otlp_s": otlp_s, "otlp_records_per_s": lines / otlp_s,
               "tail_s": tail_s, "tail_lines_per_s": lines / tail_s, "batch_records": 512, "in_flight": 4}
    return {"figures": figures, "ratios": {"otlp_records_per_s_over_tail_lines_per_s": tail_s / otlp_s}}
