"""Markdown rendering of DataFrames and numbers (no third-party table library)."""
from __future__ import annotations

import math

import pandas as pd


def fmt(value, digits: int = 2) -> str:
    """A number with ``digits`` decimals, ``-`` for missing, strings unchanged."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, (int, float)):
        return f"{value:.{digits}f}"
    return str(value)


def pct(value, digits: int = 1, signed: bool = False) -> str:
    """A fraction (0.42) as a percentage (42.0%); ``signed`` for differences already in percent."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}%" if signed else f"{100 * value:.{digits}f}%"


def table(df: pd.DataFrame, digits: int = 2, index: bool = True, formats: dict | None = None) -> str:
    """``df`` as a GitHub markdown table; ``formats`` maps a column to a function of the value."""
    formats = formats or {}
    cols = list(df.columns)
    head = ([str(df.index.name or "")] if index else []) + [str(c) for c in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for idx, row in df.iterrows():
        cells = [str(idx)] if index else []
        cells += [formats[c](row[c]) if c in formats else fmt(row[c], digits) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
