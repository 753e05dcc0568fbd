"""HF Accelerate module offload: whole layers move to the GPU when they run."""
from __future__ import annotations

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, evictable_mask, fetch_all_where
from sim.policies.recency import StampLRU
from sim.policies.static_sets import layer_experts, whole_layers


class AccelerateOffload(OffloadPolicy):
    """Accelerate ``device_map="auto"`` with CPU offload (AR, all compute on the GPU).

    Mechanism (github.com/huggingface/accelerate, ``dispatch_model`` + ``AlignDevicesHook(offload=
    True)``): the device map fills the GPU in module order, so the first layers stay resident; an
    offloaded layer's weights, its whole expert tensor included, are copied to the GPU in the
    layer's pre-forward hook and dropped after it, whether or not a token routes to them. Here the
    budget holds ``n_slots // n_experts`` whole layers: the first ones are static, the last
    ``buffer_layers`` are the staging area of offloaded layers. A non-resident layer requests all
    its absent experts: the routed ones as demand fetches, the others as ``extra_fetch``. The
    staging slots are managed LRU over layers (all experts of a layer are used together, so LRU
    over experts is LRU over layers); static layers are never evicted. When a whole layer does not
    fit in the staging slots, only as many extra experts are fetched as fit. The layer's experts
    move as one block copy (``Placement.bulk``): one latency, then all the bytes.

    Parameters:
        buffer_layers: layers' worth of slots used as the staging area (default 1: the hook
            materialises one module at a time).
    """

    speculative = False

    def __init__(self, buffer_layers: int = 1):
        self.buffer_layers = buffer_layers

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        whole = ctx.n_slots // ctx.n_experts if ctx.n_experts else 0
        n_static = max(0, min(ctx.n_layers, whole) - self.buffer_layers)
        self.static_layers = set(whole_layers(ctx.n_layers, ctx.n_experts, n_static * ctx.n_experts, "first"))
        self.staging = ctx.n_slots - n_static * ctx.n_experts
        self.lru = StampLRU(ctx.n_layers, ctx.n_experts)
        self.staged_mask = np.ones((ctx.n_layers, ctx.n_experts), dtype=bool)
        self.staged_mask[sorted(self.static_layers)] = False

    def initial_residency(self) -> list[tuple[int, int]]:
        return layer_experts(sorted(self.static_layers), self.ctx.n_experts)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        where = fetch_all_where(cache, layer, counts)
        req = counts > 0
        resident = cache.resident[layer]
        extra = ()
        if layer not in self.static_layers:
            present = resident | cache.inflight[layer]
            room = self.staging - int(np.count_nonzero(present)) - int(np.count_nonzero(req & ~present))
            extra = (~(present | req)).nonzero()[0][: max(0, room)]     # ids, as an array
            self.lru.touch(layer, resident.nonzero()[0])
        return Placement(where, extra_fetch=extra, bulk=True)

    def victim(self, layer: int, expert: int, cache, demand: bool):
        found = self.lru.oldest(evictable_mask(cache) & self.staged_mask)
        return found if found is not None else self.refuse(demand)

    def victims(self, layer: int, n: int, cache):
        """Up to ``n`` victims at once for a block copy (the staged experts, least recent first)."""
        return self.lru.oldest_n(evictable_mask(cache) & self.staged_mask, n)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self.lru.touch(layer, expert)

    def on_transfers_done(self, layer: int, experts, cache) -> None:
        """A block copy landed: the layer's experts are used now, in id order."""
        self.lru.touch(layer, np.sort(np.asarray(experts)))
