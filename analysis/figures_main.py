"""Figures of the main comparison: TPS per system vs the paper, ablations, hot/cold precision by
layer, and resource utilization. Each ``plot_*`` returns a Figure, or None without the data."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from analysis import paper
from analysis.names import ABLATIONS, MOESPAC, ORACLE_SD, SD_BASELINE, display_name, order_policies
from analysis.style import color, figure
from analysis.tables import average_tps, by_layer, tps_by_workload


def plot_tps_vs_paper(rows: pd.DataFrame):
    """Average TPS per system, simulated next to the published value where there is one."""
    avg = average_tps(rows)
    systems = [p for p in order_policies(avg.index) if p not in ABLATIONS[1:]]
    if not systems:
        return None
    fig, ax = figure(9, 4.8)
    y = np.arange(len(systems))
    sim = avg[systems].to_numpy()
    pub = np.array([paper.AVG_TPS[p].value if p in paper.AVG_TPS else np.nan for p in systems])
    ax.barh(y - 0.2, sim, 0.4, color=["tab:red" if p == MOESPAC else "tab:blue" for p in systems])
    ax.barh(y + 0.2, pub, 0.4, color="lightgray", edgecolor="black", hatch="//")
    for yi, v in zip(y, sim):
        ax.text(v, yi - 0.2, f" {v:.1f}", va="center", fontsize=7)
    ax.set_yticks(y, [display_name(p) for p in systems])
    ax.invert_yaxis()
    ax.set_xlabel("average decode throughput over workloads (tokens/s)")
    ax.set_title("Simulated vs published throughput per system (grey: paper, where published)", fontsize=10)
    ax.legend(handles=[Patch(color="tab:red", label="simulated, MoE-SpAc"), Patch(color="tab:blue", label="simulated"),
                       Patch(facecolor="lightgray", edgecolor="black", hatch="//", label="published")],
              fontsize=8, loc="lower right")
    return fig


def plot_ablation(rows: pd.DataFrame):
    """MoE-SpAc and its ablations: average TPS, whiskers spanning the workloads."""
    table = tps_by_workload(rows)
    present = [p for p in ABLATIONS if p in table.columns]
    if MOESPAC not in present or len(present) < 2:
        return None
    per_w = table.drop(index="average")[present]
    mean = table.loc["average", present]
    fig, ax = figure(8, 4.2)
    y = np.arange(len(present))
    err = np.vstack([mean - per_w.min(), per_w.max() - mean])
    ax.barh(y, mean, xerr=err, color=[color(p) if p == MOESPAC else "tab:orange" for p in present],
            capsize=3, alpha=0.9)
    for yi, v, hi in zip(y, mean, per_w.max()):
        ax.text(hi, yi, f" {v:.1f} ({(v / mean[MOESPAC] - 1) * 100:+.0f}%)", fontsize=8, va="center",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    for ref, ls in ((SD_BASELINE, "--"), (ORACLE_SD, ":")):
        if ref in table.columns:
            ax.axvline(table.at["average", ref], color=color(ref), ls=ls, lw=1.2, zorder=1,
                       label=f"{display_name(ref)} {table.at['average', ref]:.1f}")
    ax.set_yticks(y, [display_name(p) for p in present])
    ax.invert_yaxis()
    ax.set_xlim(0, float(per_w.max().max()) * 1.25)
    ax.set_xlabel("average decode throughput (tokens/s); whiskers: min..max over workloads")
    ax.set_title("What each MoE-SpAc component contributes (ablations)", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    return fig


def plot_hot_precision_by_layer(rows: pd.DataFrame, policies=(MOESPAC,)):
    """Hot/cold prediction precision per MoE layer, against the paper's ~85% (MMLU-Pro, layer 47)."""
    fig, ax = figure(8, 4.2)
    drawn = False
    for p in policies:
        r = rows[rows["policy"] == p]
        layers = by_layer(r) if not r.empty else None
        if layers is None:
            continue
        per_w = np.array([np.asarray(v, dtype=float) for v in r["hot_precision_by_layer"].dropna()])
        x = np.arange(len(layers))
        ax.fill_between(x, np.nanmin(per_w, 0), np.nanmax(per_w, 0), color=color(p), alpha=0.15,
                        label=f"{display_name(p)}: range over workloads")
        ax.plot(x, layers, color=color(p), lw=2, label=f"{display_name(p)}: mean over workloads")
        w = r[r["workload"] == paper.HOT_PRECISION_WORKLOAD]
        if not w.empty:
            ax.plot(x, by_layer(w), color=color(p), lw=1, ls="--", label=f"{display_name(p)}: MMLU-Pro")
        drawn = True
    if not drawn:
        return None
    pub = paper.HOT_PRECISION
    ax.axhline(pub.value, color="gray", ls=":", lw=1)
    ax.plot([paper.HOT_PRECISION_LAYER], [pub.value], marker="*", ms=14, color="gold", mec="black",
            ls="none", label=f"paper: ~{pub.value:.0%} (MMLU-Pro, layer {paper.HOT_PRECISION_LAYER})")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("MoE layer index")
    ax.set_ylabel("hot-set precision (fraction)")
    ax.set_title("Hot/cold prediction precision per layer: share of the experts predicted hot\n"
                 "for a layer's next pass that the pass requests", fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    return fig


def plot_utilization(rows: pd.DataFrame):
    """GPU, CPU and PCIe busy time as a share of decode time, per system (sorted by TPS)."""
    avg = average_tps(rows)
    systems = [p for p in avg.sort_values(ascending=False).index if p not in ABLATIONS[1:]]
    if not systems:
        return None
    util = rows.groupby("policy")[["gpu_busy", "cpu_busy", "pcie_util"]].mean().loc[systems] * 100
    fig, ax = figure(10, 4.5)
    x = np.arange(len(systems))
    for i, (col, name, c) in enumerate((("gpu_busy", "GPU", "tab:green"), ("cpu_busy", "CPU", "tab:blue"),
                                        ("pcie_util", "PCIe H2D", "tab:orange"))):
        ax.bar(x + (i - 1) * 0.27, util[col], 0.27, color=c, label=name)
    ax.set_xticks(x, [f"{display_name(p)}\n{avg[p]:.1f} tok/s" for p in systems], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("busy time (% of decode time)")
    ax.set_ylim(0, max(105, float(np.nanmax(util.to_numpy())) * 1.05))
    ax.set_title("Where decode time goes: resource utilization per system (sorted by TPS)", fontsize=10)
    ax.legend(fontsize=8)
    return fig
