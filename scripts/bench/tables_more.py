"""The markdown of the sections from intake on (see tables.py): intake, classify, shippers,
tracking, api, targets, exposition and stall.
"""
from md import Rendered, base_name, mib, n0, num, table, times


def _intake(r):
    f, q, base = r["figures"], r["ratios"], base_name(r)
    lines, runs = f["lines"], f["hyperfine_runs"]
    first = table(["measurement", "value"], ["---", "---"], [
        ["classification alone, criterion, 1% events / ordinary only / events only",
         f"{n0(f['criterion_mix_1pct_events_lines_per_s'])} / {n0(f['criterion_ordinary_only_lines_per_s'])} / "
         f"{n0(f['criterion_events_only_lines_per_s'])} lines/s"],
        [f"lockwatch classify --summary (hyperfine mean of {runs})", f"{f['classify_s']:.2f} s, {n0(f['classify_lines_per_s'])} lines/s"],
        [f"mtail --one_shot, equivalent program (hyperfine mean of {runs})", f"{f['mtail_s']:.2f} s, {n0(f['mtail_lines_per_s'])} lines/s"],
        ["ratio, mtail time ÷ lockwatch time", f"{q['mtail_over_classify_time']:.1f}×"],
        ["lockwatch serve tailing the file from its start, from the first line to the last counted (start-up "
         "excluded: timed from when its port answers), until /metrics counts every line but the last record",
         f"{f['serve_read_s']:.2f} s, {n0(f['serve_read_lines_per_s'])} lines/s"],
        ["the same, until every line (the last record waits for 1 s of quiet)",
         f"{f['serve_all_s']:.2f} s, {n0(f['serve_all_lines_per_s'])} lines/s"],
        ["the same two from the process's start (start-up included)",
         f"{f['serve_read_from_start_s']:.2f} s / {f['serve_all_from_start_s']:.2f} s"],
        [f"serve's intake rate: lines counted from the first poll that shows any to every line but the last record, "
         f"÷ the time between (best of {f['serve_runs']} runs)",
         f"{n0(f['serve_rate_lines_per_s'])} lines/s over {f['serve_rate_span_s']:.2f} s"]])
    side = table(["side by side", base, "this build", "this ÷ base"], ["---", "---:", "---:", "---:"], [
        ["classify --summary, lines/s", n0(f["base_classify_lines_per_s"]), n0(f["classify_lines_per_s"]),
         f"{q['classify_speed_new_over_base']:.2f}× the speed"],
        ["serve, to every line but the last record, lines/s", n0(f["base_serve_read_lines_per_s"]),
         n0(f["serve_read_lines_per_s"]), f"{q['serve_read_speed_new_over_base']:.2f}× the speed"],
        ["serve, to every line", f"{f['base_serve_all_s']:.2f} s", f"{f['serve_all_s']:.2f} s",
         f"{q['serve_all_time_new_over_base']:.2f}×"],
        ["serve's intake rate (first line counted to the last), lines/s", n0(f["base_serve_rate_lines_per_s"]),
         n0(f["serve_rate_lines_per_s"]), f"**{q['serve_rate_new_over_base']:.2f}×** the speed"]])
    intro = (f"Generated log: {n0(lines)} lines, {f['file_bytes'] // 1_000_000} MB, 1% lock events in JSON, logfmt and "
             "text; every tool pinned to one core (taskset -c 1) and counting the same events.")
    return Rendered("Event intake", intro, {"table": first, "side": side})


def _classify(r):
    f, q, base = r["figures"], r["ratios"], base_name(r)
    runs = f["hyperfine_runs"]
    rows = []
    for name, label in (("ripgrep", "ripgrep, `rg -c -i lock` (the floor)"),
                        ("ripgrep_read", "the same, `--no-mmap` (read(), as lockwatch reads)"),
                        ("wc", "`wc -l` (read() and count every line)"),
                        ("lockwatch", "`lockwatch classify --summary`, this build"),
                        ("base", f"the same, {base}")):
        rows.append([label, f"{f[name + '_min_s']:.3f} s ({f[name + '_mean_s']:.3f} s)", f"{f[name + '_gb_per_s']:.2f}",
                     n0(f[name + "_lines_per_s"]), times(f[name + "_min_s"], f["ripgrep_min_s"])])
    t = table([f"one core, best of {runs} (mean)", "time", "GB/s", "lines/s", "÷ ripgrep's time"],
              ["---", "---:", "---:", "---:", "---:"], rows)
    after = (f"{base} takes {q['base_over_lockwatch']:.2f}× this build's time (best of {runs}; "
             f"{q['base_over_lockwatch_mean']:.2f}× by the means).")
    cells = {"readme-this": f"{f['lockwatch_lines_per_s'] / 1e6:.1f} M lines/s, {q['lockwatch_over_ripgrep']:.2f}× ripgrep's time",
             "readme-base": f"{f['base_lines_per_s'] / 1e6:.1f} M lines/s, {q['base_over_ripgrep']:.2f}×"}
    intro = (f"{n0(f['lines'])} generated lines ({f['file_bytes'] // 1_000_000} MB, the intake section's file and "
             "config), page cache warm, `taskset -c 1`; both builds print the same summary.")
    return Rendered("Classification against the floor (ripgrep)", intro, {"table": f"{t}\n\n{after}"}, cells)


