"""Every (machine, model, workload) cell: ``spac_auto`` against every other registered policy.

    PYTHONPATH=. python scripts/policy_cells.py OUT_DIR [--gen 128] [--jobs 2] [--ablate] [--skip-own] [--bound]
        [--bound-gen 16] [--bound-workloads alpaca]

Six machines x five models x three workloads. Each cell runs every registered policy (the heuristic
oracles know the future and are left out) twice: all on one runtime (``custom_cuda``: the cells
compare policies, not implementations) and each on its own system's runtime. Per cell the draft is
Qwen3-0.6B and the cache ratio 80% of the largest the memory plan fits beside it (at most 0.3).
Resumable (rows are keyed by run id in OUT_DIR/results.parquet); writes OUT_DIR/cells.md (per cell:
the best other policy, i.e. the best that is not ours, ours, the ratio, and ours / AdaSpec, our
dynamic strategy that spac_auto delegates to; with ``--bound`` ours as a fraction of the LP bound on shorter
runs of the bounded workloads, since an LP per cell takes seconds to minutes),
OUT_DIR/ratios.png, and with ``--ablate`` OUT_DIR/ablations.md (each decision switched off).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sim.policies import policy_names
from sim.run.sweep import execute

OURS = "spac_auto"
OUR_OTHERS = {"adaspec"}    # ours as well (spac_auto delegates to it): reported beside, not as "best other"
SAME = "custom_cuda"
EXCLUDED = {"heuristic_oracle", "heuristic_oracle_ar", OURS}
DRAFT = "qwen3_0_6b"
MACHINES = {
    "laptop_rtx4060_pcie4": "laptop_rtx4060_pcie4",     # 8 GB laptop, DDR5
    "rtx5070ti_ddr5": {"name": "rtx5070ti_ddr5", "gpu": "rtx5070ti", "host": "ryzen9900x_ddr5_2ch",
                       "link": "pcie5_x16"},            # 16 GB desktop card
    "rtx4090_pcie4": "rtx4090_pcie4",                   # the paper's machine
    "rtx3090_ddr4": "rtx3090_ddr4",                     # DDR4 desktop
    "rtx5090_ddr5": {"name": "rtx5090_ddr5", "gpu": "rtx5090", "host": "ryzen9900x_ddr5_2ch",
                     "link": "pcie5_x16"},              # 32 GB desktop card
    "xeon2s_rtx4090": "xeon2s_rtx4090",                 # dual-socket host
}
MODELS = ["qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v2_lite", "gpt_oss_20b", "phi3_5_moe"]
WORKLOADS = ["gsm8k", "alpaca", "mt_bench"]
ABLATIONS = {"no_placement": {"placement": False}, "no_cpu_compute": {"cpu_compute": False},
             "no_prefetch": {"prefetch": False}, "no_speculation": {"speculation": False},
             "no_adaptive_gamma": {"adaptive_gamma": False}, "no_switch": {"switch": False}}


def cache_ratio(hw, model: str) -> tuple[float | None, set]:
    """80% of the largest cache ratio the memory plan fits with the draft on every runtime of the
    cell that holds at least one expert at that 80% (at most 0.3), and those runtimes; (None, set())
    if ``custom_cuda`` does not (own-runtime runs on a runtime left out are not made: a runtime that
    fits a single slot would otherwise shrink the whole cell to no expert at all)."""
    from sim.machine.presets import ConfigError
    from sim.policies.registry import policy_runtime
    from sim.run.resolve import resolve
    from sim.run.spec import RunSpec
    runtimes = sorted({SAME} | {policy_runtime(p) for p in policy_names() if p not in EXCLUDED})
    ratios, fits, n_total = [], set(), 0
    for rt in runtimes:
        try:
            plan = resolve(RunSpec.of(policy=OURS, hardware=hw, model=model, draft=DRAFT, cache_ratio=0.0,
                                      runtime=rt)).plan
        except (ConfigError, ValueError):
            continue
        n_total = plan.n_experts_total
        if 0.8 * plan.max_ratio * n_total >= 1:
            ratios.append(plan.max_ratio)
            fits.add(rt)
    if SAME not in fits:
        return None, set()
    return min(0.3, 0.8 * min(ratios)), fits


def base_cells() -> list[dict]:
    """One dict per (machine, model) that fits: hardware, model, draft, cache ratio."""
    out = []
    for key, hw in MACHINES.items():
        for m in MODELS:
            r, fits = cache_ratio(hw, m)
            if r is not None:
                out.append(dict(hardware=hw, model=m, draft=DRAFT, cache_ratio=round(r, 4), runtimes=fits))
            else:
                print(f"cell {key} / {m} left out: {SAME} fits no expert slot beside the draft", file=sys.stderr)
    return out


def runs(gen: int, ablate: bool, own: bool = True) -> list[dict]:
    """Every run of the grid: all policies on ``custom_cuda`` (experiment ``cells:same``), those whose
    system has another runtime again on it (``cells:own``, unless ``own`` is false), and the ablations
    (``cells:abl:NAME``)."""
    from sim.policies.registry import policy_runtime
    names = [p for p in policy_names() if p not in EXCLUDED - {OURS}]
    own = [p for p in names if policy_runtime(p) != SAME] if own else []
    out = []
    for cell in base_cells():
        fits = cell.pop("runtimes")
        own_here = [p for p in own if policy_runtime(p) in fits]
        for w in WORKLOADS:
            common = dict(cell, workload=w, gamma=8, gen_tokens=gen, seed=0, prompt_tokens=256, context=4096)
            out += [dict(common, policy=p, runtime=SAME, experiment="cells:same") for p in names]
            out += [dict(common, policy=p, runtime=None, experiment="cells:own") for p in own_here]
            if ablate:
                out += [dict(common, policy=OURS, runtime=SAME, policy_args=a, experiment=f"cells:abl:{k}")
                        for k, a in ABLATIONS.items()]
    return out


def mode_rows(df: pd.DataFrame, mode: str) -> pd.DataFrame:
    """The rows of one comparison: ``same`` (all on custom_cuda) or ``own`` (each on its system's
    runtime: the ``cells:own`` rows, plus the ``cells:same`` rows of policies built on custom_cuda)."""
    same = df[df.experiment == "cells:same"]
    if mode == "same":
        return same
    own = df[df.experiment == "cells:own"]
    return pd.concat([own, same[~same.policy.isin(set(own.policy))]])


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell: the best other policy (none of ours), its tok/s, ours, ours / best, and ours / AdaSpec
    (ours too: the dynamic strategy spac_auto delegates to)."""
    out = []
    for (hw, m, w), g in rows.groupby(["hardware", "model", "workload"], sort=True):
        others = g[~g.policy.isin(EXCLUDED | OUR_OTHERS)].sort_values(["tps", "policy"], ascending=[False, True])
        ours = g[g.policy == OURS]
        ada = g[g.policy.isin(OUR_OTHERS)]
        if others.empty or ours.empty:
            continue
        best, tps = others.iloc[0], float(ours.tps.iloc[0])
        ada_tps = float(ada.tps.max()) if not ada.empty else np.nan
        out.append(dict(hardware=hw, model=m, workload=w, best=best.policy, best_tps=float(best.tps), ours_tps=tps,
                        ratio=tps / float(best.tps), vs_adaspec=tps / ada_tps,
                        choice=float(ours.get("auto_choice", pd.Series([np.nan])).iloc[0]),
                        switched=float(ours.get("auto_switched", pd.Series([np.nan])).iloc[0])))
    return pd.DataFrame(out)


