#!/usr/bin/env python3
"""The server matrix's table, from what `scripts/compat.sh` left in target/compat/.

For each server and test file compat.sh leaves `<file>.log` (cargo test --show-output) and
`<file>.rc`, or `<file>.skipped` with the reason; `time` holds the server's seconds. This
prints the plain table (also target/compat/table.txt) and each failure's panic, and, when
the whole matrix ran (every server, every file), writes docs/compat-matrix.md, which
tests/docs.rs compares with the test files. Exit 1 when any test failed or did not finish.

    scripts/compat_matrix.py SERVERS FILES whole|part   (space-separated lists, as compat.sh ran them)
    scripts/compat_matrix.py --commit                  the commit tested, as the run starts
"""
import datetime
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "target" / "compat"
DOC = ROOT / "docs" / "compat-matrix.md"


def result(server, f):
    """(passed, failed, note, lines named by the tests) of one file on one server."""
    d = OUT / server
    skipped = d / f"{f}.skipped"
    if skipped.exists():
        return None, None, skipped.read_text().strip(), []
    try:
        log = (d / f"{f}.log").read_text(errors="replace")
        rc = int((d / f"{f}.rc").read_text().strip() or "1")
    except (OSError, ValueError):
        return 0, 1, f"tests/{f}.rs left no log or exit status in {d}: the run was cut short", []
    results = [l for l in log.splitlines() if l.startswith("test result:")]
    passed = sum(int(n) for l in results for n in re.findall(r"(\d+) passed", l))
    failed = sum(int(n) for l in results for n in re.findall(r"(\d+) failed", l))
    note = None
    if rc != 0 and failed == 0:
        failed = 1
        note = f"tests/{f}.rs did not run to its end (exit {rc}): see {d / (f + '.log')}"
    named = sorted({l.strip() for l in log.splitlines() if l.startswith(("compat-lacks:", "compat-exercised:"))})
    return passed, failed, note, named


def commit():
    def git(*a):
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rev = git("rev-parse", "--short", "HEAD") or "unknown"
    return rev + (" (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else "")


def main():
    if sys.argv[1:] == ["--commit"]:
        print(commit())
        return 0
    servers, files, whole = sys.argv[1].split(), sys.argv[2].split(), sys.argv[3] == "whole"
    res = {(s, f): result(s, f) for s in servers for f in files}
    cell = lambda r: "skipped" if r[0] is None else f"{r[0]}/{r[1]}"
    secs = {s: (OUT / s / "time").read_text().strip() if (OUT / s / "time").exists() else "?" for s in servers}
    totals = {s: (sum(res[s, f][0] or 0 for f in files), sum(res[s, f][1] or 0 for f in files)) for s in servers}
    rows = ["passed/failed".ljust(22) + "".join(f" {s:>14}" for s in servers)]
    rows += [f.ljust(22) + "".join(f" {cell(res[s, f]):>14}" for s in servers) for f in files]
    rows.append("total".ljust(22) + "".join(f" {'%d/%d' % totals[s]:>14}" for s in servers))
    rows.append("time".ljust(22) + "".join(f" {secs[s] + 's':>14}" for s in servers))
    notes = [f"{s}: {r[2]}" for (s, f), r in res.items() if r[2]]
    lacked = [f"{s}: {f}: lacks {l.split(':', 1)[1].strip()}" for (s, f), r in res.items() for l in r[3] if l.startswith("compat-lacks:")]
    text = "\n".join(rows + notes + lacked)
    text += "\nDebian's redis-server 7.0.15 is the server `make test` runs every test file on.\n"
    (OUT / "table.txt").write_text(text)
    print("\n" + text, end="")
    failed = False
    for (s, f), r in res.items():
        if r[0] is None or r[1] == 0:
            continue
        failed = True
        log = OUT / s / f"{f}.log"
        print(f"compat: failed on {s}, tests/{f}.rs ({log}):")
        lines = log.read_text(errors="replace").splitlines()
        for l in [l for l in lines if re.search(r"^test .* FAILED$|panicked at", l)][:20]:
            print("  " + l)
    if whole and not failed:
        write_doc(servers, files, res, totals, secs)
    return 1 if failed else 0


def write_doc(servers, files, res, totals, secs):
    today = datetime.date.today().isoformat()
    out = [
        "# The server matrix, as `make compat` last ran it",
        "",
        f"Written by `scripts/compat_matrix.py` at the end of a whole `make compat` run ({today}, commit",
        f"{(OUT / 'commit').read_text().strip()}); do not edit by hand. `tests/docs.rs` fails when a file's tests no longer add",
        "up to what this table counts: run `make compat` again and commit this file.",
        "Debian's redis-server 7.0.15 is the server `make test` runs every file on; it is not",
        "run again here. See [topologies](topologies.md#servers) for what differs between the builds.",
        "",
        "| test file | " + " | ".join(servers) + " |",
        "|---|" + "---:|" * len(servers),
    ]
    for f in files:
        out.append(f"| `{f}` | " + " | ".join(("skipped ¹" if res[s, f][0] is None else f"{res[s, f][0]} / {res[s, f][1]}") for s in servers) + " |")
    out.append("| **total passed / failed** | " + " | ".join("%d / %d" % totals[s] for s in servers) + " |")
    out.append("| time | " + " | ".join(f"{secs[s]} s" for s in servers) + " |")
    out += ["", "¹ " + "; ".join(sorted({r[2] for r in res.values() if r[0] is None})) if any(r[0] is None for r in res.values()) else "", ""]
    out += ["## What each build lacked and what ran", "",
            "Named by the tests themselves (`tests/common/compat.rs`): a branch that only asserts a",
            "server's refusal is listed as lacked, never counted as exercised.", ""]
    for s in servers:
        lacks = sorted({l.split(":", 1)[1].strip() for f in files for l in res[s, f][3] if l.startswith("compat-lacks:")})
        ran = sorted({l.split(":", 1)[1].strip() for f in files for l in res[s, f][3] if l.startswith("compat-exercised:")})
        out.append(f"- **{s}** lacks: " + ("; ".join(lacks) if lacks else "nothing the tests ask for") + ".")
        out.append(f"  Exercised: " + ("; ".join(ran) if ran else "—") + ".")
    DOC.write_text("\n".join(out) + "\n")
    print(f"compat: wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
