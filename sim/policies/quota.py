"""Per-layer slot quotas for policies whose cache is split by layer (MixtralOffload, HybriMoE).

Both systems give every MoE layer its own k expert buffers and evict within the layer. The
executor here pins the whole computing layer, so a demand fetch into a full layer cannot evict a
sibling of that layer; it borrows a slot from a donor layer instead (the one most over its quota,
ties: the layer that ran most recently, whose next use is farthest). The borrower gives the slot
back the next time it must evict while it is over quota and not pinned (usually at its next-layer
prefetch). So per-layer occupancy stays within a slot or two of the quota.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def even_quotas(n_layers: int, n_experts: int, n_slots: int) -> np.ndarray:
    """``n_slots`` split evenly over layers (the first ``n_slots % n_layers`` layers get one more),
    capped at ``n_experts`` per layer."""
    base, extra = divmod(n_slots, n_layers)
    quota = np.full(n_layers, base, dtype=int)
    quota[:extra] += 1
    return np.minimum(quota, n_experts)


def quota_victim(layer: int, cache, quota: np.ndarray, current_layer: int,
                 pick: Callable[[int], tuple[int, int] | None]) -> tuple[int, int] | None:
    """Victim for a transfer into ``layer`` under per-layer quotas.

    ``pick(l)`` returns the layer's own eviction candidate (already eligible: resident, unpinned)
    or None. The layer evicts from itself when it is at or over quota and not pinned; otherwise a
    donor layer gives a slot (see the module docstring).
    """
    usage = cache.resident.sum(axis=1) + cache.inflight.sum(axis=1)
    if usage[layer] >= quota[layer] and not cache.pinned[layer]:
        own = pick(layer)
        if own is not None:
            return own
    n = len(quota)
    behind = (current_layer - np.arange(n)) % n       # 1 = ran just before the current layer
    behind = np.where(behind == 0, n, behind)
    surplus = usage - quota
    for donor in np.lexsort((behind, -surplus)):
        if donor == layer or cache.pinned[donor]:
            continue
        cand = pick(int(donor))
        if cand is not None:
            return cand
    return None
