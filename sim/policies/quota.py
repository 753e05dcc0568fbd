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


_NEVER = np.iinfo(np.int64).max   # a donor key that is never chosen


def even_quotas(n_layers: int, n_experts: int, n_slots: int) -> np.ndarray:
    """``n_slots`` split evenly over layers (the first ``n_slots % n_layers`` layers get one more),
    capped at ``n_experts`` per layer."""
    base, extra = divmod(n_slots, n_layers)
    quota = np.full(n_layers, base, dtype=int)
    quota[:extra] += 1
    return np.minimum(quota, n_experts)


def layer_usage(cache) -> np.ndarray:
    """``[L]`` slots used per layer (resident + in flight)."""
    used = cache.resident | cache.inflight
    if used.shape[1] % 8 == 0 and used.flags.c_contiguous:
        return np.bitwise_count(used.view(np.uint64)).sum(axis=1, dtype=np.int64)  # a byte (0 or 1) per expert
    return used.sum(axis=1, dtype=np.int64)


class QuotaVictims:
    """The quota victim rule for fixed ``quota``, with the donor order's static part precomputed.

    Donors go most over quota first, then the one that ran most recently. ``behind`` (1 = ran
    just before the current layer, ..., n = the current layer) is a permutation of 1..n, so the
    integer key ``(quota - usage) * (n + 1) + behind`` orders exactly as
    ``lexsort((behind, -surplus))``; its quota and behind part is a table over current layers.
    """

    def __init__(self, quota: np.ndarray) -> None:
        self.quota = np.asarray(quota, dtype=np.int64)
        n = len(self.quota)
        behind = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
        behind[behind == 0] = n
        self._scale = n + 1
        self._base = self.quota[None, :] * self._scale + behind      # [current layer, layer]
        self._quota = self.quota.tolist()                             # as ints, for the own-layer test

    def victim(self, layer: int, cache, current_layer: int,
               pick: Callable[[int], tuple[int, int] | None]) -> tuple[int, int] | None:
        """Victim for a transfer into ``layer`` under per-layer quotas.

        ``pick(l)`` returns the layer's own eviction candidate (already eligible: resident,
        unpinned) or None. The layer evicts from itself when it is at or over quota and not
        pinned; otherwise a donor layer gives a slot (see the module docstring)."""
        if not cache.pinned.item(layer):
            own_usage = np.count_nonzero(cache.resident[layer]) + np.count_nonzero(cache.inflight[layer])
            if own_usage >= self._quota[layer]:
                own = pick(layer)
                if own is not None:
                    return own
        key = self._base[current_layer] - layer_usage(cache) * self._scale
        never = _NEVER
        key[cache.pinned] = never
        key[layer] = never
        while True:
            donor = int(key.argmin())
            if key[donor] == never:
                return None
            cand = pick(donor)
            if cand is not None:
                return cand
            key[donor] = never