def _shippers(r):
    f, lines = r["figures"], r["figures"]["lines"]
    t = table(["measurement", "value"], ["---", "---"], [
        [f"POST /v1/logs, protobuf batches of {f['batch_records']} records, {f['in_flight']} in flight, until /metrics "
         "counts every record", f"{f['otlp_s']:.2f} s, {n0(f['otlp_records_per_s'])} records/s"],
        ["the file tailed from its start, until /metrics counts every line but the last record",
         f"{f['tail_s']:.2f} s, {n0(f['tail_lines_per_s'])} lines/s"],
        ["ratio, OTLP records/s ÷ tailed lines/s", f"{r['ratios']['otlp_records_per_s_over_tail_lines_per_s']:.2f}"]])
    intro = (f"The same {n0(lines)} generated lines (1% lock events, JSON, logfmt and text), `lockwatch serve` pinned "
             "to one core (taskset -c 1) both times.")
    return Rendered("OTLP intake against the file tailer", intro, {"table": t})


def _tracking(r):
    f, base = r["figures"], base_name(r)
    rows = []
    for mode in ("auto", "off"):
        flagged = f[f"{mode}_stall_flagged_ms"]
        rows.append([mode, "events" if f[f"{mode}_events_mode"] else "scan", f"{f[mode + '_redis_cpu_added_pct']:.2f} % of a core",
                     f"{f[mode + '_lockwatch_cpu_pct']:.2f} % of a core", "never" if flagged is None else flagged,
                     num(f[f"{mode}_passes_cut"])])
    t = table(["mode (notifications)", "mode reported", "Redis CPU added by lockwatch", "lockwatch CPU",
               "stalled holder flagged, ms after the mark", "passes cut by the budget"], ["---"] * 6, rows)
    notes = (f"Memory per tracked lock in events mode: {f['bytes_per_lock']:.0f} B (peak RSS {mib(f['rss_locks_kib'])} MiB "
             f"with {n0(f['memory_locks'])} locks, {mib(f['rss_empty_kib'])} MiB with none); the base ({base}) on the same "
             f"keys: {f['base_bytes_per_lock']:.0f} B, this ÷ base {times(f['bytes_per_lock'], f['base_bytes_per_lock'])}.\n"
             f"prometheus-redis-exporter --check-keys 'lock:job:*' on the same database: {f['peer_scrape_s']:.2f} s per "
             f"scrape (hyperfine mean of {f['peer_scrapes']}), {f['peer_redis_cpu_per_scrape_s']:.2f} s of Redis CPU per scrape.")
    intro = (f"{n0(f['cache_keys'])} cache keys (~2,000 writes/s) and {n0(f['lock_keys'])} lock keys (~200 renew/release/"
             f"acquire ops/s) in one database; Redis CPU measured over {f['window_s']} s windows as `used_cpu_user + "
             f"used_cpu_sys`; workload alone: {f['workload_redis_cpu_pct']:.2f} % of a core.")
    return Rendered("Tracking: events mode against scan mode on a shared keyspace", intro, {"table": t, "notes": notes})


def _api(r):
    f, base = r["figures"], base_name(r)
    t = table(["measurement", f"base ({base})", "this build"], ["---"] * 3, [
        ["median of 11 sequential requests", f"{f['base_median_ms']:.1f} ms", f"{f['median_ms']:.1f} ms"],
        ["RSS before the concurrent requests", f"{f['base_rss_before_kib'] / 1024:.1f} MiB", f"{f['rss_before_kib'] / 1024:.1f} MiB"],
        ["peak RSS added by 5 concurrent requests", f"{f['base_rss_growth_kib'] / 1024:.1f} MiB",
         f"{f['rss_growth_kib'] / 1024:.1f} MiB"]])
    intro = (f"`GET /api/v1/locks?namespace=bench&limit=10`, one exporter in scan mode tracking {n0(f['locks'])} locks, "
             f"for the base ({base}) and this build.")
    return Rendered(f"Lock listing at {n0(f['locks'])} tracked locks", intro, {"table": t})


def _targets(r):
    f, n = r["figures"], r["figures"]["targets"]
    t = table(["measurement", "1 target", f"{n} targets", "per target"], ["---"] * 4, [
        ["RSS of lockwatch (steady, after a few passes)", f"{mib(f['rss_kib_one'])} MiB", f"{mib(f['rss_kib_many'])} MiB",
         f"{f['rss_per_target_kib']:.0f} KiB"],
        ["Redis connections (`CLIENT LIST` on each server)", num(f["redis_connections_one"]),
         num(f["redis_connections_many"]), num(f["redis_connections_per_target"])],
        ["`/metrics` size", f"{n0(f['metrics_bytes_one'])} bytes", f"{n0(f['metrics_bytes_many'])} bytes",
         f"{n0(f['metrics_bytes_per_target'])} bytes"],
        ["`/metrics` scrape time (median of 21, curl on loopback)", f"{f['scrape_ms_one']:.1f} ms", f"{f['scrape_ms_many']:.1f} ms",
         f"{(f['scrape_ms_many'] - f['scrape_ms_one']) / (n - 1):.1f} ms"],
        ["slowest target's last pass (30 locks)", f"{f['slowest_pass_s_one'] * 1000:.1f} ms",
         f"{f['slowest_pass_s_many'] * 1000:.1f} ms", ""]])
    intro = (f"One `lockwatch serve` watching 1 and {n} local redis-servers, 3 namespaces each (10 locks per namespace), "
             "keyspace notifications on (events mode), `sample_interval = \"5s\"`.")
    return Rendered("Many targets", intro, {"table": t})


