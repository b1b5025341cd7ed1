"""The markdown of each section's results, for render.py: `render(section, result)` gives its
named blocks (tables, in the shapes the docs hold them) and inline cells (one figure and
its words, for a table row the docs write themselves); `section_markdown` the whole section
as bench-results/summary.md shows it. The sections from intake on are in tables_more.py.
"""
from md import Rendered, base_name, mib, n0, short, table, times
from tables_more import RENDER_MORE


def section_markdown(section, r):
    out = RENDER[section](r)
    b, build = r.get("base"), r["build"]
    m = r["machine"]
    binary = build.get("binary", "")
    other = f"; binary: {binary}" if binary and build["commit"][:7] not in binary else ""
    run = (f"*{r['started']}, this build {build['commit'][:7]}{' (dirty tree)' if build['dirty'] else ''}{other}"
           + (f", base {b['revision']} ({b['commit'][:7]})" if b else "")
           + f"; {m.get('cpu')}, {m.get('cores')} cores, load {m.get('load_1m_at_start', 0):.2f} at the start"
           + ("; **quick run: sizes shrunk, not figures to quote**" if r["quick"] else "") + "*")
    parts = [f"### {out.title}", run] + ([out.intro] if out.intro else []) + list(out.blocks.values())
    return "\n\n".join(parts) + "\n"


def render(section, r):
    return RENDER[section](r)


def _sampler(r):
    f, q, base = r["figures"], r["ratios"], base_name(r)
    s, l = f["keys_small"], f["keys_large"]
    first = table(["measurement", "value"], ["---", "---"], [
        [f"lockwatch pass, {n0(s)} keys (criterion mean)", f"{f['pass_small_s'] * 1000:.0f} ms, {n0(s / f['pass_small_s'])} keys/s"],
        [f"lockwatch pass, {n0(l)} keys (criterion mean)", f"{f['pass_large_s']:.2f} s, {n0(l / f['pass_large_s'])} keys/s"],
        [f"lockwatch serve, peak RSS with 0 / {short(s)} / {short(l)} locks",
         f"{mib(f['rss_empty_kib'])} / {mib(f['rss_small_kib'])} / {mib(f['rss_large_kib'])} MiB"],
        [f"exporter memory per tracked lock ({short(s)} / {short(l)})",
         f"{f['bytes_per_lock_small']:.0f} / {f['bytes_per_lock_large']:.0f} bytes"],
        [f"pass duration reported by serve ({short(s)} / {short(l)})",
         f"{f['serve_pass_small_s']:.3f} s / {f['serve_pass_large_s']:.3f} s"],
        [f"prometheus-redis-exporter --check-keys scrape, {n0(s)} keys (hyperfine mean)",
         f"{f['peer_scrape_s']:.2f} s ({n0(f['peer_keys_exported'])} keys exported)"],
        [f"ratio, peer scrape ÷ lockwatch pass on the same {n0(s)} keys", f"{q['peer_over_pass_small']:.1f}×"],
        [f"SCAN-only walk, same pages (`SCAN MATCH … COUNT 1000`, nothing read), {n0(s)} / {n0(l)} keys (criterion mean)",
         f"{f['scan_small_s'] * 1000:.0f} ms / {f['scan_large_s']:.2f} s"],
        [f"pass ÷ SCAN-only walk (criterion, {n0(s)} / {n0(l)} keys)",
         f"{q['pass_over_scan_small']:.2f}× / {q['pass_over_scan_large']:.2f}×"],
        [f"pass reported by serve ÷ SCAN-only walk, {n0(l)} keys", f"{q['serve_pass_over_scan_large']:.2f}×"]])
    side = table([f"side by side, scan mode, {n0(l)} keys", f"base ({base})", "this build", "this ÷ base"],
                 ["---", "---:", "---:", "---:"], [
        ["pass duration reported by serve", f"{f['base_serve_pass_large_s']:.3f} s", f"{f['serve_pass_large_s']:.3f} s",
         times(f["serve_pass_large_s"], f["base_serve_pass_large_s"])],
        ["the same ÷ the SCAN-only walk", f"{q['base_serve_pass_over_scan_large']:.2f}×",
         f"{q['serve_pass_over_scan_large']:.2f}×", ""],
        ["memory per tracked lock (peak RSS)", f"{f['base_bytes_per_lock_large']:.0f} B", f"{f['bytes_per_lock_large']:.0f} B",
         times(f["bytes_per_lock_large"], f["base_bytes_per_lock_large"])]])
    return Rendered("Sampler", blocks={"table": first, "side": side})


def _memory(r):
    f, base = r["figures"], base_name(r)
    cell = lambda k, who: (f"{f[f'{k}_{who}bytes_per_lock']:.0f} B ({mib(f[f'{k}_{who}rss_before_kib'])} → "
                           f"{mib(f[f'{k}_{who}rss_after_kib'])} MiB)")
    rows = [[k, cell(k, "base_"), cell(k, ""), times(f[f"{k}_bytes_per_lock"], f[f"{k}_base_bytes_per_lock"])]
            for k in ("cold", "warm")]
    return Rendered(f"Memory per tracked lock, events mode, {n0(f['locks'])} locks (scripts/memory.sh)",
                    blocks={"table": table(["", f"base ({base})", "this build", "this ÷ base"],
                                           ["---", "---:", "---:", "---:"], rows)})


