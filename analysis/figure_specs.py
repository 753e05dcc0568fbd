"""Which figure comes from which rows, and which sweep produces them when they are absent."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from analysis import figures as sweep_figs
from analysis import figures_main as main_figs
from analysis.load import experiment_rows, has_hot_metrics


@dataclass(frozen=True)
class FigureSpec:
    """A figure: file name, caption, the sweep that feeds it, and how to pick rows and plot."""

    name: str
    caption: str
    experiment: str | None       # None: drawn from the main table's rows
    axis: str | None
    plot: Callable


SPECS = (
    FigureSpec("tps_vs_paper", "Average throughput per system, simulated next to the published value.",
               None, None, main_figs.plot_tps_vs_paper),
    FigureSpec("tps_vs_cache_ratio", "Throughput against the share of routed experts cacheable in VRAM.",
               "sweep_cache_ratio", "cache_ratio", sweep_figs.plot_tps_vs_cache_ratio),
    FigureSpec("speedup_vs_gamma", "Speedup of the speculative policies over llama.cpp without SD, against gamma.",
               "sweep_gamma", "gamma", sweep_figs.plot_speedup_vs_gamma),
    FigureSpec("tps_vs_gen_length", "Throughput against the number of generated tokens.",
               "sweep_gen_length", "gen_tokens", sweep_figs.plot_tps_vs_gen_length),
    FigureSpec("tps_vs_pcie", "Throughput against the PCIe host-to-device bandwidth (PCIe 3/4/5 x16).",
               "sweep_pcie", "hardware", sweep_figs.plot_tps_vs_pcie),
    FigureSpec("tps_by_hardware", "Throughput of each policy on each machine.",
               "sweep_hardware", "hardware", sweep_figs.plot_tps_by_hardware),
    FigureSpec("ablations", "MoE-SpAc with one component switched off at a time.",
               None, None, main_figs.plot_ablation),
    FigureSpec("hot_precision_by_layer", "MoE-SpAc's hot/cold prediction precision per layer.",
               None, None, main_figs.plot_hot_precision_by_layer),
    FigureSpec("utilization", "GPU, CPU and PCIe busy time per system, as a share of decode time.",
               None, None, main_figs.plot_utilization),
)


def rows_for(spec: FigureSpec, df: pd.DataFrame, main: pd.DataFrame) -> tuple[pd.DataFrame | None, str]:
    """The rows a figure draws from and a note on their origin (None rows: data absent)."""
    if spec.experiment is None:
        if spec.name == "hot_precision_by_layer" and not has_hot_metrics(main):
            return None, "the MoE-SpAc rows carry no hot_precision_by_layer (paper_qwen3 with policy moespac)"
        return main, "main table rows"
    s = experiment_rows(df, spec.experiment, spec.axis)
    if s is None:
        return None, f"no rows of `{spec.experiment}`; run `python -m sim sweep experiment={spec.experiment}`"
    return s.rows, s.note
