"""Brute force on tiny cases: every scripted decision sequence, executed by the SimPy engine.

A :class:`ScriptedPolicy` follows a script: the initial slot content, per use (in execution order)
GPU-side (fetch when absent) or CPU, and the experts to prefetch at each step start; its victim is
the resident expert used farthest in the future (Belady), the best choice for a fixed script.
:func:`brute_force` runs all scripts and returns the fastest decode time: the optimum over this
policy space, which the LP bound (:mod:`sim.bound.lp`) must not exceed.
"""
from __future__ import annotations

import itertools

import numpy as np

from sim.engine.decode import Engine
from sim.protocol.expert_cache import ExpertCache
from sim.policies.base import CPU, FETCH, Placement, Policy
from sim.policies.belady import NEVER, NextUse
from sim.engine.decode import EngineOptions


class ScriptedPolicy(Policy):
    """Decisions read from a script (see the module docstring)."""

    needs_future = True

    def __init__(self, initial, uses, prefetch, speculative: bool):
        self.initial, self.uses, self.prefetch = list(initial), list(uses), dict(prefetch)
        self.speculative = speculative

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self.index = NextUse(ctx.future_counts)
        self.k = 0
        self.queue: list = []
        self.pos = 0
        self.step = 0

    def initial_residency(self):
        return self.initial

    def on_step_start(self, step, signals, cache) -> None:
        self.step, self.pos = step, step * self.ctx.n_layers
        self.queue = list(self.prefetch.get(step, ()))

    def on_layer_start(self, layer, cache) -> None:
        self.pos = self.step * self.ctx.n_layers + layer

    def place(self, layer, counts, signals, cache) -> Placement:
        where = np.full(len(counts), CPU, dtype=np.int8)
        for e in np.flatnonzero(counts):
            where[e] = FETCH if self.uses[self.k] else CPU
            self.k += 1
        return Placement(where)

    def next_transfer(self, cache):
        while self.queue:
            item = self.queue.pop(0)
            if not cache.present(*item):
                return item
        return None

    def victim(self, layer, expert, cache, demand):
        best, far = None, -1
        for l, e in zip(*np.nonzero(cache.resident & ~cache.pinned[:, None])):
            nu = self.index.next_use(int(l), int(e), self.pos)
            if nu > far:
                best, far = (int(l), int(e)), nu
        return best if far >= 0 else None


def brute_force(cost, sched, n_slots: int, speculative: bool, context0: int = 0, max_prefetch_steps: int = 2):
    """The fastest decode time over all scripts (initial content, per-use side, one prefetch per step)."""
    S, L, E = sched.counts.shape
    n_uses = int(np.count_nonzero(sched.counts))
    keys = [(l, e) for l in range(L) for e in range(E)]
    initials = [c for r in range(n_slots + 1) for c in itertools.combinations(keys, r)]
    pf_choices = [()] + [(k,) for k in keys]
    pf_steps = list(range(1, min(S, max_prefetch_steps + 1)))
    best, n_runs = np.inf, 0
    for init in initials:
        for uses in itertools.product((0, 1), repeat=n_uses):
            for pf in itertools.product(pf_choices, repeat=len(pf_steps)):
                pol = ScriptedPolicy(init, uses, dict(zip(pf_steps, pf)), speculative)
                best = min(best, _run(cost, pol, sched, n_slots, context0))
                n_runs += 1
    return best, n_runs


def _run(cost, pol, sched, n_slots, context0) -> float:
    from sim.policies.base import PolicyContext
    L, E = sched.counts.shape[1:]
    ctx = PolicyContext(n_layers=L, n_experts=E, top_k=1, n_slots=n_slots, gamma=sched.gamma,
                        costs=cost.cost_table(sched.gamma, context0), future_counts=sched.counts)
    cache = ExpertCache(L, E, n_slots)
    pol.reset(ctx, cache)
    return Engine(cost, pol, cache, sched, ctx, EngineOptions(context0=context0)).run().decode_s


__all__ = ["NEVER", "ScriptedPolicy", "brute_force"]
