"""`make bench`: `python3 scripts/bench [--quick] [--no-build] [SECTION…]` measures the sections
(all of them by default, in the order below), writes each one's results to
bench-results/SECTION.json as it ends, then bench-results/summary.md. The first failure stops
the run with its reason and exit status 1. `python3 scripts/bench render …` puts results
into the docs (render.py).
"""
import argparse
import importlib
import json
import os
import shutil
import sys

import common
import render


def parse(argv):
    ap = argparse.ArgumentParser(prog="python3 scripts/bench", description=__doc__.split("\n\n")[0],
                                 epilog="python3 scripts/bench render --help: the renderer")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run of the harness: every size (keys, lines, locks, runs, criterion's "
                         "times) shrunk; the results say \"quick\": true and are never rendered into the docs")
    ap.add_argument("--no-build", action="store_true",
                    help="measure target/release/lockwatch (and its examples) as they are, without "
                         "`cargo build --release` first")
    ap.add_argument("sections", nargs="*", metavar="SECTION",
                    help="any of: " + " ".join(render.SECTIONS) + " (default: all)")
    args = ap.parse_args(argv)
    unknown = [s for s in args.sections if s not in render.SECTIONS]
    if unknown:
        ap.error(f"unknown section {' '.join(unknown)}: use {', '.join(render.SECTIONS)}")
    return args


def measure(ctx, section, build, out):
    """Runs one section and writes its results file."""
    ctx.section, ctx.used_base = section, None
    started, machine = common.now(), common.machine()
    common.say(f"{section}: measuring{' (quick)' if ctx.quick else ''}…")
    try:
        result = importlib.import_module(section).run(ctx)
    finally:
        ctx.stop_all()
    base = None
    if ctx.used_base:
        base = common.base_info(ctx.used_base, ctx.base_bin(ctx.used_base))
    doc = {"section": section, "quick": ctx.quick, "build": build, "base": base, "machine": machine,
           "started": started, "finished": common.now(), **result}
    render.check_result(doc)
    path = os.path.join(out, f"{section}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    common.say(f"{section}: {path}")


def main(argv):
    if sys.version_info < (3, 11):
        print("bench: needs Python 3.11 or later", file=sys.stderr)
        return 2
    if argv[:1] == ["render"]:
        return render.main(argv[1:])
    args = parse(argv)
    out = os.path.join(common.ROOT, "bench-results")
    os.makedirs(out, exist_ok=True)
    ctx = common.Context(quick=args.quick, build=not args.no_build)
    try:
        ctx.section = "build"
        ctx.build_new()
        build = common.build_info(ctx)
        for section in args.sections or render.SECTIONS:
            measure(ctx, section, build, out)
    except common.BenchError as e:
        where = "" if str(e).startswith(f"{ctx.section}: ") else f"{ctx.section}: "
        print(f"bench: FAILED: {where}{e}", file=sys.stderr)
        return 1
    finally:
        ctx.stop_all()
        shutil.rmtree(ctx.work, ignore_errors=True)
    try:
        render.write_summary(out)
    except render.RenderError as e:
        print(f"bench: FAILED: summary.md: {e}", file=sys.stderr)
        return 1
    common.say(f"{os.path.join(out, 'summary.md')} written; `python3 scripts/bench render` puts the "
               "results into the docs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
