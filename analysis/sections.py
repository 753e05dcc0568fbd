"""Markdown sections of the report built from tables (main table, paper, speedups, oracle,
diagnostics, ablations, DeepSeek-V2-Lite, measured runs)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import paper
from analysis.load import AnalysisError, main_slice
from analysis.markdown import fmt, pct, table
from analysis.names import ABLATIONS, MOESPAC, ORACLE_AR, ORACLE_SD, ORACLES, display_name
from analysis.tables import (AVERAGE, DIAGNOSTICS, ablation_table, diagnostics, oracle_fraction, paper_comparison,
                             real_vs_sim, speedup_matrix, tps_by_workload)


def _named(df: pd.DataFrame, axis: str = "columns") -> pd.DataFrame:
    return df.rename(**{axis: display_name})


def setting(rows: pd.DataFrame, note: str) -> list[str]:
    """What the main table simulates."""
    sd = rows[rows["gamma"] > 0]
    items = [("rows", f"{note}"), ("model", ", ".join(rows["model"].unique())),
             ("draft (speculative policies)", ", ".join(sd["draft"].unique()) or "-"),
             ("hardware", ", ".join(rows["hardware"].unique())),
             ("cache ratio", ", ".join(f"{v:g}" for v in sorted(rows["cache_ratio"].unique()))),
             ("gamma", ", ".join(str(v) for v in sorted(sd["gamma"].unique())) or "-"),
             ("generated tokens", ", ".join(str(v) for v in sorted(rows["gen_tokens"].unique()))),
             ("seeds", ", ".join(str(v) for v in sorted(rows["seed"].unique()))),
             ("workloads", ", ".join(rows["workload"].unique())),
             ("policies", f"{rows['policy'].nunique()}")]
    return ["## Setting", "", *[f"- {k}: {v}" for k, v in items]]


def tps_section(t: pd.DataFrame) -> list[str]:
    """TPS per system per workload, with the average row."""
    main = [c for c in t.columns if c not in ABLATIONS[1:]]
    return ["## Throughput per system and workload (simulated tokens/s)", "",
            "Average = arithmetic mean over the workloads (the paper averages its seven benchmarks the same way).",
            "", table(_named(t[main]))]


PAPER_N_WORKLOADS = 7   # the paper's averages are over seven benchmarks (docs/results.md)


def paper_section(t: pd.DataFrame) -> list[str]:
    """Every published TPS number next to the simulated one."""
    c = paper_comparison(t)
    present = [w for w in t.index if w != AVERAGE]
    note = []
    if len(present) < PAPER_N_WORKLOADS:
        c = c[c["workload"] != AVERAGE]
        note = [f"Averages not compared: the results hold {len(present)} of the paper's {PAPER_N_WORKLOADS} "
                f"workloads ({', '.join(present)}), so their mean is not the published {PAPER_N_WORKLOADS}-workload "
                "average.", ""]
    c = c.assign(workload=c["workload"].str.replace(AVERAGE, f"average of {PAPER_N_WORKLOADS}"))
    view = c.set_index("system")[["workload", "simulated", "paper", "diff_pct", "grade", "source"]]
    view = view.rename(columns={"diff_pct": "diff %"})
    return ["## Published numbers vs simulated (Qwen3-30B-A3B)", "",
            "diff % = (simulated / published - 1) x 100. Grades: S secondary summary that read the paper, T "
            "leaderboard rows scraped from its tables, D derived (docs/sources.md). SP-MoE and MoE-Infinity "
            "averages are the mean of their four published benchmarks.", "", *note,
            table(view, formats={"diff %": lambda v: pct(v, signed=True)})]


def speedup_section(avg: pd.Series) -> list[str]:
    """Speedup of every system over every other."""
    keep = [p for p in avg.index if p not in ABLATIONS[1:]]
    m = speedup_matrix(avg[keep])
    m = _named(_named(m), "index")
    m.index.name = "row / column"
    return ["## Speedup of each system over each other", "",
            "Cell = average TPS of the row system / average TPS of the column system.", "", table(m)]


def _above_bound(avg: pd.Series, speculative: set) -> list[str]:
    """Policies faster than their own bound (the SD oracle for SD policies, the AR one for AR)."""
    out = []
    for p in avg.index:
        bound = ORACLE_SD if p in speculative else ORACLE_AR
        if p not in ORACLES and bound in avg.index and avg[p] > avg[bound] * 1.001:
            out.append(f"{display_name(p)} ({avg[p]:.2f} > {display_name(bound)} {avg[bound]:.2f})")
    return out


def oracle_section(avg: pd.Series, speculative: set) -> list[str]:
    """Each policy's fraction of the upper bounds; flags policies faster than their bound."""
    present = [o for o in ORACLES if o in avg.index]
    if not present:
        return ["## Oracle (upper bound)", "",
                "No heuristic-oracle rows: add `heuristic_oracle` / `heuristic_oracle_ar` to the experiment's policies."]
    o = _named(oracle_fraction(avg), "index")
    o.index.name = "policy"
    fr = [c for c in o.columns if c.startswith("fraction")]
    text = ", ".join(f"{display_name(p)} {avg[p]:.2f} tok/s" for p in present)
    above = _above_bound(avg, speculative)
    warn = ([f"**Check:** faster than the oracle of the same decoding mode: {'; '.join(above)}. The oracle is meant "
             "to bound them, so the oracle or these policies' models deserve a look.", ""] if above else [])
    return ["## Oracle (upper bound)", "", *warn,
            f"Oracle TPS: {text} (Belady eviction, perfect prefetch, best CPU/GPU split; the SD oracle at the "
            "same gamma, the AR one without a draft). A speculative policy can exceed 100% of the AR oracle: "
            "verifying several tokens per pass amortises expert loads that no AR schedule can avoid; an AR policy "
            "can exceed the SD oracle when drafting costs more than it saves. Each policy is checked against the "
            "oracle of its own decoding mode.", "",
            table(o.rename(columns={"tps": "average TPS"}), formats={c: pct for c in fr})]


