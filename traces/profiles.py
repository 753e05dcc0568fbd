"""Model classes for the synthetic generator: shape and calibrated routing profile.

Every number is either measured on real routing (gajsanders
Qwen3-30B-A3B, everett6 Qwen3-30B-A3B, Mario928 Mixtral-8x7B) or a stated assumption:

* ``reuse_anchors``: (layer, next-token reuse) points of the per-layer reuse profile, linearly
  interpolated, as measured on the profile's own workloads. A workload preset scales it by its
  Qwen3 domain overlap over ``domain_overlap`` (the overlap of the profile's own domain type:
  general for Qwen3, the mean of coding and math for the Mixtral HumanEval + GSM8K trace), and the
  non-uniformity ``1 - entropy`` likewise by ``(1 - preset entropy) / (1 - domain_entropy)``.
  Qwen3: the anchors measured by gajsanders (L0 7.9%, L6 56.2%, L7 59.7%, L18 55.6%, L19 54.0%,
  L30 54.0%, L31 57.7%, L47 20.6%) plus dips at L10-14, L24 and L38 where everett6's per-layer curve
  is lowest, placed so that the mean is 42.7%. Mixtral: per-layer statistics we computed on the Mario928/speculative-moe trace (docs/sources.md).
  DeepSeek-V2-Lite (no public per-token routing): Qwen3's shape at 85% of its height, because shared
  experts lower local routing consistency (Liang et al., arXiv 2505.16056); an assumption.
* ``entropy_anchors``: (layer, normalized popularity entropy) shape; it is shifted so its mean is
  ``ref_entropy``. Qwen3: L0 87.5% (max), L18 74.0% (min), deeper layers flatter (everett6).
  Mixtral: the Mario928/speculative-moe trace (docs/sources.md). DeepSeek-V2-Lite: Qwen3's shape around 0.80, an assumption (64
  coarser experts, top-6; OLMoE's 64 experts measure 0.83-0.99).
* ``ws_mult``, ``ws_weight``, ``ws_beta``: size (in multiples of k), share of fresh draws and
  popularity tilt of a segment's working set; ``chance_gain`` corrects the analytic chance-overlap
  estimate. These are fitted so the LRU hit rates at 8/16/32 (Qwen3) and 2/3/4 slots (Mixtral) match
  the measured ones (see ``tests/traces/test_calibration.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class ModelClass:
    """Shape and routing profile of one MoE model class."""

    name: str
    hf_name: str
    n_layers: int
    n_experts: int
    top_k: int
    dense_layers: tuple[int, ...]
    shared_experts: int
    reuse_anchors: tuple[tuple[int, float], ...]
    entropy_anchors: tuple[tuple[int, float], ...]
    ref_entropy: float  # mean normalized entropy of the profile's own workloads
    domain_overlap: float  # Qwen3 overlap of the domain type(s) the profile was measured on
    domain_entropy: float  # Qwen3 entropy of the same domain type(s)
    ws_mult: float
    ws_weight: float
    ws_beta: float
    chance_gain: float

    def reuse_profile(self) -> np.ndarray:
        """Target next-token reuse per layer for the reference workload, float [L]."""
        return _interp(self.reuse_anchors, self.n_layers)

    def entropy_profile(self) -> np.ndarray:
        """Target normalized popularity entropy per layer for the reference workload, float [L]."""
        shape = _interp(self.entropy_anchors, self.n_layers)
        return shape - shape.mean() + self.ref_entropy


def _interp(anchors, n: int) -> np.ndarray:
    x, y = zip(*anchors)
    return np.interp(np.arange(n), np.array(x) * (n - 1) / max(x), y)


_QWEN3_REUSE = ((0, .079), (1, .29), (3, .45), (6, .562), (7, .597), (10, .41), (14, .38), (18, .556),
                (19, .54), (24, .34), (30, .54), (31, .577), (38, .36), (44, .40), (46, .28), (47, .206))
_QWEN3_ENTROPY = ((0, .875), (3, .76), (8, .745), (18, .740), (26, .78), (34, .785), (42, .765), (47, .775))

MODELS: dict[str, ModelClass] = {
    "qwen3_30b_a3b": ModelClass(
        "qwen3_30b_a3b", "Qwen/Qwen3-30B-A3B", 48, 128, 8, (), 0,
        _QWEN3_REUSE, _QWEN3_ENTROPY, ref_entropy=0.765, domain_overlap=0.427, domain_entropy=0.765,
        ws_mult=1.0, ws_weight=0.3, ws_beta=1.0, chance_gain=1.02),
    "deepseek_v2_lite": ModelClass(
        "deepseek_v2_lite", "deepseek-ai/DeepSeek-V2-Lite", 26, 64, 6, (0,), 2,
        tuple((l, 0.85 * r) for l, r in _QWEN3_REUSE), _QWEN3_ENTROPY,
        ref_entropy=0.80, domain_overlap=0.427, domain_entropy=0.765,  # assumed, see above
        ws_mult=1.0, ws_weight=0.3, ws_beta=1.0, chance_gain=1.02),
    "mixtral_8x7b": ModelClass(
        "mixtral_8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1", 32, 8, 2, (), 0,
        ((0, .259), (4, .364), (8, .378), (9, .45), (12, .417), (14, .44), (15, .44), (16, .355),
         (20, .432), (24, .403), (28, .352), (31, .296)),
        ((0, .991), (4, .994), (8, .987), (12, .987), (16, .992), (20, .976), (24, .978), (28, .992),
         (31, .988)),
        ref_entropy=0.988, domain_overlap=0.406, domain_entropy=0.8025,
        ws_mult=1.5, ws_weight=0.35, ws_beta=1.0, chance_gain=1.12),
}


def assumed_class(name: str, n_layers: int, n_experts: int, top_k: int, dense_layers: tuple = (),
                  shared_experts: int = 0) -> ModelClass:
    """A model class for a routing shape no trace was measured on: an assumption, stated in the
    trace's ``meta.routing_assumed``.

    The routing profile (per-layer reuse and entropy shapes, stretched to ``n_layers``; working-set
    size, weight and tilt) is taken from the calibrated class of the nearest expert granularity
    ``top_k / n_experts``: Mixtral-8x7B (2/8 = 0.25) when it is at least 0.125, Qwen3-30B-A3B
    (8/128 = 0.0625) below. With shared experts the reuse is lowered to 85%, as for DeepSeek-V2-Lite
    (Liang et al., arXiv 2505.16056: shared experts lower local routing consistency)."""
    base = MODELS["mixtral_8x7b"] if top_k / n_experts >= 0.125 else MODELS["qwen3_30b_a3b"]
    reuse = tuple((l, 0.85 * r) for l, r in base.reuse_anchors) if shared_experts else base.reuse_anchors
    return replace(base, name=name, hf_name=name, n_layers=n_layers, n_experts=n_experts, top_k=top_k,
                   dense_layers=tuple(dense_layers), shared_experts=shared_experts, reuse_anchors=reuse)


def routing_assumption(mc: ModelClass) -> dict | None:
    """What a trace of ``mc`` assumes (None for a calibrated class)."""
    if mc.name in MODELS and MODELS[mc.name] == mc:
        return None
    base = "mixtral_8x7b" if mc.top_k / mc.n_experts >= 0.125 else "qwen3_30b_a3b"
    return {"basis": base, "shared_expert_reuse_factor": 0.85 if mc.shared_experts else 1.0,
            "note": "no measured routing for this model: popularity skew, reuse and working sets are the "
                    f"calibrated {base} profile stretched to {mc.n_layers} layers (traces.profiles.assumed_class)"}


def model_class(name: str) -> ModelClass:
    """The :class:`ModelClass` called ``name``; unknown names list the valid ones."""
    if name not in MODELS:
        raise KeyError(f"unknown model class {name!r}; valid: {', '.join(sorted(MODELS))}")
    return MODELS[name]