def _lifecycle_build(title, steps, memory):
    rows = [[f"{s['target_per_s']:.0f}", f"{s['caused_per_s']:.0f}", f"{s['counted_per_s']:.0f}", f"{s['max_lag']:.0f}",
             f"{s['lag_at_end']:.0f}", "never (lost)" if s["drained_ms"] is None else f"{s['drained_ms']} ms",
             f"{s['lockwatch_cores']:.2f}", f"{s['redis_cores']:.2f}", "yes" if s["subscribed"] else "NO"] for s in steps]
    t = table(["target transitions/s", "caused/s", "counted/s (during)", "max lag", "lag at end", "drained after",
               "lockwatch CPU (cores)", "redis CPU (cores)", "subscribed throughout"],
              ["---:"] * 8 + [":---:"], rows)
    mem = (f"memory: {memory['locks']} locks held at once: exporter RSS {memory['rss_before_kib']} KiB → "
           f"{memory['rss_after_kib']} KiB, {memory['bytes_per_lock']} bytes per tracked lock (keys of 23 bytes; "
           "includes the capped history)")
    return f"**{title}**\n\n{t}\n\n{mem}"


def _lifecycle(r):
    f, base = r["figures"], base_name(r)
    rows = []
    for b, n in zip(f["base_steps"], f["new_steps"]):
        for key, label in (("counted_per_s", "counted/s"), ("lockwatch_cores", "lockwatch CPU (cores)"),
                           ("redis_cores", "redis CPU (cores)")):
            fmt = "{:.0f}" if key == "counted_per_s" else "{:.2f}"
            rows.append([f"{n['target_per_s']:.0f}/s: {label}", fmt.format(b[key]), fmt.format(n[key]), times(n[key], b[key])])
    for kind, how in (("warm", "held after the load steps (warm)"), ("cold", "announced into a fresh exporter (cold)")):
        b, n = f[f"base_{kind}_memory"], f[f"new_{kind}_memory"]
        rows.append([f"memory per tracked lock, {n['locks']} {how}", f"{b['bytes_per_lock']} B", f"{n['bytes_per_lock']} B",
                     times(n["bytes_per_lock"], b["bytes_per_lock"])])
    side = table(["measurement", f"base ({base})", "this build", "this ÷ base"], ["---", "---:", "---:", "---:"], rows)
    return Rendered("Lifecycle watcher", f"`benches/lifecycle_load.rs` of this tree, run with the base's binary "
                    f"({base}) and this build's in turn.",
                    {"base": _lifecycle_build(base, f["base_steps"], f["base_warm_memory"]),
                     "new": _lifecycle_build("This build", f["new_steps"], f["new_warm_memory"]), "side": side})


def _burst(r):
    runs, base = r["figures"]["runs"], base_name(r)
    exact = {True: "yes", False: "no", None: "n/a"}
    rows = []
    for i, run in enumerate(runs, 1):
        for name, v in ((base, run["base"]), ("this build", run["new"])):
            rows.append([i, name, f"{v['lockwatch_cpu_s']:.2f} s", f"{v['redis_cpu_s']:.2f} s",
                         times(v["lockwatch_cpu_s"], v["redis_cpu_s"]),
                         f"{v['lockwatch_reads_usec'] / 1e6:.3f} s ÷ {v['burst_cmds_usec'] / 1e6:.3f} s = "
                         f"{100 * (v['reads_share'] or 0):.1f} %", n0(v["transitions"]), n0(v["notifications"]),
                         exact[v["exact"]]])
    t = table(["run", "build", "lockwatch CPU", "Redis CPU", "lockwatch ÷ Redis",
               "Redis usec of lockwatch's commands ÷ the burst's", "transitions counted", "notifications", "counts exact"],
              ["---", "---"] + ["---:"] * 6 + ["---"], rows)
    b, n = runs[0]["base"], runs[0]["new"]
    side = table(["side by side (run 1)", base, "this build", "this ÷ base"], ["---", "---:", "---:", "---:"], [
        ["lockwatch CPU (s)", f"{b['lockwatch_cpu_s']:.2f}", f"{n['lockwatch_cpu_s']:.2f}", times(n["lockwatch_cpu_s"], b["lockwatch_cpu_s"])],
        ["Redis CPU (s)", f"{b['redis_cpu_s']:.2f}", f"{n['redis_cpu_s']:.2f}", times(n["redis_cpu_s"], b["redis_cpu_s"])],
        ["lockwatch ÷ Redis", times(b["lockwatch_cpu_s"], b["redis_cpu_s"]), times(n["lockwatch_cpu_s"], n["redis_cpu_s"]), ""],
        ["Redis usec of lockwatch's commands ÷ the burst's", f"{100 * (b['reads_share'] or 0):.1f} %",
         f"{100 * (n['reads_share'] or 0):.1f} %", ""],
        ["the burst's duration (s)", f"{b['burst_s']:.1f}", f"{n['burst_s']:.1f}", ""]])
    intro = ("Locks loaded and flushed, then `redis-benchmark -P 16 -c 20` of `SET key tok PX 30000`, `PEXPIRE key 30000` "
             "and `DEL key` on the lock keys, one after the other; CPU seconds (`/proc/PID/stat`) from the burst's start "
             "until lockwatch's counters settle. Redis time of lockwatch's commands: `INFO commandstats` usec of every "
             "command the burst does not send, against the usec of the burst's SET, PEXPIRE and DEL.")
    return Rendered("The watcher under a burst (scripts/burst.sh)", intro, {"runs": t, "side": side})


RENDER = {"sampler": _sampler, "memory": _memory, "lifecycle": _lifecycle, "burst": _burst, **RENDER_MORE}
