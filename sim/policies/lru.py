"""On-demand fetching with one global LRU pool: the simple reference policy."""
from __future__ import annotations

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, fetch_all_where
from sim.policies.recency import LRUOrder


class OnDemandLRU(OffloadPolicy):
    """All experts run on the GPU; a miss is demand-fetched; eviction is least recently used.

    Mechanism: one pool of ``n_slots`` slots shared by all layers. An expert is "used" when a token
    routes to it (resident) or when it lands after a fetch; the victim is the least recently used
    expert that may be evicted (resident, its layer not computing). No prefetch, no CPU compute,
    autoregressive decoding. This is the textbook demand-paging baseline (the "MoE-OnDemand"
    baseline of Pre-gated MoE, ISCA'24, github.com/ranggihwang/Pregated_MoE), used here as the
    simplest reference point; it has no parameters.
    """

    speculative = False

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self.lru = LRUOrder(ctx.n_layers, ctx.n_experts)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        req = counts > 0
        resident = cache.resident[layer]
        self.lru.touch(layer, (req & resident).nonzero()[0])
        return Placement(fetch_all_where(cache, layer, counts))

    def victim(self, layer: int, expert: int, cache, demand: bool):
        found = self.lru.oldest_evictable(cache)
        return found if found is not None else self.refuse(demand)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self.lru.touch(layer, expert)
