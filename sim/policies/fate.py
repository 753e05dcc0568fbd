"""Fate: cross-layer gate prediction of the next layer's experts, with an ARC expert cache."""
from __future__ import annotations

import numpy as np

from sim.policies.arc import ARC
from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, fetch_all_where, requested
from sim.policies.prefetch_queue import PrefetchQueue


class Fate(OffloadPolicy):
    """Next-layer prefetch from the previous layer's gate input, ARC cache, fetch on miss, GPU (AR).

    Mechanism (Fate, arXiv 2502.12224; no public code found): the gate input of layer ``l`` is fed
    to the gate of layer ``l+1`` to predict its experts (about 97% accurate on Qwen1.5-MoE and
    DeepSeekMoE); the predicted experts are prefetched while layer ``l`` computes (here
    ``signals.next_pred``, most predicted first; entries of a layer are dropped when it starts).
    Residency is managed by ARC over one pool of ``n_slots`` (:class:`sim.policies.arc.ARC`:
    requests of resident experts are ARC hits, every transfer is an ARC admission, victims come
    from ARC's REPLACE, restricted to evictable experts). Misses are demand-fetched; all experts
    run on the GPU. Not modelled: Fate's shallow-favouring slot split and its INT2/INT4
    popularity-aware quantisation (the cost model has one precision).

    Parameters:
        next_layer_accuracy: accuracy of the cross-layer prediction when the trace records none
            (the executor reads this attribute to synthesise ``next_pred``); default 0.97, Fate's
            reported prefetch accuracy on Qwen1.5-MoE and DeepSeekMoE (not measured on Qwen3).
    """

    speculative = False

    def __init__(self, next_layer_accuracy: float = 0.97):
        self.next_layer_accuracy = next_layer_accuracy

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self.arc = ARC(ctx.n_slots)
        self.queue = PrefetchQueue()

    def on_layer_start(self, layer: int, cache) -> None:
        self.queue.drop_layer(layer)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        arc = self.arc
        for e in requested(counts).tolist():
            if (layer, e) in arc:
                arc.hit((layer, e))
        where = fetch_all_where(cache, layer, counts)
        if signals.next_pred is not None and layer + 1 < self.ctx.n_layers:
            pred = np.asarray(signals.next_pred)
            guess = requested(pred)
            self.queue.push_absent(layer + 1, guess[np.lexsort((guess, -pred[guess]))], cache)
        return Placement(where)

    def next_transfer(self, cache):
        return self.offer(self.queue.pop(cache))

    def victim(self, layer: int, expert: int, cache, demand: bool):
        resident, pinned = cache.resident, cache.pinned
        ok, found = self.arc.miss((layer, expert), full=True,
                                  eligible=lambda k: resident[k] and not pinned[k[0]])
        if not ok:
            return self.refuse(demand)
        return found

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        if (layer, expert) not in self.arc:
            self.arc.miss((layer, expert), full=False)
