"""The one renderer of `make bench`: results files (bench-results/SECTION.json) to markdown.
It writes bench-results/summary.md from every results file, and in the docs it rewrites only
what lies between `<!-- bench:SECTION:TABLE -->` and `<!-- /bench:SECTION:TABLE -->` (a block
on lines of its own, or inline within one line) of the sections that have a results file,
copying each file it used to docs/bench/SECTION.json. Results of a --quick run are refused
there. The tables themselves are tables.py's; the schema check is `check_result`.
"""
import argparse
import json
import math
import os
import re
import shutil
import sys

import tables

SECTIONS = ("sampler", "memory", "lifecycle", "burst", "intake", "classify", "shippers", "tracking", "api",
            "targets", "exposition", "stall")
DOCS = ("docs/performance.md", "README.md", "docs/operations.md")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TAG = re.compile(r"<!-- (/?)bench:([a-z]+):([a-z0-9-]+) -->")


class RenderError(Exception):
    pass


def _check_value(where, v):
    if isinstance(v, dict):
        for k, x in v.items():
            _check_value(f"{where}.{k}", x)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            _check_value(f"{where}[{i}]", x)
    elif v is not None and not isinstance(v, (bool, int, float)):
        raise RenderError(f"{where}: {v!r} is not a number (results hold raw numbers)")
    elif isinstance(v, float) and not math.isfinite(v):
        raise RenderError(f"{where}: {v} is not finite")


def check_result(doc):
    """Raises RenderError unless `doc` has the shape of a results file."""
    for key, kind in (("section", str), ("quick", bool), ("build", dict), ("machine", dict), ("started", str),
                      ("finished", str), ("figures", dict), ("ratios", dict)):
        if not isinstance(doc.get(key), kind):
            raise RenderError(f"results: `{key}` missing or not {kind.__name__}")
    if doc["section"] not in SECTIONS:
        raise RenderError(f"results: unknown section {doc['section']!r}")
    if not isinstance(doc["build"].get("commit"), str) or not isinstance(doc["build"].get("dirty"), bool):
        raise RenderError("results: build needs `commit` and `dirty`")
    base = doc.get("base", "missing")
    if base is not None and not (isinstance(base, dict) and {"revision", "commit"} <= base.keys()):
        raise RenderError("results: `base` must be null or hold `revision` and `commit`")
    _check_value("figures", doc["figures"])
    _check_value("ratios", doc["ratios"])


def load(results_dir, sections=SECTIONS):
    """section -> results of the sections that have a file in `results_dir`, each checked."""
    found = {}
    for s in sections:
        path = os.path.join(results_dir, f"{s}.json")
        if os.path.exists(path):
            with open(path) as f:
                doc = json.load(f)
            try:
                check_result(doc)
            except RenderError as e:
                raise RenderError(f"{path}: {e}") from None
            found[s] = doc
    return found


def replace(text, results, where="text"):
    """`text` with each marked block of a section in `results` rendered anew; returns (text,
    sections used). Markers of other sections, and everything outside markers, stay as they are."""
    tags = list(TAG.finditer(text))
    for opening, closing in zip(tags[::2], tags[1::2]):
        if opening.group(1) or not closing.group(1) or opening.group(2, 3) != closing.group(2, 3):
            raise RenderError(f"{where}: {opening.group(0)} is not closed by its own end marker")
    if len(tags) % 2:
        raise RenderError(f"{where}: {tags[-1].group(0)} has no end marker")
    out, last, used = [], 0, set()
    for opening, closing in zip(tags[::2], tags[1::2]):
        section, name = opening.group(2), opening.group(3)
        if section not in results:
            continue
        try:
            rendered = tables.render(section, results[section])
        except (KeyError, TypeError, IndexError) as e:
            raise RenderError(f"{where}: {section}'s results lack {e} (run the section again)") from None
        inner = text[opening.end():closing.start()]
        if inner.startswith("\n"):
            if name not in rendered.blocks:
                raise RenderError(f"{where}: {section} has no table {name!r} (it has {', '.join(rendered.blocks)})")
            new = "\n" + rendered.blocks[name].strip("\n") + "\n"
        else:
            if name not in rendered.cells:
                raise RenderError(f"{where}: {section} has no inline figure {name!r}")
            new = rendered.cells[name]
        out += [text[last:opening.end()], new]
        last = closing.start()
        used.add(section)
    out.append(text[last:])
    return "".join(out), used


def section_md(name, result):
    """The section's markdown; RenderError when its results lack what the tables need (a
    file from an older harness)."""
    try:
        return tables.section_markdown(name, result)
    except (KeyError, TypeError, IndexError) as e:
        raise RenderError(f"{name}: the results lack {e} (written by an older harness? run the section again)") from None


def summary(results):
    """Every section's markdown; one that cannot be rendered is said so, in place and on stderr."""
    parts = []
    for s in (s for s in SECTIONS if s in results):
        try:
            parts.append(section_md(s, results[s]))
        except RenderError as e:
            print(f"render: summary.md: {e}", file=sys.stderr)
            parts.append(f"### {s}\n\n**Not rendered: {e}**\n")
    return "\n".join(parts)


def write_summary(results_dir, summary_dir=None):
    path = os.path.join(summary_dir or results_dir, "summary.md")
    with open(path, "w") as f:
        f.write(summary(load(results_dir)))
    return path


def render_docs(results, root=ROOT, docs=DOCS):
    """Rewrites the marked blocks of `docs`; returns (files changed, sections used)."""
    quick = sorted(s for s, r in results.items() if r["quick"])
    if quick:
        raise RenderError(f"refused: {', '.join(quick)} {'is' if len(quick) == 1 else 'are'} from a --quick run; "
                          "measure without --quick (or name other sections) to render into the docs")
    changed, used = [], set()
    for doc in docs:
        path = os.path.join(root, doc)
        with open(path) as f:
            text = f.read()
        new, got = replace(text, results, doc)
        used |= got
        if new != text:
            with open(path, "w") as f:
                f.write(new)
            changed.append(doc)
    return changed, used


def main(argv):
    ap = argparse.ArgumentParser(prog="python3 scripts/bench render", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "bench-results"),
                    help="where the results files are (default bench-results; docs/bench re-renders the docs' own)")
    ap.add_argument("--summary-only", action="store_true", help="write bench-results/summary.md, leave the docs")
    ap.add_argument("sections", nargs="*", metavar="SECTION", help="only these sections' results")
    args = ap.parse_args(argv)
    try:
        results = load(args.results, args.sections or SECTIONS)
        os.makedirs(os.path.join(ROOT, "bench-results"), exist_ok=True)
        print(f"render: {write_summary(args.results, os.path.join(ROOT, 'bench-results'))}", file=sys.stderr)
        if args.summary_only:
            return 0
        changed, used = render_docs(results)
    except RenderError as e:
        print(f"render: {e}", file=sys.stderr)
        return 1
    saved = os.path.join(ROOT, "docs/bench")
    os.makedirs(saved, exist_ok=True)
    for s in sorted(used):
        src, dst = os.path.join(args.results, f"{s}.json"), os.path.join(saved, f"{s}.json")
        if os.path.abspath(src) != os.path.abspath(dst):
            shutil.copyfile(src, dst)
    print(f"render: {', '.join(changed) or 'no doc'} changed; results kept in docs/bench/ for "
          f"{', '.join(sorted(used)) or 'no section'}", file=sys.stderr)
    return 0
