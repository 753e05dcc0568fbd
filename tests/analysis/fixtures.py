"""Synthetic result rows matching the result-row schema (sim.run.results.REQUIRED), for analysis tests and notebooks.

The TPS values are made up (close to the paper's averages) and deterministic; only the shape of
the data matters to the analysis code.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.names import WORKLOADS

BASE_TPS = {"moespac": 24.0, "llamacpp_sd": 18.0, "llamacpp": 15.0, "accelerate": 2.0, "vllm": 3.0,
            "mixtral_offload": 6.0, "moe_infinity": 3.6, "sp_moe": 4.7, "fate": 7.0, "hybrimoe": 12.0,
            "heuristic_oracle": 40.0, "heuristic_oracle_ar": 20.0, "moespac_static": 21.0, "moespac_no_estimator": 20.0,
            "moespac_no_balancer": 19.0, "moespac_sync": 17.0, "moespac_ar": 14.0}
AR = {"llamacpp", "accelerate", "vllm", "mixtral_offload", "moe_infinity", "fate", "hybrimoe", "heuristic_oracle_ar",
      "moespac_ar"}
N_LAYERS = 48


def row(experiment: str, policy: str, workload: str, *, tps: float | None = None, cache_ratio: float = 0.17,
        gamma: int = 8, gen_tokens: int = 512, hardware: str = "rtx4090_pcie4", model: str = "qwen3_30b_a3b",
        seed: int = 0) -> dict:
    """One result row with every required column and the optional ones the report reads."""
    wl = WORKLOADS.index(workload) if workload in WORKLOADS else 0
    tps = BASE_TPS.get(policy, 10.0) * (1 + 0.03 * (wl - 3)) if tps is None else tps
    g = 0 if policy in AR else gamma
    decode = gen_tokens / tps
    r = {"experiment": experiment, "policy": policy, "model": model, "draft": "none" if g == 0 else "qwen3_4b_fp8",
         "hardware": hardware, "workload": workload, "cache_ratio": cache_ratio, "gamma": g,
         "gen_tokens": gen_tokens, "seed": seed, "decode_s": decode, "tps": tps, "ttft_s": float("nan"),
         "mean_accepted": 0.0 if g == 0 else 4.5, "hit_rate": 0.5, "cpu_expert_share": 0.4, "pcie_gb": 3.0,
         "pcie_util": 0.3, "gpu_busy": 0.5, "cpu_busy": 0.6, "bubble_s": 0.1 * decode,
         "prefetch_precision": 0.7, "prefetch_recall": 0.6, "sim_wall_s": 0.1, "n_steps": 100,
         "n_transfers": 300, "step_ms_mean": 20.0, "n_slots": 1044, "source": "sim"}
    if policy.startswith("moespac"):
        layers = list(np.linspace(0.7, 0.9, N_LAYERS) - 0.01 * wl)
        r.update(hot_precision=float(np.mean(layers)), hot_recall=0.6, hot_precision_by_layer=layers,
                 hot_per_layer=20.0, tau_mean=2.0)
    return r


def synthetic_results(sweeps: bool = True) -> pd.DataFrame:
    """paper_qwen3 rows (17 policies x 7 workloads), the sweeps and a DeepSeek-V2-Lite table."""
    rows = [row("paper_qwen3", p, w) for p in BASE_TPS for w in WORKLOADS]
    if sweeps:
        for c in (0.05, 0.1, 0.17, 0.3, 0.5):
            rows += [row("sweep_cache_ratio", p, "gsm8k", tps=BASE_TPS[p] * (1 + c), cache_ratio=c,
                         hardware="rtx4090_pcie4[vram_gib=48.0]") for p in ("moespac", "llamacpp_sd", "heuristic_oracle")]
        for g in (1, 4, 8, 12):
            rows += [row("sweep_gamma", p, "gsm8k", tps=BASE_TPS[p] * (1 + g / 20), gamma=g)
                     for p in ("moespac", "llamacpp_sd", "llamacpp")]
        for n in (128, 512, 2048):
            rows += [row("sweep_gen_length", p, "mt_bench", gen_tokens=n) for p in ("moespac", "llamacpp_sd")]
        for b in (12.5, 25.0, 50.0):
            rows += [row("sweep_pcie", p, "gsm8k", tps=BASE_TPS[p] * b / 25,
                         hardware=f"rtx4090_pcie4[pcie_h2d_gbs={b}]") for p in ("moespac", "llamacpp_sd")]
        for h in ("rtx4090_pcie4", "h200_pcie5"):
            rows += [row("sweep_hardware", p, "gsm8k", hardware=h) for p in ("moespac", "llamacpp_sd")]
        rows += [row("paper_dsv2lite", p, w, model="deepseek_v2_lite", tps=t * (1 + 0.1 * i))
                 for i, w in enumerate(("mt_bench", "humaneval", "cnn_dm"))
                 for p, t in (("moespac", 45.0), ("llamacpp_sd", 30.0), ("hybrimoe", 25.0), ("heuristic_oracle", 60.0))]
    return pd.DataFrame(rows)


def write_results(folder: Path, sweeps: bool = True) -> Path:
    """Write the synthetic rows to ``folder/results.parquet``; returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.parquet"
    synthetic_results(sweeps).to_parquet(path, index=False)
    return path