def diagnostics_section(rows: pd.DataFrame) -> list[str]:
    """The counters that explain throughput, per policy."""
    d = diagnostics(rows)
    d = _named(d.rename(columns=DIAGNOSTICS), "index")
    d.index.name = "policy"
    share = [DIAGNOSTICS[c] for c in ("hit_rate", "cpu_expert_share", "gpu_busy", "cpu_busy", "pcie_util",
                                      "bubble_share", "prefetch_precision")]
    return ["## Diagnostics (means over workloads)", "",
            "Busy shares are fractions of decode time; the bubble is the idle gap between the CPU and GPU halves "
            "of the layers where both compute.", "", table(d, formats={c: pct for c in share if c in d.columns})]


def ablation_section(avg: pd.Series) -> list[str]:
    """MoE-SpAc's components, switched off one at a time."""
    a = ablation_table(avg)
    if len(a) < 2:
        return ["## Ablations", "", "No ablation rows (the paper_qwen3 experiment runs them)."]
    a = _named(a, "index").rename(columns={"tps": "average TPS", "change_pct": "change vs MoE-SpAc"})
    a.index.name = "variant"
    return ["## Ablations (average TPS; change vs the full MoE-SpAc)", "",
            "The paper publishes no ablation numbers.", "",
            table(a, formats={"change vs MoE-SpAc": lambda v: pct(v, signed=True)})]


def dsv2_section(df: pd.DataFrame) -> list[str]:
    """MoE-SpAc's gain over the strongest baseline on DeepSeek-V2-Lite vs +53/+55/+51%."""
    head = ["## DeepSeek-V2-Lite compatibility", ""]
    try:
        s = main_slice(df, experiment="paper_dsv2lite") if "paper_dsv2lite" in set(df["experiment"]) else \
            main_slice(df, model=paper.DSV2_MODEL)
    except AnalysisError:
        return head + ["No DeepSeek-V2-Lite rows: run `python -m sim sweep experiment=paper_dsv2lite`."]
    t = tps_by_workload(s.rows).drop(index=AVERAGE)
    if MOESPAC not in t.columns:
        return head + ["No MoE-SpAc rows in the DeepSeek-V2-Lite results."]
    base = [c for c in t.columns if c not in ORACLES + ABLATIONS]
    out = []
    for w in t.index:
        strongest = t.loc[w, base].idxmax() if t.loc[w, base].notna().any() else None
        gain = t.at[w, MOESPAC] / t.at[w, strongest] - 1 if strongest else np.nan
        pub = paper.DSV2_GAIN.get(w)
        out.append({"workload": w, "MoE-SpAc TPS": t.at[w, MOESPAC],
                    "strongest baseline": display_name(strongest) if strongest else "-",
                    "its TPS": t.at[w, strongest] if strongest else np.nan, "simulated gain": gain,
                    "published gain": pub.value if pub else np.nan,
                    "published MoE-SpAc TPS (T/D)": getattr(paper.DSV2_MOESPAC_TPS.get(w), "value", np.nan)})
    view = pd.DataFrame(out).set_index("workload")
    return head + [f"Rows: {s.note}. Published gains: S1 (docs/sources.md); the MoE-SpAc TPS column is a "
                   "speculative attribution of leaderboard rows.", "",
                   table(view, formats={"simulated gain": lambda v: pct(v), "published gain": lambda v: pct(v)})]


def real_section(df: pd.DataFrame) -> list[str]:
    """Measured runs (``source=real``) against the simulator, when present."""
    m = real_vs_sim(df)
    if m.empty:
        return []
    return ["## Measured vs simulated", "", "Rows with source=real matched to simulated rows of the same key.", "",
            table(m.set_index("policy"), formats={"diff_pct": lambda v: pct(v, signed=True),
                                                  "cache_ratio": lambda v: fmt(v, 3)})]