def _exposition(r):
    f, q = r["figures"], r["ratios"]
    us = lambda x: f"{x:,.0f} µs"
    crit = table(["", "0.0.4 text", "OpenMetrics", "÷ 0.0.4", f"OpenMetrics, {f['exemplars']} exemplars", "÷ 0.0.4"],
                 ["---"] + ["---:"] * 5, [
        [kind, us(f[f"{kind}_text_us"]), us(f[f"{kind}_openmetrics_us"]), times(f[f"{kind}_openmetrics_us"], f[f"{kind}_text_us"]),
         us(f[f"{kind}_openmetrics_exemplars_us"]), f"{q[f'{kind}_openmetrics_exemplars_over_text']:.2f}×"]
        for kind in ("encoder", "scrape")])
    rows = []
    for kind in ("encoder", "scrape"):
        a, b = f[f"paired_{kind}"], f[f"paired_{kind}_exemplars"]
        for stat, word in (("min", "minimum"), ("median", "median")):
            own = b[f"text_{stat}_us"]
            ex = us(b[f"openmetrics_{stat}_us"]) + ("" if own == a[f"text_{stat}_us"] else f" (0.0.4: {us(own)})")
            rows.append([f"{kind}, {word}", us(a[f"text_{stat}_us"]), us(a[f"openmetrics_{stat}_us"]),
                         times(a[f"openmetrics_{stat}_us"], a[f"text_{stat}_us"]), ex, times(b[f"openmetrics_{stat}_us"], own)])
    turns = table([f"taking turns, {n0(f['paired_encoder']['rounds'])} (encoder) or {n0(f['paired_scrape']['rounds'])} "
                   "(scrape) rounds", "0.0.4 (`prometheus::TextEncoder`)", "OpenMetrics", "÷ 0.0.4",
                   f"OpenMetrics, {f['exemplars']} exemplars", "÷ 0.0.4"], ["---"] + ["---:"] * 5, rows)
    intro = (f"The demo's shape ({f['families']} families, {n0(f['samples'])} samples; {n0(f['text_bytes'])} bytes in "
             f"0.0.4, {n0(f['openmetrics_bytes'])} in OpenMetrics, {n0(f['openmetrics_exemplars_bytes'])} with "
             f"{f['exemplars']} exemplars) served in-process (`benches/exposition.rs`). *Encoder*: the encoder alone on the "
             "same gathered families; *scrape*: what a request runs (before-scrape hooks, gather, encode). First "
             "criterion's means, then the same pairs taking turns in one loop (on a shared machine the minimum is the "
             "cost without interference).")
    return Rendered("/metrics encoding", intro, {"criterion": crit, "turns": turns})


def _stall(r):
    f, base = r["figures"], base_name(r)
    rows = []
    for mode in ("events", "scan"):
        for build, name in (("base", f"base ({base})"), ("new", "this build")):
            v = f[f"{mode}_{build}"]
            lead = "never (expired unflagged)" if v["lead_s"] is None else f"{v['lead_s']:.1f} s"
            after = "—" if v["flagged_after_stop_s"] is None else f"{v['flagged_after_stop_s']:.1f} s"
            rows.append([mode, name, lead, after, f"{v['pttl_at_stop_s']:.1f} s",
                         f"{v['passes_after_stop']} ({v['passes_cut']})"])
    t = table(["mode", "build", "lead time (TTL left when flagged)", "flagged after the stop", "TTL left at the stop",
               "sample passes after the stop (cut by sample_budget)"], ["---", "---"] + ["---:"] * 4, rows)
    ttl = f["ttl_s"]
    intro = (f"Namespace `workflow` (ttl {ttl}s, renew_every {ttl // 3}s: overdue below {ttl / 2:g} s left), sample_interval "
             f"5s, beside 2,000 locks of an hour (one released and taken again every 100 ms) and {n0(f['cache_keys'])} "
             "cache keys; the holder stopped by SIGSTOP after its second renewal. Lead time: the key's PTTL when "
             "`lockwatch_locks_renewal_overdue` first shows it (/metrics polled every 100 ms). Events mode: "
             "`notifications = \"require\"`; scan mode: `\"off\"`.")
    return Rendered("A stalled holder's lead time (scripts/stall.sh, issue 43)", intro, {"table": t})


RENDER_MORE = {"intake": _intake, "classify": _classify, "shippers": _shippers, "tracking": _tracking, "api": _api,
               "targets": _targets, "exposition": _exposition, "stall": _stall}
