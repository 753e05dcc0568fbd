"""What the sweep's text table says around its numbers: the setup it was run on (header), what each
column abbreviation stands for (legend), and why a baseline shows one speed on every workload.

The workload names of the legend are the presets' own descriptions (``conf/workload/NAME.yaml``).
"""
from __future__ import annotations

import textwrap

import pandas as pd

from sim.paths import CONF_DIR

SPREAD = 1e-3   # relative max-min across workloads below which a row counts as workload-independent
FLAT_MARK = "*"


def _values(s: pd.Series) -> str:
    vals = sorted(s.dropna().unique(), key=str)
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in vals) or "-"


def header(df: pd.DataFrame, width: int = 100) -> str:
    """One line naming the setup of the rows: model, machine (gpu+host+link), cache ratio, gamma of
    the speculative rows, generated tokens and seeds (each a comma list when the rows vary it)."""
    sd = df[df["gamma"] > 0]
    text = (f"setup: model {_values(df['model'])}, machine {_values(df['hardware'])}, "
            f"cache ratio {_values(df['cache_ratio'])}, gamma {_values(sd['gamma'])} (speculative policies), "
            f"{_values(df['gen_tokens'])} generated tokens, seed {_values(df['seed'])}")
    return textwrap.fill(text, width=width, subsequent_indent="  ", break_on_hyphens=False)


def workload_description(name: str) -> str:
    """The preset's ``description`` (its name when there is no preset)."""
    path = CONF_DIR / "workload" / f"{name}.yaml"
    if not path.exists():
        return name
    for line in path.read_text().splitlines():
        if line.startswith("description:"):
            return line.split(":", 1)[1].strip().strip('"').split(" (")[0].split(",")[0]
    return name


def legend(columns, abbrev, width: int = 100) -> str:
    """``columns: gsm8k = GSM8K ..., mtb = mt_bench (MT-Bench ...), ...``: every workload column."""
    parts = []
    for w in columns:
        a, desc = abbrev(w), workload_description(w)
        parts.append(f"{w} = {desc}" if a == w else f"{a} = {w} ({desc})")
    text = "columns: " + "; ".join(parts) + "; mean = mean over these workloads"
    return textwrap.fill(text, width=width, subsequent_indent="  ", break_on_hyphens=False)


def flat_rows(t: pd.DataFrame, workload_cols) -> list[str]:
    """Policies whose speed is the same on every workload (relative spread below :data:`SPREAD`)."""
    cols = list(workload_cols)
    if len(cols) < 2:
        return []
    v = t[cols]
    spread = (v.max(axis=1) - v.min(axis=1)) / v.mean(axis=1).abs()
    return [p for p in t.index if spread[p] < SPREAD]


def flat_footnote(flat: list[str], width: int = 100) -> str:
    """The footnote for :func:`flat_rows` (empty when none)."""
    if not flat:
        return ""
    text = (f"{FLAT_MARK} same speed on every workload ({', '.join(flat)}): its time per token does not depend on "
            "which experts the routing picks (whole layers' experts on one device, or every expert moved or run "
            "every step): fixed per-operation costs bind")
    return textwrap.fill(text, width=width, subsequent_indent="  ", break_on_hyphens=False)
