"""Helpers for the baseline-policy tests: hand-made cost tables and contexts, and the test driver:
the executors' protocol core with instant transfers (no clock), so that decisions, not timings,
can be asserted on tiny traces."""
from __future__ import annotations

import itertools

import numpy as np

from sim.protocol.expert_cache import ExpertCache
from sim.protocol import ProtocolCore, SlotObserver
from sim.machine.cost_table import CostTable
from sim.policies.base import PolicyContext, Signals


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


class _Evictions(SlotObserver):
    def __init__(self):
        self.evicted: list[tuple[int, int]] = []

    def released(self, layer, expert):
        self.evicted.append((layer, expert))


class Driver:
    """The protocol core (:class:`sim.protocol.ProtocolCore`, the executors' own bookkeeping) with
    no clock: every copy lands as soon as its layer's placement has been applied.

    ``prefetch_budget``: how many prefetches the "link" may complete at each opportunity (after step
    start, after each placement, after each layer end). ``pin=False`` leaves the computing layer
    unpinned (a plain single-cache request sequence, for textbook comparisons). Exposes the core's
    counters (hits, demand fetches, prefetches, CPU placements, streams, fallbacks), the
    (layer, expert) evicted in order, and every placement's ``where``.
    """

    def __init__(self, policy, ctx: PolicyContext, prefetch_budget: int = 0, pin: bool = True):
        self.policy, self.ctx, self.budget, self.pin = policy, ctx, prefetch_budget, pin
        self.cache = ExpertCache(ctx.n_layers, ctx.n_experts, ctx.n_slots)
        policy.reset(ctx, self.cache)
        self._ev = _Evictions()
        self.core = ProtocolCore(policy, self.cache, expert_bytes=1, gpu_tab=ctx.costs.gpu_expert_s,
                                 cpu_tab=ctx.costs.cpu_expert_s, slots=self._ev)
        self.core.load_initial()
        self.placements: list[np.ndarray] = []
        self._ev.evicted.clear()

    @property
    def evicted(self) -> list:
        return self._ev.evicted

    hits = property(lambda self: self.core.c.hits)
    requests = property(lambda self: self.core.c.requests)
    fetches = property(lambda self: self.core.c.demand_fetches)
    prefetches = property(lambda self: self.core.c.prefetches)
    stream = property(lambda self: self.core.c.streams)
    fallbacks = property(lambda self: self.core.c.fallbacks)
    cpu = property(lambda self: self.core.c.cpu_execs - self.core.c.fallbacks)   # placed on the CPU

    def prefetch(self) -> None:
        for _ in range(self.budget):
            copy = self.core.next_prefetch()
            if copy is None:
                return
            self.core.landed(copy)
            self.cache.check()

    def step(self, s: int, counts: np.ndarray, signals: Signals | None = None,
             next_pred: np.ndarray | None = None) -> None:
        """One decode step over all layers; ``next_pred[l]`` is given at layer ``l``'s placement."""
        sig = signals if signals is not None else Signals()
        core = self.core
        core.step_start(s, sig)
        self.prefetch()
        for layer in range(self.ctx.n_layers):
            core.layer_start(layer)
            self.cache.pinned[layer] = self.pin
            sig.next_pred = None if next_pred is None or layer + 1 >= self.ctx.n_layers else next_pred[layer + 1]
            row = np.asarray(counts[layer])
            req = np.flatnonzero(row)
            placement = self.policy.place(layer, row, sig, self.cache)
            self.placements.append(np.asarray(placement.where).copy())
            plan = core.apply(layer, req, row[req], placement)
            for w in plan.waits:
                if w.copy is not None:
                    core.landed(w.copy)
            self.cache.check()
            self.prefetch()
            core.layer_end(layer, row)
            self.prefetch()

    def run(self, counts_seq: np.ndarray, next_pred_seq=None, draft_seq=None) -> "Driver":
        for s, counts in enumerate(counts_seq):
            sig = Signals(draft_pred=None if draft_seq is None else draft_seq[s])
            self.step(s, counts, sig, None if next_pred_seq is None else next_pred_seq[s])
        return self

    @property
    def transfers(self) -> int:
        return self.fetches + self.prefetches


def brute_force(counts, present, cost, max_fetch=None, wait=0.0):
    from sim.policies.split import split_time

    """Minimum of split_time over every subset of requested experts sent to the GPU."""
    req = np.flatnonzero(counts)
    best = np.inf
    for bits in itertools.product([False, True], repeat=len(req)):
        on_gpu = np.zeros(len(counts), dtype=bool)
        on_gpu[req[list(bits)]] = True
        if max_fetch is not None and int((on_gpu & ~present).sum()) > max_fetch:
            continue
        best = min(best, split_time(counts, on_gpu, present, cost, wait))
    return best
