#!/usr/bin/env python3
"""scripts/burst_profile.py PERF_DATA: the breakdown of docs/performance.md from a profile
taken by `LOCKWATCH_BURST_PERF=FILE scripts/burst.sh BINARY`. Each sample goes to the first
category (in the order below) that a frame of its call chain names; allocation and the
copies and compares of libc are also counted apart, by the sample's own frame."""
import collections, re, subprocess, sys

CATEGORIES = [
    ("the redis crate's pub/sub path (its connection task: decode into values, Msg, channel)", r"redis::aio::pubsub|redis::connection::Msg"),
    ("the watcher's own subscription reader (task, frames)", r"lockwatch::access::pubsub"),
    ("owner and TTL reads: answers applied to the table and tracker", r"reads_done"),
    ("owner and TTL reads: pipelines built, sent, replies parsed (the redis crate)", r"redis::aio::multiplexed_connection|lockwatch::access::reader|lockwatch::access::read::|flush_reads|redis::aio::connection_manager|redis::pipeline|redis::cmd"),
    ("message to event (pattern, channel, payload copied)", r"Recorder::parse|intake::.*marker|canary::Canaries::seen"),
    ("history (per-key records)", r"lifecycle::history"),
    ("metrics (counters, histograms, scrapes)", r"prometheus|lockwatch::metrics|lockwatch::http"),
    ("lock table (events mode: announce, forget, reads queued; the expiry the tracker asks)", r"Recorder::table|Recorder::track|Observer>::expiry|locks::table|locks::events"),
    ("tracker (its state per key: transitions, holds, headroom)", r"lifecycle::tracker::"),
    ("sampler (passes, reconciling walk)", r"lockwatch::sampler"),
    ("rest of the watcher's loop (select, intake loop)", r"lifecycle::session|lifecycle::intake|lifecycle::Watcher"),
    ("tokio scheduling and I/O driver", r"tokio::runtime|tokio::io|mio::"),
]
ALLOC = r"^(_?mi_|mi_|__libc_malloc|malloc|free|realloc)"
COPY = r"^__mem(move|cpy|cmp|set)"

def main(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "ip,sym"], capture_output=True, text=True).stdout
    counts, alloc, copy, total = collections.Counter(), 0, 0, 0
    for sample in out.split("\n\n"):
        frames = [l.strip() for l in sample.strip().splitlines() if l.strip()]
        if not frames:
            continue
        total += 1
        syms = [f.split(" ", 1)[1] if " " in f else f for f in frames]
        leaf = syms[0]
        alloc += bool(re.search(ALLOC, leaf))
        copy += bool(re.search(COPY, leaf))
        for name, pat in CATEGORIES:
            if any(re.search(pat, s) for s in syms):
                counts[name] += 1
                break
        else:
            counts["other (kernel, unattributed)"] += 1
    print(f"| share of lockwatch's samples ({total} at 499 Hz) | % |")
    print("|---|---:|")
    for name, n in counts.most_common():
        print(f"| {name} | {100 * n / total:.1f} |")
    print(f"| *of all samples: in the allocator (mimalloc), by the sample's own frame* | *{100 * alloc / total:.1f}* |")
    print(f"| *of all samples: memmove / memcpy / memcmp* | *{100 * copy / total:.1f}* |")

main(sys.argv[1])