def ablation_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per cell: ours with each decision switched off, as a fraction of ours with all on."""
    full = df[(df.experiment == "cells:same") & (df.policy == OURS)].set_index(["hardware", "model", "workload"]).tps
    out = pd.DataFrame(index=full.index)
    for k in ABLATIONS:
        part = df[df.experiment == f"cells:abl:{k}"].set_index(["hardware", "model", "workload"]).tps
        out[k] = (part / full).round(3)
    return out.reset_index()


def markdown(t: pd.DataFrame) -> str:
    """A markdown table (no extra dependency)."""
    cols = list(t.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in t.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines) + "\n"


def summary(t: pd.DataFrame) -> str:
    """Geometric mean of ours / best, the worst cell, and cells below 0.99."""
    gm = float(np.exp(np.log(t.ratio).mean()))
    ada = float(np.exp(np.log(t.vs_adaspec.dropna()).mean()))
    return (f"cells {len(t)}, geometric mean ours/best other {gm:.3f}, min {t.ratio.min():.3f}, "
            f"below 0.99: {int((t.ratio < 0.99).sum())}, at least 1: {int((t.ratio >= 1).sum())}; "
            f"ours/AdaSpec geometric mean {ada:.3f}, min {t.vs_adaspec.min():.3f}")


def figure(tables: dict, path: Path) -> None:
    """Ours / best other policy per cell, one panel per comparison."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(tables), 1, figsize=(14, 4 * len(tables)), squeeze=False)
    for ax, (mode, t) in zip(axes[:, 0], tables.items()):
        labels = [f"{h[:10]}/{m[:8]}/{w[:5]}" for h, m, w in zip(t.hardware, t.model, t.workload)]
        ax.bar(range(len(t)), t.ratio, color=["tab:green" if r >= 0.99 else "tab:red" for r in t.ratio])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(t)), labels, rotation=90, fontsize=6)
        ax.set_ylabel("ours / best other")
        ax.set_title(f"spac_auto / best other policy ({mode} runtime)")
    fig.tight_layout()
    from traces.atomic import save_png
    save_png(fig, path, dpi=110)


