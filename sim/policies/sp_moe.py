"""SP-MoE: speculative decoding with draft-predicted expert prefetch up to a cutoff layer."""
from __future__ import annotations

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, fetch_all_where
from sim.policies.prefetch_queue import PrefetchQueue
from sim.policies.recency import LRUOrder


class SPMoE(OffloadPolicy):
    """Draft-predicted prefetch during drafting, bounded by a cutoff layer; fetch on miss; GPU only.

    Mechanism (SP-MoE, arXiv 2510.10302; no public code found): while the draft model runs, the
    target's experts for the coming verify pass are predicted from the draft (here
    ``signals.draft_pred``, ``[L, E]`` predicted counts given at step start) and prefetched layer
    by layer, most predicted tokens first; prefetching stops at a cutoff layer so that the I/O
    issued ahead of time does not delay the verify pass; asynchronous, batched transfers overlap
    compute. Misses are demand-fetched; all experts run on the GPU; the cache is LRU over one pool
    (the paper's cache policy is not described in the sources; LRU is the common default). A
    prefetch never evicts an expert predicted for a layer of this verify pass that has not run
    yet. Queued entries of a layer are dropped when it starts. Without a draft prediction there is
    no prefetch.

    Cutoff (the paper derives it offline from profiles and an analytical latency model; here from
    the cost table, per step): the deepest layer ``c`` such that the predicted-but-absent experts
    of layers ``0..c-1``, transferred one after another from the start of drafting, all land
    before their layer runs, i.e. ``j * transfer_s <= draft_phase_s + l * layer_fixed_s`` for the
    j-th transfer, of layer ``l``. It grows with the draft phase and shrinks with the misses.

    Parameters:
        cutoff_layer: a fixed cutoff instead of the derived one (default null = derived).
        draft_accuracy: accuracy of the draft-based prediction when the trace records none (the
            executor reads this attribute to synthesise ``draft_pred``); default 0.88, SP-MoE's
            top-1 expert prediction accuracy of about 88-89% (source S3 in docs/sources.md).
    """

    speculative = True

    def __init__(self, cutoff_layer: int | None = None, draft_accuracy: float = 0.88):
        self.cutoff_layer = cutoff_layer
        self.draft_accuracy = draft_accuracy

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self.lru = LRUOrder(ctx.n_layers, ctx.n_experts)
        self.queue = PrefetchQueue()
        self.protect = np.zeros((ctx.n_layers, ctx.n_experts), dtype=bool)
        self.current = -1
        self._coming: np.ndarray | None = None   # protect, minus the layers already run
        self._cutoffs: list[int] = []

    def cutoff(self, pred: np.ndarray, cache) -> int:
        """The cutoff layer for this step's prediction (see the class docstring)."""
        if self.cutoff_layer is not None:
            return max(0, min(int(self.cutoff_layer), self.ctx.n_layers))
        c = self.ctx.costs
        absent = (pred > 0) & ~(cache.resident | cache.inflight)
        landed = 0.0
        for layer in range(self.ctx.n_layers):
            landed += int(absent[layer].sum()) * c.transfer_s
            if landed > c.draft_phase_s + layer * c.layer_fixed_s:
                return layer
        return self.ctx.n_layers

    def on_step_start(self, step: int, signals: Signals, cache) -> None:
        self.queue.clear()
        self.current = -1
        self._coming = None
        if signals.draft_pred is None:
            self.protect[:] = False
            return
        pred = np.asarray(signals.draft_pred)
        self.protect = pred > 0
        cut = self.cutoff(pred, cache)
        self._cutoffs.append(cut)
        self.queue.push_many(_queue_order(pred[:cut], cache.resident[:cut] | cache.inflight[:cut]))

    def on_layer_start(self, layer: int, cache) -> None:
        self.current = layer
        self._coming = None
        self.queue.drop_layer(layer)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        req = counts > 0
        resident = cache.resident[layer]
        self.lru.touch(layer, (req & resident).nonzero()[0])
        return Placement(fetch_all_where(cache, layer, counts))

    def next_transfer(self, cache):
        return self.offer(self.queue.pop(cache))

    def victim(self, layer: int, expert: int, cache, demand: bool):
        if self._coming is None:      # changes only with protect and current (the hooks above)
            self._coming = self.protect.copy()
            self._coming[: self.current + 1] = False
        found = self.lru.oldest_evictable(cache, avoid=self._coming, fallback=demand)
        return found if found is not None else self.refuse(demand)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self.lru.touch(layer, expert)

    def metrics(self) -> dict[str, float]:
        mean = float(np.mean(self._cutoffs)) if self._cutoffs else float("nan")
        return {**super().metrics(), "mean_cutoff_layer": mean}


def _queue_order(pred: np.ndarray, present: np.ndarray) -> list[tuple[int, int, tuple[int, int]]]:
    """``(layer, expert, key)`` of every predicted, absent expert of ``pred``'s layers, in push
    order: layer by layer, most predicted first (ties: expert id); the key is ``(layer, -count)``."""
    layers, experts = ((pred > 0) & ~present).nonzero()
    count = pred[layers, experts]
    order = np.lexsort((experts, -count, layers))
    return [(l, e, (l, -int(c))) for l, e, c in
            zip(layers[order].tolist(), experts[order].tolist(), count[order].tolist())]
