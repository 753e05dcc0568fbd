"""Mixtral-offloading: a per-layer LRU expert cache plus speculative loading of the next layer."""
from __future__ import annotations

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, fetch_all_where, requested
from sim.policies.prefetch_queue import PrefetchQueue
from sim.policies.quota import QuotaVictims, even_quotas
from sim.policies.recency import LayerLRUOrder


class MixtralOffload(OffloadPolicy):
    """Per-layer LRU with k slots per layer, fetch on miss, next-layer speculative loading (AR).

    Mechanism (Eliseev & Mazur, arXiv 2312.17238; github.com/dvmazur/mixtral-offloading,
    ``src/expert_cache.py``: one eviction group per layer, LRU ``choose_expert_to_evict``): every
    layer owns k GPU expert buffers (the slot budget split evenly, :func:`even_quotas`), filled at
    load time with the layer's last k experts by id (``build_model.py`` offloads
    ``expert_idx < offload_per_layer``); a requested expert not in the layer's cache
    is fetched and replaces the layer's least recently used one; all experts run on the GPU.
    Speculative loading: the next layer's gate applied to the current hidden state guesses its
    experts (here ``signals.next_pred``); the guessed experts not yet cached are queued for
    prefetch while the current layer computes, and the guessed ones already cached are marked
    used. Queued guesses for a layer are dropped when it starts. Without a prediction there is no
    prefetch. The executor pins a computing layer, so a demand fetch into a full layer borrows a
    slot from another layer (see :mod:`sim.policies.quota`).

    Parameters:
        n_prefetch: most guessed experts queued per layer, highest predicted count first
            (default null = every expert the prediction names; the paper loads the top guesses
            of the next layer's gate, i.e. top-k).
        next_layer_accuracy: accuracy of the guess when the trace records none (the executor
            reads this attribute to synthesise ``next_pred``); default 0.85, the middle of the
            ">80-90% correct prefetch" a secondary summary of the report gives (docs/sources.md; the
            repository lists speculative loading as not yet released).
    """

    speculative = False

    def __init__(self, n_prefetch: int | None = None, next_layer_accuracy: float = 0.85):
        self.n_prefetch = n_prefetch
        self.next_layer_accuracy = next_layer_accuracy

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self.quota = even_quotas(ctx.n_layers, ctx.n_experts, ctx.n_slots)
        self.donors = QuotaVictims(self.quota)
        self.lru = LayerLRUOrder(ctx.n_layers, ctx.n_experts)
        self.queue = PrefetchQueue()
        self.current = 0

    def initial_residency(self) -> list[tuple[int, int]]:
        E = self.ctx.n_experts
        return [(l, e) for l in range(self.ctx.n_layers) for e in range(E - int(self.quota[l]), E)]

    def on_layer_start(self, layer: int, cache) -> None:
        self.current = layer
        self.queue.drop_layer(layer)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        req = counts > 0
        res = cache.resident[layer]
        self.lru.touch(layer, (req & res).nonzero()[0])
        where = fetch_all_where(cache, layer, counts)
        if signals.next_pred is not None and layer + 1 < self.ctx.n_layers:
            self._speculate(layer + 1, np.asarray(signals.next_pred), cache)
        return Placement(where)

    def _speculate(self, nxt: int, pred: np.ndarray, cache) -> None:
        guess = requested(pred)       # ascending: a stable sort by count breaks ties by id
        guess = guess[np.argsort(-pred[guess], kind="stable")][: self.n_prefetch]
        self.queue.push_absent(nxt, guess, cache)
        self.lru.touch_each(nxt, guess[cache.resident[nxt][guess]].tolist())   # the cached guesses are used, in order

    def next_transfer(self, cache):
        return self.offer(self.queue.pop(cache))

    def victim(self, layer: int, expert: int, cache, demand: bool):
        def pick(l: int):
            e = self.lru.oldest_evictable_in(l, cache)
            return None if e is None else (l, e)

        found = self.donors.victim(layer, cache, self.current, pick)
        return found if found is not None else self.refuse(demand)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self.lru.touch(layer, expert)
