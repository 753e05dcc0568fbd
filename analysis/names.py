"""Policy display names and the groups the report compares (the paper's table, ablations, bounds)."""
from __future__ import annotations

DISPLAY = {
    "moespac": "MoE-SpAc",
    "llamacpp_sd": "llama.cpp-w/SD",
    "llamacpp": "llama.cpp",
    "accelerate": "Accelerate",
    "vllm": "vLLM",
    "mixtral_offload": "MixtralOffload",
    "moe_infinity": "MoE-Infinity",
    "sp_moe": "SP-MoE",
    "fate": "Fate",
    "hybrimoe": "HybriMoE",
    "fiddler": "Fiddler",
    "ktransformers": "kTransformers",
    "ondemand_lru": "on-demand LRU",
    "heuristic_oracle": "heuristic oracle (SD)",
    "heuristic_oracle_ar": "heuristic oracle (AR)",
    "adaspec": "AdaSpec (ours)",
    "moespac_static": "MoE-SpAc, authors' static preset",
    "moespac_no_estimator": "MoE-SpAc w/o estimator",
    "moespac_no_balancer": "MoE-SpAc w/o balancer",
    "moespac_sync": "MoE-SpAc w/o async engine",
    "moespac_ar": "MoE-SpAc w/o SD (gamma=0)",
}

MOESPAC = "moespac"
SD_BASELINE = "llamacpp_sd"
# The ten systems of the paper's Qwen3-30B-A3B table, in the paper's order of average TPS where
# published (docs/sources.md), then the rest.
PAPER_SYSTEMS = ("moespac", "llamacpp_sd", "llamacpp", "hybrimoe", "sp_moe", "moe_infinity",
                 "accelerate", "vllm", "mixtral_offload", "fate")
# "Standard baselines": the nine systems of the paper's table other than MoE-SpAc.
STANDARD_BASELINES = PAPER_SYSTEMS[1:]
# The clairvoyant heuristics (Belady eviction, next-use prefetch, best split; they know the future):
# printed apart from real policies. They are not bounds (sim/bound computes a true bound).
ORACLE_SD, ORACLE_AR = "heuristic_oracle", "heuristic_oracle_ar"
ORACLES = (ORACLE_SD, ORACLE_AR)
OLD_NAMES = {"oracle": ORACLE_SD, "oracle_ar": ORACLE_AR}   # their names in result files made before the rename


def canonical(policy: str) -> str:
    """A policy's current name (old result files call the heuristic oracles ``oracle``/``oracle_ar``)."""
    return OLD_NAMES.get(policy, policy)
ABLATIONS = ("moespac", "moespac_static", "moespac_no_estimator", "moespac_no_balancer", "moespac_sync",
             "moespac_ar")
# The seven benchmarks, in the paper's row order.
WORKLOADS = ("gsm8k", "alpaca", "qa", "cnn_dm", "mt_bench", "humaneval", "mmlu_pro")


def display_name(policy: str) -> str:
    """The human name of a policy (its config name when unknown)."""
    return DISPLAY.get(policy, policy)


def order_policies(policies) -> list[str]:
    """Paper systems first (paper order), then other baselines, oracles, ablations, the rest."""
    present = list(dict.fromkeys(policies))
    rank = {}
    for p in PAPER_SYSTEMS + tuple(d for d in DISPLAY if d not in ORACLES + ABLATIONS) + ORACLES + ABLATIONS:
        rank.setdefault(p, len(rank))
    return sorted(present, key=lambda p: (rank.get(p, len(rank)), p))


def order_workloads(workloads) -> list[str]:
    """The paper's seven benchmarks first, in its order, then any others alphabetically."""
    present = list(dict.fromkeys(workloads))
    rank = {w: i for i, w in enumerate(WORKLOADS)}
    return sorted(present, key=lambda w: (rank.get(w, len(rank)), w))
