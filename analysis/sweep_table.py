"""The table a sweep prints: policies by mean simulated tok/s, one column per workload.

Rows are policies sorted by their mean over workloads (fastest first), columns the workloads
(abbreviated so the text form fits 100 columns) and ``mean``. The clairvoyant heuristics (the
heuristic oracles: Belady eviction with perfect prefetch, which know the future; neither a system
nor a bound, see :mod:`sim.bound`) are printed apart from the real policies and never win the
summary; old result files' names for them (``oracle``, ``oracle_ar``) are read as the new ones. The summary says what the experiment is about: MoE-SpAc
against llama.cpp with SD (the paper's headline comparison, docs/sources.md) and the fastest real
policy other than the heuristic oracles. The text form adds the setup (header), a legend of the column
abbreviations and a footnote on rows whose speed is the same on every workload
(:mod:`analysis.sweep_notes`). ``csv``, ``markdown`` and ``json`` give the same numbers, unrounded except markdown, for
machines.
"""
from __future__ import annotations

import json

import pandas as pd

from analysis import sweep_notes as notes
from analysis.markdown import table as markdown_table
from analysis.names import MOESPAC, ORACLES, SD_BASELINE, canonical, display_name, order_workloads

FORMATS = ("text", "csv", "markdown", "json")
WIDTH = 100
ABBREV = {"gsm8k": "gsm8k", "alpaca": "alpaca", "qa": "qa", "cnn_dm": "cnn_dm", "mt_bench": "mtb",
          "humaneval": "h-eval", "mmlu_pro": "mmlu"}
MEAN = "mean"


def check_format(fmt: str) -> None:
    """One-line error for the ``format`` key."""
    from sim.machine.specs import ConfigError

    if fmt not in FORMATS:
        raise ConfigError(f"format: {fmt!r} is not one of {', '.join(FORMATS)}")


def policy_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mean TPS per policy (rows, fastest first) and workload (columns), plus ``mean`` and ``group``
    (``policy`` or ``heuristic``). Repeated runs of a point (grid points, seeds) are averaged."""
    t = df.assign(policy=df["policy"].map(canonical)).pivot_table(index="policy", columns="workload",
                                                                  values="tps", aggfunc="mean")
    t = t[order_workloads(t.columns)]
    t[MEAN] = t.mean(axis=1)
    t.insert(0, "group", ["heuristic" if p in ORACLES else "policy" for p in t.index])
    t = t.sort_values(["group", MEAN], ascending=[False, False], kind="mergesort")   # policies, then heuristics
    t.columns.name = None
    return t


def summary(t: pd.DataFrame, experiment: str) -> str:
    """What a person came for: MoE-SpAc vs llama.cpp-w/SD, and the fastest policy (one line each)."""
    real = t[t.group == "policy"][MEAN]
    lines = []
    if MOESPAC in real and SD_BASELINE in real:
        a, b = real[MOESPAC], real[SD_BASELINE]
        lines.append(f"{experiment}: {display_name(MOESPAC)} {a:.2f} tok/s vs {display_name(SD_BASELINE)} "
                     f"{b:.2f} tok/s (mean over workloads): {a / b:.2f}x ({100 * (a / b - 1):+.0f}%)")
    if len(real):
        best = real.index[0]
        lines.append(f"{experiment}: fastest policy {best} ({display_name(best)}), {real.iloc[0]:.2f} tok/s")
    return "\n".join(lines)


def _abbrev(w: str) -> str:
    return ABBREV.get(w, w[:6])


def _text_block(t: pd.DataFrame, title: str, name_w: int, flat=()) -> list[str]:
    cols = [c for c in t.columns if c != "group"]
    w = max(6, *(len(_abbrev(c)) for c in cols))
    head = f"{title:<{name_w}}" + "".join(f" {_abbrev(c):>{w}}" for c in cols)
    rows = [f"{p + notes.FLAT_MARK * (p in flat):<{name_w}}" + "".join(f" {v:>{w}.2f}" for v in t.loc[p, cols])
            for p in t.index]
    return [head] + rows


def text_table(t: pd.DataFrame, experiment: str, df: pd.DataFrame | None = None) -> str:
    """The human form (at most :data:`WIDTH` columns for up to 10 workloads): the setup of ``df``'s
    rows, the table, the column legend, the footnote on workload-independent rows, the summary."""
    name_w = max(len("heuristics"), *(len(p) + 1 for p in t.index))
    workloads = [c for c in t.columns if c not in ("group", MEAN)]
    flat = notes.flat_rows(t[t.group == "policy"], workloads)
    lines = [notes.header(df, WIDTH)] if df is not None else []
    lines += ["simulated tokens per second (mean over runs); rows: policies, fastest first"]
    lines += _text_block(t[t.group == "policy"], "policy", name_w, flat)
    if (t.group == "heuristic").any():
        lines += ["", *_text_block(t[t.group == "heuristic"], "heuristics", name_w)]
    lines += [notes.legend(workloads, _abbrev, WIDTH)] + ([notes.flat_footnote(flat, WIDTH)] if flat else [])
    return "\n".join(lines + ["", summary(t, experiment)])


def format_table(df: pd.DataFrame, experiment: str = "", fmt: str = "text") -> str:
    """The sweep's table in ``fmt`` (one of :data:`FORMATS`)."""
    check_format(fmt)
    t = policy_table(df)
    if fmt == "text":
        return text_table(t, experiment, df)
    if fmt == "csv":
        return t.rename_axis("policy").to_csv().rstrip("\n")
    if fmt == "markdown":
        return markdown_table(t.rename_axis("policy"), formats={"group": str}) + "\n\n" + summary(t, experiment)
    return json.dumps({"experiment": experiment, "summary": summary(t, experiment),
                       "rows": t.rename_axis("policy").reset_index().to_dict("records")}, indent=1)