def bound_fraction(cell: dict) -> tuple[float, float, float]:
    """Ours against the LP bound (:mod:`sim.bound`) of its own run (schedule, slots, costs): ours /
    bound in tok/s, the fixed share of the bound's time, and ours' expert time over the bound's
    (both share the fixed time, so the whole gap is in the expert phases)."""
    from sim.bound.lp import decode_bound
    from sim.run.runner import run_one
    from sim.run.spec import RunSpec
    res = run_one(RunSpec.of(policy=OURS, runtime=SAME, **cell))
    e = res.engine
    b = decode_bound(e.cost, e.sched, e.ctx.n_slots, cell["prompt_tokens"])
    ours_expert = res.row["decode_s"] - b.fixed_s
    return res.row["tps"] / b.tps, b.fixed_s / b.decode_s, ours_expert / b.expert_s if b.expert_s > 0 else float("nan")


def add_bounds(t: pd.DataFrame, gen: int, workloads: list[str]) -> pd.DataFrame:
    """Columns ``of_bound`` (ours / LP bound, on runs of ``gen`` tokens: the LP grows with the run),
    ``bound_fixed`` and ``expert_vs_bound`` for the cells of ``workloads``."""
    from tqdm import tqdm
    cells = {(c["hardware"]["name"] if isinstance(c["hardware"], dict) else c["hardware"], c["model"]): c
             for c in base_cells()}
    cols = {"of_bound": [], "bound_fixed": [], "expert_vs_bound": []}
    for r in tqdm(list(t.itertuples()), desc="bounds", unit="cell"):
        got = (np.nan,) * 3
        if r.workload in workloads:
            cell = dict(cells[(r.hardware, r.model)], workload=r.workload, gamma=8, gen_tokens=gen, seed=0,
                        prompt_tokens=256, context=4096, experiment="cells:bound")
            cell.pop("runtimes")
            got = bound_fraction(cell)
        for k, v in zip(cols, got):
            cols[k].append(v)
    return t.assign(**cols)


def main() -> None:
    """Run (or resume) the grid, then write the tables, the figure and the ablations."""
    from traces.atomic import atomic_write_bytes
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ablate", action="store_true")
    ap.add_argument("--bound", action="store_true", help="ours against the LP bound (slow: per cell an LP)")
    ap.add_argument("--bound-gen", type=int, default=16, help="tokens of the runs the bound is solved for")
    ap.add_argument("--bound-workloads", default="alpaca", help="comma-separated workloads to bound")
    ap.add_argument("--tables-only", action="store_true", help="only the tables and figure from OUT_DIR's "
                    "rows (run ids carry the code version: after a commit a resumed grid would rerun)")
    ap.add_argument("--skip-own", action="store_true", help="leave out the own-runtime runs (cells:own)")
    ap.add_argument("--others", type=Path, help="run only ours (spac_auto, AdaSpec); the other policies' rows "
                    "come from this earlier OUT_DIR (their code unchanged)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    from sim.run.results import read_table
    todo = runs(a.gen, a.ablate, own=not a.skip_own)
    if a.others is not None:
        todo = [r for r in todo if r["policy"] in {OURS} | OUR_OTHERS]
    df = read_table(a.out / "results.parquet") if a.tables_only else execute(todo, a.out, n_jobs=a.jobs)
    if a.others is not None:
        prev = read_table(a.others / "results.parquet")
        df = pd.concat([df, prev[~prev.policy.isin({OURS} | OUR_OTHERS)]], ignore_index=True)
    tables = {mode: table(mode_rows(df, mode)) for mode in (("same",) if a.skip_own else ("same", "own"))}
    if a.bound:
        tables["same"] = add_bounds(tables["same"], a.bound_gen, a.bound_workloads.split(","))
    text = ""
    for mode, t in tables.items():
        text += f"## {mode} runtime\n\n{summary(t)}\n\n{markdown(t)}\n"
        print(f"{mode} runtime: {summary(t)}")
        print(t.to_string(index=False))
    atomic_write_bytes(a.out / "cells.md", lambda f: f.write(text.encode()))
    figure(tables, a.out / "ratios.png")
    if a.ablate:
        ab = ablation_table(df)
        gm = {k: float(np.exp(np.log(ab[k].dropna()).mean())) for k in ABLATIONS}
        line = "geometric mean of ours with the decision off / ours: " + ", ".join(f"{k} {v:.3f}" for k, v in gm.items())
        atomic_write_bytes(a.out / "ablations.md", lambda f: f.write((line + "\n\n" + markdown(ab)).encode()))
        print(ab.to_string(index=False))
        print(line)


if __name__ == "__main__":
    main()
