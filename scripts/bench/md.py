"""Markdown helpers of the renderer (tables.py, tables_more.py): numbers as the docs write
them, ratios, tables, and what a section renders to.
"""
from dataclasses import dataclass, field


@dataclass
class Rendered:
    title: str
    intro: str = ""
    blocks: dict = field(default_factory=dict)
    cells: dict = field(default_factory=dict)


def n0(x):
    return f"{x:,.0f}"


def times(a, b, suffix="×"):
    return f"{a / b:.2f}{suffix}" if a is not None and b else "—"


def mib(kib):
    return f"{kib // 1024:.0f}"


def num(x):
    """A count as it is, a fraction with one decimal."""
    return n0(x) if float(x).is_integer() else f"{x:,.1f}"


def short(n):
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def table(header, align, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    return "\n".join(lines + ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def base_name(r):
    return r["base"]["revision"] if r.get("base") else "base"
