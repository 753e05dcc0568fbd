"""Static expert sets used by the static-placement policies (llama.cpp, vLLM, Accelerate,
Fiddler, kTransformers)."""
from __future__ import annotations

import numpy as np


def whole_layers(n_layers: int, n_experts: int, n_slots: int, which: str) -> list[int]:
    """Layers whose experts all fit in ``n_slots`` (``n_slots // n_experts`` of them), taken from
    the ``"first"`` or the ``"last"`` end of the model. Leftover slots (less than a layer) stay
    unused: these systems place a layer's expert tensor as one piece."""
    k = min(n_layers, n_slots // n_experts) if n_experts else 0
    if which == "first":
        return list(range(k))
    if which == "last":
        return list(range(n_layers - k, n_layers))
    raise ValueError(f"which must be 'first' or 'last', got {which!r}")


def layer_experts(layers, n_experts: int) -> list[tuple[int, int]]:
    """Every (layer, expert) of the given layers."""
    return [(int(l), e) for l in layers for e in range(n_experts)]


def most_popular(profile: np.ndarray | None, n_layers: int, n_experts: int, n: int,
                 seed: int) -> list[tuple[int, int]]:
    """The ``n`` most popular (layer, expert) pairs by ``profile`` (global greedy, as Fiddler and
    kTransformers' frequency strategy build their GPU masks). Ties, and the whole order when there
    is no profile, are broken by a permutation drawn from ``seed``."""
    n = max(0, min(n, n_layers * n_experts))
    pop = np.zeros(n_layers * n_experts) if profile is None else np.asarray(profile, float).ravel()
    tie = np.random.default_rng(seed).permutation(n_layers * n_experts)
    order = np.lexsort((tie, -pop))[:n]
    return [divmod(int(k), n_experts) for k in order]
