"""The per-layer prefill decision: copy the touched host experts to the GPU, or compute them on the CPU.

Pure decision objects (no clock, no SimPy, no torch): given the micro-batch's size and, per touched
expert held in host memory / in VRAM, its token count, a rule answers True (copy, then compute on
the GPU) or False (compute the host experts on the CPU; resident ones stay on the GPU).

* :class:`TokenThreshold` ``llamacpp``: llama.cpp offloads an operation on host weights to the GPU
  when its batch has at least 32 tokens (``ggml/src/ggml-cuda/ggml-cuda.cu``,
  ``ggml_backend_cuda_device_offload_op``, ``min_batch_size = 32``); a maintainer notes the right
  value "will depend on the speed of the CPU, the GPU, and the PCI-E bandwidth"
  (reference/user-needs.md need 5).
* :class:`TokenThreshold` ``ik_llama``: ik_llama.cpp's MoE form, ``N_b >= N_tot / N_A * 32``
  (github.com/ikawrakow/ik_llama.cpp PR #520).
* :class:`TokenThreshold` ``ktransformers``: kTransformers' ``--kt-gpu-prefill-token-threshold``
  (KT-Kernel docs); its default is not in our sources, so ``prefill_threshold`` (default 1024) sets it.
* :class:`CostOptimal`: the cheaper choice by :class:`sim.prefill.costs.PrefillCosts`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.machine.vram.llamacpp import OFFLOAD_MIN_BATCH
from sim.prefill.costs import PrefillCosts

LLAMACPP_MIN_BATCH = OFFLOAD_MIN_BATCH
KT_DEFAULT_THRESHOLD = 1024
RULES = ("auto", "llamacpp", "ik_llama", "ktransformers", "optimal", "cpu", "gpu")
AUTO = {"llamacpp": "llamacpp", "llamacpp_sd": "llamacpp", "ktransformers": "ktransformers"}


@dataclass(frozen=True)
class TokenThreshold:
    """Copy when the micro-batch has at least ``min_tokens`` tokens (a fixed engine rule)."""

    name: str
    min_tokens: float

    def copy(self, n_tokens: int, host_n: np.ndarray, resident_n: np.ndarray, costs: PrefillCosts) -> bool:
        """True: copy the host experts and compute on the GPU; False: compute them on the CPU."""
        return n_tokens >= self.min_tokens


@dataclass(frozen=True)
class CostOptimal:
    """Copy when copying and computing on the GPU takes less time than computing on the CPU."""

    name: str = "optimal"

    def copy(self, n_tokens: int, host_n: np.ndarray, resident_n: np.ndarray, costs: PrefillCosts) -> bool:
        """True when :meth:`PrefillCosts.layer_s` of the copy is below that of the CPU choice."""
        return costs.layer_s(True, host_n, resident_n) < costs.layer_s(False, host_n, resident_n)


def make_rule(name: str, policy: str = "", n_experts: int = 1, top_k: int = 1,
              threshold: int = KT_DEFAULT_THRESHOLD, op_offload: bool = True):
    """The rule called ``name``; ``auto`` is the decode policy's engine rule (llama.cpp's for
    llamacpp*, or the CPU under ``--no-op-offload`` (``op_offload=False``); kTransformers' for
    ktransformers) and the cost-optimal choice for every other policy."""
    if name == "auto":
        name = AUTO.get(policy, "optimal")
        name = "cpu" if name == "llamacpp" and not op_offload else name
    if name == "llamacpp":
        return TokenThreshold("llamacpp", LLAMACPP_MIN_BATCH)
    if name == "ik_llama":
        return TokenThreshold("ik_llama", LLAMACPP_MIN_BATCH * n_experts / max(1, top_k))
    if name == "ktransformers":
        return TokenThreshold("ktransformers", threshold)
    if name == "cpu":
        return TokenThreshold("cpu", float("inf"))
    if name == "gpu":
        return TokenThreshold("gpu", 0)
    if name == "optimal":
        return CostOptimal()
    raise ValueError(f"prefill_rule={name}: must be one of {', '.join(RULES)}")
