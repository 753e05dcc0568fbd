"""Helpers for the baseline-policy tests: hand-made cost tables and contexts, and a synchronous
stand-in for the executor that calls the policy hooks in the engine's order with instant transfers
(no clock), so that decisions, not timings, can be asserted on tiny traces."""
from __future__ import annotations

import numpy as np

from sim.expert_cache import ExpertCache
from sim.cost_table import CostTable
from sim.policies.base import CPU, FETCH, GPU, STREAM, PolicyContext, Signals


def costs(gpu=10.0, cpu=100.0, cpu_per_token=50.0, transfer=250.0, layer_fixed=20.0, draft=0.0,
          n_max=16) -> CostTable:
    """A cost table in microseconds-as-seconds units: GPU flat, CPU ``cpu + per_token * (n - 1)``."""
    n = np.arange(n_max + 1)
    g = np.where(n > 0, gpu, 0.0)
    c = np.where(n > 0, cpu + cpu_per_token * (n - 1), 0.0)
    return CostTable(gpu_expert_s=g, cpu_expert_s=c, transfer_s=transfer, layer_fixed_s=layer_fixed,
                     draft_phase_s=draft, expert_bytes=1)


def context(L=2, E=4, k=1, slots=2, gamma=0, cost=None, seed=0, profile=None, future=None) -> PolicyContext:
    """A policy context for a toy model."""
    return PolicyContext(n_layers=L, n_experts=E, top_k=k, n_slots=slots, gamma=gamma,
                         costs=cost if cost is not None else costs(), seed=seed, profile=profile,
                         future_counts=future)


def onehot(E: int, *experts, n: int = 1) -> np.ndarray:
    """Counts row with ``n`` tokens on each given expert."""
    row = np.zeros(E, dtype=np.int64)
    for e in experts:
        row[e] += n
    return row


def random_counts(rng, S, L, E, k, window=1) -> np.ndarray:
    """``[S, L, E]`` verify counts: ``window`` tokens per step, each choosing ``k`` distinct experts."""
    out = np.zeros((S, L, E), dtype=np.int64)
    for s in range(S):
        for l in range(L):
            for _ in range(window):
                out[s, l, rng.choice(E, size=k, replace=False)] += 1
    return out


class Driver:
    """Calls the hooks like :class:`sim.engine.Engine` does, but every transfer lands at once.

    ``prefetch_budget``: how many prefetches the "link" may complete at each opportunity (after step
    start, after each placement, after each layer end). ``pin=False`` leaves the computing layer
    unpinned (a plain single-cache request sequence, for textbook comparisons). Records hits, fetches, prefetches,
    evictions, CPU/stream executions, and the (layer, expert) evicted, in order.
    """

    def __init__(self, policy, ctx: PolicyContext, prefetch_budget: int = 0, pin: bool = True):
        self.policy, self.ctx, self.budget, self.pin = policy, ctx, prefetch_budget, pin
        self.cache = ExpertCache(ctx.n_layers, ctx.n_experts, ctx.n_slots)
        policy.reset(ctx, self.cache)
        for l, e in policy.initial_residency():
            self.cache.load(l, e)
        self.hits = self.requests = self.fetches = self.prefetches = 0
        self.cpu = self.stream = self.fallbacks = 0
        self.evicted: list[tuple[int, int]] = []
        self.placements: list[np.ndarray] = []

    def transfer(self, layer: int, expert: int) -> bool:
        """Reserve a slot (asking for a victim when full), move the expert, notify the policy."""
        cache = self.cache
        if cache.n_free <= 0:
            v = self.policy.victim(layer, expert, cache)
            if v is None:
                return False
            cache.evict(*v)
            self.evicted.append(tuple(int(x) for x in v))
        cache.begin(layer, expert)
        cache.land(layer, expert)
        self.policy.on_transfer_done(layer, expert, cache)
        cache.check()
        return True

    def prefetch(self) -> None:
        done = tries = 0
        while done < self.budget and tries < 256:
            tries += 1
            item = self.policy.next_transfer(self.cache)
            if item is None:
                return
            if self.cache.present(*item):
                continue
            if self.transfer(*item):
                done += 1
                self.prefetches += 1

    def step(self, s: int, counts: np.ndarray, signals: Signals | None = None,
             next_pred: np.ndarray | None = None) -> None:
        """One decode step over all layers; ``next_pred[l]`` is given at layer ``l``'s placement."""
        sig = signals if signals is not None else Signals()
        self.policy.on_step_start(s, sig, self.cache)
        self.prefetch()
        for layer in range(self.ctx.n_layers):
            self.cache.pinned[layer] = self.pin
            self.policy.on_layer_start(layer, self.cache)
            sig.next_pred = None if next_pred is None or layer + 1 >= self.ctx.n_layers else next_pred[layer + 1]
            row = counts[layer]
            p = self.policy.place(layer, row, sig, self.cache)
            self._apply(layer, row, p)
            self.prefetch()
            self.cache.pinned[layer] = False
            self.policy.on_layer_end(layer, row, self.cache)
            self.prefetch()

    def run(self, counts_seq: np.ndarray, next_pred_seq=None, draft_seq=None) -> "Driver":
        for s, counts in enumerate(counts_seq):
            sig = Signals(draft_pred=None if draft_seq is None else draft_seq[s])
            self.step(s, counts, sig, None if next_pred_seq is None else next_pred_seq[s])
        return self

    def _apply(self, layer, row, p) -> None:
        where = np.asarray(p.where)
        self.placements.append(where.copy())
        for e in np.flatnonzero(row):
            w = int(where[e])
            self.requests += 1
            if self.cache.resident[layer, e]:
                self.hits += 1
            if w == GPU:
                assert self.cache.resident[layer, e], "GPU placement of a non-resident expert"
            elif w == CPU:
                self.cpu += 1
            elif w == STREAM:
                self.stream += 1
            elif w == FETCH and not self.cache.present(layer, e):
                if self.transfer(layer, int(e)):
                    self.fetches += 1
                else:
                    self.fallbacks += 1
        for e in p.extra_fetch:
            if not self.cache.present(layer, e) and self.transfer(layer, int(e)):
                self.fetches += 1

    @property
    def transfers(self) -> int:
        return self.fetches + self.prefetches
