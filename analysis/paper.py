"""The published numbers of MoE-SpAc (arXiv 2603.09983), each with its source and evidence grade.

Grades follow docs/sources.md: P primary (the authors), S secondary (summaries that
read the PDF), T tertiary (leaderboard rows scraped from the paper's tables), D derived by us.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    """One published number: its value, where it comes from and how sure we are of it."""

    value: float
    source: str
    grade: str


_S1 = "S1 (structured summary of the paper; docs/sources.md)"
_T1 = "T1 (wizwand leaderboard rows, 10-entry boards; docs/sources.md)"

# Average TPS over the seven benchmarks, Qwen3-30B-A3B on one RTX 4090 (docs/sources.md).
AVG_TPS = {
    "moespac": Published(25.06, _S1, "S"),
    "llamacpp_sd": Published(17.66, _S1, "S"),
    "llamacpp": Published(15.23, _S1, "S"),
    "hybrimoe": Published(12.15, _S1, "S"),
    # Only four of the seven benchmarks are published for these two; their mean stands in for the
    # seven-benchmark average ("about 4.7" and "about 3.6" in the text).
    "sp_moe": Published(round((4.46 + 4.98 + 4.75 + 4.38) / 4, 3), _T1 + ", mean of 4 benchmarks", "T/D"),
    "moe_infinity": Published(round((3.64 + 3.63 + 3.64 + 3.56) / 4, 3), _T1 + ", mean of 4 benchmarks", "T/D"),
}

# Per-benchmark TPS (Qwen3-30B-A3B), docs/sources.md. MoE-SpAc's CNN/DM row (50.17) is most likely
# the DeepSeek-V2-Lite table and is left out here.
PER_WORKLOAD_TPS = {
    ("moespac", "mt_bench"): Published(24.1, _T1, "T"),
    ("moespac", "humaneval"): Published(28.24, _T1, "T"),
    ("moespac", "mmlu_pro"): Published(25.8, _T1, "T"),
    ("sp_moe", "mt_bench"): Published(4.46, _T1, "T"),
    ("sp_moe", "humaneval"): Published(4.98, _T1, "T"),
    ("sp_moe", "mmlu_pro"): Published(4.75, _T1, "T"),
    ("sp_moe", "cnn_dm"): Published(4.38, _T1, "T"),
    ("moe_infinity", "mt_bench"): Published(3.64, _T1, "T"),
    ("moe_infinity", "humaneval"): Published(3.63, _T1, "T"),
    ("moe_infinity", "mmlu_pro"): Published(3.64, _T1, "T"),
    ("moe_infinity", "cnn_dm"): Published(3.56, _T1, "T"),
}

# Headline claims.
SPEEDUP_OVER_SD = Published(1.42, "abstract (+42% over the SOTA SD baseline) [P]; 25.06/17.66 = 1.419 [S1]", "P")
SPEEDUP_OVER_STANDARD = Published(4.04, "abstract: 4.04x average speedup over all standard baselines [P]", "P")
HOT_PRECISION = Published(0.85, "S3: hot/cold prediction accuracy about 85% on MMLU-Pro, layer 47 "
                                "(not corroborated; docs/sources.md)", "S")
HOT_PRECISION_WORKLOAD = "mmlu_pro"
HOT_PRECISION_LAYER = 47

# DeepSeek-V2-Lite: MoE-SpAc's TPS gain over the strongest baseline per benchmark (docs/sources.md).
DSV2_GAIN = {
    "mt_bench": Published(0.53, "S1: +53.0% TPS on MT-Bench over the strongest baselines", "S"),
    "humaneval": Published(0.55, "S1: +55.0% TPS on HumanEval over the strongest baselines", "S"),
    "cnn_dm": Published(0.51, "S1: +51.0% TPS on CNN/DM over the strongest baselines", "S"),
}
# MoE-SpAc's DeepSeek-V2-Lite TPS, if the 3- and 6-entry and 13-entry boards are that table
# (an inference of docs/sources.md, speculative).
DSV2_MOESPAC_TPS = {
    "mt_bench": Published(47.1, _T1 + " (3-entry board; DS-V2-Lite inferred)", "T/D"),
    "humaneval": Published(47.26, _T1 + " (6-entry board; DS-V2-Lite inferred)", "T/D"),
    "cnn_dm": Published(50.17, _T1 + " (13-entry board; DS-V2-Lite inferred)", "T/D"),
}

QWEN3_MODEL = "qwen3_30b_a3b"
DSV2_MODEL = "deepseek_v2_lite"


def implied_unpublished_mean_speedup(n_baselines: int = 9) -> float:
    """What 4.04x implies for the baselines without a published average (arithmetic mean) [D].

    4.04 x 9 is the sum of MoE-SpAc's speedups over the nine baselines; subtracting those implied
    by the published averages leaves the mean speedup over the rest.
    """
    known = [AVG_TPS["moespac"].value / p.value for k, p in AVG_TPS.items() if k != "moespac"]
    rest = n_baselines - len(known)
    return (SPEEDUP_OVER_STANDARD.value * n_baselines - sum(known)) / rest
