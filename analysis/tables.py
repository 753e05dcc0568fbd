"""The report's tables, as DataFrames computed from result rows (no I/O, no plotting).

Averages: a system's TPS on a workload is the mean over its rows (seeds, duplicate runs); its
average TPS is the arithmetic mean over workloads, as the paper averages its seven benchmarks.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import paper
from analysis.names import ABLATIONS, MOESPAC, ORACLES, STANDARD_BASELINES, display_name, order_policies, order_workloads

AVERAGE = "average"
DIAGNOSTICS = {  # column -> (label, how to compute from a row)
    "hit_rate": "hit rate",
    "cpu_expert_share": "CPU share of expert execs",
    "gpu_busy": "GPU busy",
    "cpu_busy": "CPU busy",
    "pcie_util": "PCIe busy",
    "bubble_share": "CPU/GPU bubble / decode time",
    "pcie_mb_per_token": "PCIe MB per token",
    "mean_accepted": "accepted drafts per step",
    "step_ms_mean": "ms per step (SD: verify step, AR: token)",
    "prefetch_precision": "prefetch precision",
}


def tps_by_workload(rows: pd.DataFrame) -> pd.DataFrame:
    """TPS per workload (rows) and policy (columns), plus an ``average`` row over workloads."""
    t = rows.pivot_table(index="workload", columns="policy", values="tps", aggfunc="mean")
    t = t.loc[order_workloads(t.index), order_policies(t.columns)]
    t.loc[AVERAGE] = t.mean(skipna=True)
    return t


def average_tps(rows: pd.DataFrame) -> pd.Series:
    """Average TPS per policy: mean over workloads of the per-workload mean."""
    return tps_by_workload(rows).loc[AVERAGE]


def speedup_matrix(avg: pd.Series) -> pd.DataFrame:
    """``m.loc[a, b]`` = average TPS of ``a`` / average TPS of ``b``."""
    v = avg.to_numpy(dtype=float)
    return pd.DataFrame(v[:, None] / v[None, :], index=avg.index, columns=avg.index)


def diff_pct(simulated: float, published: float) -> float:
    """Signed difference of the simulated value from the published one, in percent of the latter."""
    return (simulated / published - 1.0) * 100.0


def paper_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Simulated vs published TPS for every published (system, workload or average) number."""
    out = []
    items = [((p, AVERAGE), v) for p, v in paper.AVG_TPS.items()] + list(paper.PER_WORKLOAD_TPS.items())
    for (policy, workload), pub in items:
        sim = table.at[workload, policy] if policy in table.columns and workload in table.index else np.nan
        out.append({"system": display_name(policy), "policy": policy, "workload": workload, "simulated": sim,
                    "paper": pub.value, "diff_pct": diff_pct(sim, pub.value), "grade": pub.grade,
                    "source": pub.source})
    return pd.DataFrame(out)


def oracle_fraction(avg: pd.Series) -> pd.DataFrame:
    """Each policy's average TPS and its fraction of the speculative and autoregressive oracles."""
    out = pd.DataFrame({"tps": avg})
    for oracle in ORACLES:
        if oracle in avg.index:
            out[f"fraction of {display_name(oracle)}"] = avg / avg[oracle]
    return out


def standard_speedup(avg: pd.Series, target: str = MOESPAC) -> dict:
    """``target``'s speedup over each standard baseline present, with their means.

    ``mean`` is the arithmetic mean over baselines of (target's average TPS / baseline's average
    TPS), the definition that reproduces the paper's claim from its own averages; ``geomean`` is
    given beside it.
    """
    present = [b for b in STANDARD_BASELINES if b in avg.index and np.isfinite(avg[b]) and avg[b] > 0]
    ratios = pd.Series({b: avg[target] / avg[b] for b in present}, dtype=float)
    return {"ratios": ratios, "mean": float(ratios.mean()) if len(ratios) else np.nan,
            "geomean": float(np.exp(np.log(ratios).mean())) if len(ratios) else np.nan,
            "missing": [b for b in STANDARD_BASELINES if b not in present]}


def paper_ratios() -> pd.Series:
    """MoE-SpAc's speedup over each baseline implied by the published averages."""
    m = paper.AVG_TPS[MOESPAC].value
    return pd.Series({p: m / v.value for p, v in paper.AVG_TPS.items() if p != MOESPAC})


def diagnostics(rows: pd.DataFrame) -> pd.DataFrame:
    """Per policy, the mean over its rows of the counters that explain TPS (see ``DIAGNOSTICS``)."""
    d = rows.copy()
    d["bubble_share"] = d["bubble_s"] / d["decode_s"]
    d["pcie_mb_per_token"] = d["pcie_gb"] * 1e3 / d["gen_tokens"]
    cols = [c for c in DIAGNOSTICS if c in d.columns]
    out = d.groupby("policy")[cols].mean()
    return out.loc[order_policies(out.index)]


def ablation_table(avg: pd.Series) -> pd.DataFrame:
    """MoE-SpAc and its ablations: average TPS and change against the full system (percent)."""
    present = [p for p in ABLATIONS if p in avg.index]
    if MOESPAC not in present:
        return pd.DataFrame(columns=["tps", "change_pct"])
    out = pd.DataFrame({"tps": avg[present]})
    out["change_pct"] = (out["tps"] / avg[MOESPAC] - 1.0) * 100.0
    return out


def hot_precision_summary(rows: pd.DataFrame, policy: str = MOESPAC) -> dict:
    """Hot/cold prediction precision of ``policy``: overall, on the paper's workload and layer."""
    r = rows[rows["policy"] == policy]
    if r.empty or "hot_precision" not in r or r["hot_precision"].isna().all():
        return {}
    out = {"overall": float(r["hot_precision"].mean()),
           "recall": float(r["hot_recall"].mean()) if "hot_recall" in r else np.nan,
           "by_workload": r.groupby("workload")["hot_precision"].mean()}
    layers = by_layer(r)
    if layers is not None:
        out["by_layer"] = layers
    w = r[r["workload"] == paper.HOT_PRECISION_WORKLOAD]
    if not w.empty:
        out["paper_workload"] = float(w["hot_precision"].mean())
        wl = by_layer(w)
        if wl is not None and paper.HOT_PRECISION_LAYER < len(wl):
            out["paper_layer"] = float(wl.iloc[paper.HOT_PRECISION_LAYER])
    for col in ("hot_per_layer", "tau_mean"):
        if col in r:
            out[col] = float(r[col].mean())
    return out


def by_layer(rows: pd.DataFrame, column: str = "hot_precision_by_layer") -> pd.Series | None:
    """Mean over rows of a per-layer list column (None when absent)."""
    if column not in rows or rows[column].isna().all():
        return None
    arr = np.array([np.asarray(v, dtype=float) for v in rows[column].dropna()])
    return pd.Series(np.nanmean(arr, axis=0), name=column)


def real_vs_sim(df: pd.DataFrame) -> pd.DataFrame:
    """Measured (``source=real``) TPS next to the simulated TPS of the same run key, with diff%."""
    from sim.run.results import KEY

    real, sim = df[df["source"] == "real"], df[df["source"] == "sim"]
    if real.empty or sim.empty:
        return pd.DataFrame()
    keys = [k for k in KEY if k != "experiment"]
    m = real.groupby(keys)["tps"].mean().rename("measured").to_frame().join(
        sim.groupby(keys)["tps"].mean().rename("simulated"), how="inner")
    m["diff_pct"] = (m["simulated"] / m["measured"] - 1.0) * 100.0
    return m.reset_index()
