"""HybriMoE: score-aware expert cache, per-layer greedy CPU/GPU scheduling, next-layer prefetch."""
from __future__ import annotations

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, gpu_where, present_row
from sim.policies.prefetch_queue import PrefetchQueue
from sim.policies.quota import QuotaVictims, even_quotas
from sim.policies.split import ExpertTimes, two_ended


class HybriMoE(OffloadPolicy):
    """Minus-Recent-Score cache, two-ended CPU/GPU queue per layer, next-layer prefetch (AR).

    Mechanism (arXiv 2504.05897; github.com/PKU-SEC-Lab/HybriMoE,
    ``ktransformers/operators/experts.py``, built on kTransformers):

    * ``KScoreAwareCache``: per (layer, expert) score ``S <- alpha * s + (1 - alpha) * S`` each
      time the layer is routed, where ``s`` is the router score of the top-``p`` experts and 0 for
      the rest (so unselected experts decay). Here ``s`` is ``signals.router_scores`` when the
      executor gives it, else each expert's share of the layer's routed tokens
      (``counts / counts.sum()``, which sums to 1 like normalised gate weights).
    * Per-layer caches (``load_size`` slots per layer, here the budget split evenly and filled at
      load with each layer's first experts by id); a transfer evicts the layer's lowest score (a
      demand fetch into the computing, pinned layer borrows a slot: :mod:`sim.policies.quota`).
      A prefetch only evicts an expert scoring lower than the one it brings.
    * ``HSS`` scheduling (:func:`sim.policies.split.two_ended`, costs from ``ctx.costs``): cached
      experts first then uncached, each by token count; the GPU takes from the head (uncached ones
      pay a serialised PCIe move), the CPU from the tail, whichever finishes earlier.
    * ``prefetch_expert``: after the current layer's GPU work is issued, the top-``prefetch_size``
      scores of the next layer are loaded if absent (entries dropped when that layer starts).

    Parameters:
        alpha: score smoothing (default 0.5, ``KScoreAwareCache(alpha=0.5)`` in the code).
        top_p: experts per layer whose router score enters the update (default 12, ``p=12``).
        prefetch_size: next-layer experts prefetched (default null = ``top_k``; the code reads it
            from the model's optimize rule, which defaults to 0 when unset; the paper describes
            next-layer prefetch, so the number of experts a token uses is taken).
    """

    speculative = False

    def __init__(self, alpha: float = 0.5, top_p: int = 12, prefetch_size: int | None = None):
        self.alpha = alpha
        self.top_p = top_p
        self.prefetch_size = prefetch_size

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self.quota = even_quotas(ctx.n_layers, ctx.n_experts, ctx.n_slots)
        self.donors = QuotaVictims(self.quota)
        self.score = np.zeros((ctx.n_layers, ctx.n_experts))
        self.queue = PrefetchQueue()
        self.times = ExpertTimes(ctx.costs)
        self.current = 0
        self.k_prefetch = ctx.top_k if self.prefetch_size is None else int(self.prefetch_size)

    def initial_residency(self) -> list[tuple[int, int]]:
        return [(l, e) for l in range(self.ctx.n_layers) for e in range(int(self.quota[l]))]

    def update_scores(self, layer: int, counts: np.ndarray, router_scores) -> None:
        """The MRS update of one layer (see the class docstring)."""
        if router_scores is not None:
            s = np.asarray(router_scores, dtype=float).copy()
        else:
            total = float(np.sum(counts))
            s = np.asarray(counts, dtype=float) / total if total > 0 else np.zeros(len(counts))
        if np.count_nonzero(s) > self.top_p:
            s[np.argsort(-s, kind="stable")[self.top_p:]] = 0.0
        self.score[layer] = self.alpha * s + (1.0 - self.alpha) * self.score[layer]

    def on_layer_start(self, layer: int, cache) -> None:
        self.current = layer
        self.queue.drop_layer(layer)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        self.update_scores(layer, counts, signals.router_scores)
        on_gpu = two_ended(counts, present_row(cache, layer), self.ctx.costs, self.times)
        where = gpu_where(cache, layer, counts, on_gpu)
        nxt = layer + 1
        if nxt < self.ctx.n_layers and self.k_prefetch > 0:
            row = self.score[nxt]
            top = np.argsort(-row, kind="stable")[: self.k_prefetch]    # ties: expert id
            self.queue.push_absent(nxt, top, cache, keep=row[top] > 0)
        return Placement(where)

    def next_transfer(self, cache):
        return self.offer(self.queue.pop(cache))

    def victim(self, layer: int, expert: int, cache, demand: bool):
        limit = np.inf if demand else self.score[layer, expert]
        resident, pinned, score = cache.resident, cache.pinned, self.score

        def pick(l: int):
            if pinned[l]:
                return None
            idx = resident[l].nonzero()[0]
            if not len(idx):
                return None
            e = int(idx[score[l, idx].argmin()])
            return (l, e) if score[l, e] < limit else None

        found = self.donors.victim(layer, cache, self.current, pick)
        return found if found is not None else self.refuse(demand)
