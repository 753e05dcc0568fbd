"""Every (machine, model, workload) cell: AdaSpec against every other registered policy.

    PYTHONPATH=. python scripts/speculation_cells.py OUT_DIR [gen_tokens] [n_jobs] [runtime]

Writes OUT_DIR/results.parquet (one row per run) and prints, per cell, the best other policy and
AdaSpec's ratio to it. The heuristic oracles know the future and are left out of "other".
``runtime`` (a conf/runtime name) puts every policy on the same implementation, so the cells
compare policies only; without it each policy runs on its system's runtime (as the sweep does).
"""
from __future__ import annotations

import sys
from pathlib import Path

from sim.policies import policy_names
from sim.run.sweep import execute

# (machine, model) -> (draft, cache_ratio): the paper's setting (Q8_0 4B draft, 17%); Mixtral with a
# 0.6B-sized draft at 12% (what fits beside it on 24 GB); the 8 GB laptop with the 0.6B draft at
# 80% of the largest ratio that fits.
CELLS = {("rtx4090_pcie4", "qwen3_30b_a3b"): ("qwen3_4b_q8_0", 0.17),
         ("rtx3090_ddr4", "qwen3_30b_a3b"): ("qwen3_4b_q8_0", 0.17),
         ("laptop_rtx4060_pcie4", "qwen3_30b_a3b"): ("qwen3_0_6b", 0.02),
         ("rtx4090_pcie4", "mixtral_8x7b"): ("qwen3_0_6b", 0.12),
         ("rtx3090_ddr4", "mixtral_8x7b"): ("qwen3_0_6b", 0.12),
         ("laptop_rtx4060_pcie4", "mixtral_8x7b"): ("qwen3_0_6b", 0.012)}
WORKLOADS = ["gsm8k", "alpaca", "qa", "cnn_dm", "mt_bench", "humaneval", "mmlu_pro"]
ORACLES = {"heuristic_oracle", "heuristic_oracle_ar"}


def runs(gen_tokens: int, runtime: str | None = None) -> list[dict]:
    out = []
    for (hw, model), (draft, ratio) in CELLS.items():
        for w in WORKLOADS:
            for p in policy_names():
                if p in ORACLES:
                    continue
                out.append(dict(policy=p, workload=w, hardware=hw, model=model, draft=draft, cache_ratio=ratio,
                                gamma=8, gen_tokens=gen_tokens, seed=0, experiment="speculation_cells",
                                prompt_tokens=256, context=4096, acceptance=None, runtime=runtime))
    return out


def table(df):
    rows = []
    for (hw, m, w), g in df.groupby(["hardware", "model", "workload"]):
        other = g[g.policy != "adaspec"].sort_values("tps", ascending=False).iloc[0]
        ours = float(g[g.policy == "adaspec"].tps.iloc[0])
        rows.append((hw, m, w, other.policy, round(float(other.tps), 3), round(ours, 3), round(ours / other.tps, 3)))
    return rows


if __name__ == "__main__":
    out = Path(sys.argv[1])
    gen = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    runtime = sys.argv[4] if len(sys.argv) > 4 else None
    execute(runs(gen, runtime), out, n_jobs=jobs)
    import pandas as pd
    df = pd.read_parquet(out / "results.parquet")   # all rows (AdaSpec's gamma is its maximum, 12)
    for r in table(df):
        print(*r, sep="\t")
