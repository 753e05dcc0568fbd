"""Sweep figures: TPS against one axis (cache ratio, gamma, generation length, PCIe, machine).

Each ``plot_*`` takes the rows of its sweep and returns a matplotlib Figure, or None when the rows
cannot make it (the report then says which sweep produces the data). TPS is averaged over the
workloads and seeds of each point.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis.names import ORACLES, display_name, order_policies
from analysis.style import color, figure

PAPER_RATIO, OOM_RATIO = 0.17, 0.21
PCIE_GEN = {12.5: "PCIe 3.0", 25.0: "PCIe 4.0", 50.0: "PCIe 5.0"}


def _curves(rows: pd.DataFrame, x: str) -> pd.DataFrame:
    """Mean TPS per (policy, x): mean over workloads of the per-workload mean."""
    per_w = rows.groupby(["policy", x, "workload"])["tps"].mean()
    return per_w.groupby(["policy", x]).mean().unstack("policy").sort_index()


def _lines(ax, curves: pd.DataFrame) -> None:
    for p in order_policies(curves.columns):
        s = curves[p].dropna()
        ax.plot(s.index, s.values, marker="o", color=color(p), label=display_name(p),
                lw=2.4 if p == "moespac" else 1.6, ls="--" if p in ORACLES else "-")
    ax.legend(fontsize=8, loc="best")


def _setting(rows: pd.DataFrame, *drop: str) -> str:
    parts = []
    for col in ("model", "hardware", "cache_ratio", "gamma", "gen_tokens"):
        if col in drop:
            continue
        vals = rows.loc[rows["gamma"] > 0, col] if col == "gamma" else rows[col]
        if vals.nunique() == 1:
            parts.append(f"{col}={vals.iloc[0]}")
    return ", ".join(parts)


def plot_tps_vs_cache_ratio(rows: pd.DataFrame):
    """TPS per policy against the share of routed experts that fit in VRAM."""
    if rows["cache_ratio"].nunique() < 2:
        return None
    r = rows.assign(cache_pct=rows["cache_ratio"] * 100)
    fig, ax = figure()
    _lines(ax, _curves(r, "cache_pct"))
    ax.axvline(PAPER_RATIO * 100, color="gray", ls=":", lw=1)
    ax.axvline(OOM_RATIO * 100, color="firebrick", ls=":", lw=1)
    bottom = ax.get_ylim()[0]
    ax.text(PAPER_RATIO * 100, bottom, "paper 17% ", fontsize=7, va="bottom", ha="right", color="gray")
    ax.text(OOM_RATIO * 100, bottom, " 24 GB limit ~21%", fontsize=7, va="bottom", ha="left", color="firebrick")
    ax.set_xlabel("expert cache ratio (% of routed experts resident in VRAM)")
    ax.set_ylabel("decode throughput (tokens/s)")
    ax.set_title("Throughput vs expert cache ratio\n" + _setting(rows, "cache_ratio"), fontsize=10)
    return fig


def plot_speedup_vs_gamma(rows: pd.DataFrame, reference: str = "llamacpp"):
    """Speedup of each speculative policy over autoregressive ``reference`` against gamma."""
    ar = rows[rows["gamma"] == 0]
    if reference not in set(ar["policy"]):
        if ar.empty:
            return None
        reference = order_policies(ar["policy"].unique())[0]
    sd = rows[rows["gamma"] > 0]
    if sd["gamma"].nunique() < 2:
        return None
    base = ar[ar["policy"] == reference].groupby("workload")["tps"].mean()
    r = sd.assign(speedup=sd["tps"] / sd["workload"].map(base))
    per_w = r.groupby(["policy", "gamma", "workload"])["speedup"].mean()
    curves = per_w.groupby(["policy", "gamma"]).mean().unstack("policy")
    fig, ax = figure()
    _lines(ax, curves)
    ax.axhline(1.0, color="gray", lw=1, ls=":")
    ax.set_xlabel("gamma (drafted tokens per verify step)")
    ax.set_ylabel(f"speedup over {display_name(reference)} (x, TPS ratio)")
    ax.set_title(f"Speculative decoding depth: speedup over {display_name(reference)} (no SD)\n"
                 + _setting(rows, "gamma"), fontsize=10)
    return fig


def plot_tps_vs_gen_length(rows: pd.DataFrame):
    """TPS per policy against the number of generated tokens (log scale)."""
    if rows["gen_tokens"].nunique() < 2:
        return None
    fig, ax = figure()
    curves = _curves(rows, "gen_tokens")
    _lines(ax, curves)
    ax.set_xscale("log", base=2)
    ax.set_xticks(curves.index, [str(int(v)) for v in curves.index])
    ax.set_xlabel("generated tokens per request (log scale)")
    ax.set_ylabel("decode throughput (tokens/s)")
    ax.set_title("Throughput vs generation length\n" + _setting(rows, "gen_tokens"), fontsize=10)
    return fig


def pcie_gbs(hardware: str) -> float:
    """The H2D bandwidth a patched hardware name records (``...[pcie_h2d_gbs=25.0]``), else NaN."""
    m = re.search(r"\[pcie_h2d_gbs=([0-9.]+)\]", hardware)
    return float(m.group(1)) if m else np.nan


def plot_tps_vs_pcie(rows: pd.DataFrame):
    """TPS per policy against the host-to-device PCIe bandwidth."""
    r = rows.assign(pcie=rows["hardware"].map(pcie_gbs)).dropna(subset=["pcie"])
    if r["pcie"].nunique() < 2:
        return None
    fig, ax = figure()
    curves = _curves(r, "pcie")
    _lines(ax, curves)
    ax.set_xscale("log", base=2)
    ax.set_xticks(curves.index, [f"{PCIE_GEN.get(v, '')}\n{v:g} GB/s".strip() for v in curves.index])
    ax.set_xlabel("PCIe host-to-device bandwidth (GB/s, log scale)")
    ax.set_ylabel("decode throughput (tokens/s)")
    ax.set_title("Throughput vs PCIe bandwidth\n" + _setting(r, "hardware"), fontsize=10)
    return fig


def plot_tps_by_hardware(rows: pd.DataFrame):
    """Grouped bars: TPS of each policy on each machine."""
    if rows["hardware"].nunique() < 2:
        return None
    t = _curves(rows, "hardware")
    fig, ax = figure(8, 4.5)
    policies = order_policies(t.columns)
    width = 0.8 / len(policies)
    x = np.arange(len(t.index))
    for i, p in enumerate(policies):
        ax.bar(x + i * width - 0.4 + width / 2, t[p].values, width, color=color(p), label=display_name(p))
    ax.set_xticks(x, t.index)
    ax.set_xlabel("machine (conf/hardware)")
    ax.set_ylabel("decode throughput (tokens/s)")
    ax.set_title("Throughput per machine\n" + _setting(rows, "hardware"), fontsize=10)
    ax.legend(fontsize=8)
    return fig
