"""An independent evaluator for policies that never prefetch: a plain free-at recurrence.

No event queue: per layer, the GPU's and the link's "free at" times are advanced by hand. It calls
the policy at the same protocol points as :class:`sim.engine.Engine` and must agree with it to
rounding error on any trace; the tests use it as a cross-check of the SimPy engine, and it is about
30x faster for static policies (llama.cpp-style placement, Fiddler-style splits, fetch-on-miss).
"""
from __future__ import annotations

import numpy as np

from sim.cost_model import CostModel
from sim.expert_cache import ExpertCache
from sim.policies.base import CPU, FETCH, GPU, STREAM, Policy
from sim.signals import DRAFT_ACCURACY, NEXT_LAYER_ACCURACY, LazySignals
from traces.windows import Schedule


class PrefetchingPolicyError(ValueError):
    """The fast evaluator only handles policies whose ``next_transfer`` never returns work."""


def fast_decode_time(cost: CostModel, policy: Policy, cache: ExpertCache, schedule: Schedule,
                     context0: int = 256, seed: int = 0) -> dict:
    """Decode time, tokens and hit/transfer counts of ``policy`` on ``schedule`` by recurrence."""
    gpu_tab, cpu_tab, xfer = cost.gpu_expert_table(), cost.cpu_expert_table(), cost.transfer_s()
    rng = np.random.default_rng(seed)
    nacc = getattr(policy, "next_layer_accuracy", NEXT_LAYER_ACCURACY)
    dacc = getattr(policy, "draft_accuracy", DRAFT_ACCURACY)
    for layer, expert in policy.initial_residency():
        cache.load(layer, expert)
    now, link_free, context = 0.0, 0.0, context0
    out = {"tokens": 0, "hits": 0, "requests": 0, "fetches": 0, "cpu_execs": 0}
    for s in range(schedule.n_steps):
        signals = LazySignals(schedule.counts, s, rng, nacc, dacc)
        policy.on_step_start(s, signals, cache)
        _no_prefetch(policy, cache)
        n = int(schedule.n_verify[s])
        if schedule.gamma > 0:
            now += schedule.gamma * cost.draft_token_s(context)
        now += cost.step_fixed_s(n)
        attention = cost.layer_fixed_s(n, context)
        for layer in range(cache.n_layers):
            cache.pinned[layer] = True
            policy.on_layer_start(layer, cache)
            now += attention
            counts = schedule.counts[s, layer]
            signals.layer = layer
            where = np.asarray(policy.place(layer, counts, signals, cache).where)
            gpu_t, cpu_s, link_free = _layer(now, layer, counts, where, cache, policy, gpu_tab, cpu_tab,
                                             xfer, link_free, out)
            end = max(gpu_t, now + cpu_s)
            now = end + (cost.layer_sync_s() if cpu_s > 0 else 0.0)
            cache.pinned[layer] = False
            policy.on_layer_end(layer, counts, cache)
            _no_prefetch(policy, cache)
        context += int(schedule.produced[s])
        out["tokens"] += int(schedule.produced[s])
    out["decode_s"] = now
    return out


def _layer(now, layer, counts, where, cache, policy, gpu_tab, cpu_tab, xfer, link_free, out):
    """One layer: GPU free-at time after its experts, CPU seconds, and the link's new free-at time."""
    req = np.flatnonzero(counts)
    out["requests"] += req.size
    out["hits"] += int(cache.resident[layer, req].sum())
    gpu_t, cpu_s, landed = now, 0.0, []
    for e in req:
        k, w = counts[e], where[e]
        if w == GPU:
            gpu_t += gpu_tab[k]
        elif w == CPU:
            cpu_s += cpu_tab[k]
            out["cpu_execs"] += 1
        elif w == FETCH and cache.resident[layer, e]:
            gpu_t += gpu_tab[k]
        elif w == STREAM or (w == FETCH and _reserve(layer, int(e), cache, policy)):
            link_free = max(link_free, now) + xfer
            landed.append((int(e), link_free, gpu_tab[k], w == STREAM))
            out["fetches"] += 1
        else:
            cpu_s += cpu_tab[k]
            out["cpu_execs"] += 1
    for e, land, g, stream in landed:
        if not stream:
            cache.land(layer, e)
            policy.on_transfer_done(layer, e, cache)
        gpu_t = max(gpu_t, land) + g
    return gpu_t, cpu_s, link_free


def _reserve(layer: int, expert: int, cache: ExpertCache, policy: Policy) -> bool:
    if cache.n_free <= 0:
        victim = policy.victim(layer, expert, cache)
        if victim is None:
            return False
        cache.evict(*victim)
    cache.begin(layer, expert)
    return True


def _no_prefetch(policy: Policy, cache: ExpertCache) -> None:
    if policy.next_transfer(cache) is not None:
        raise PrefetchingPolicyError(f"policy {policy.name!r} prefetches; use the SimPy engine")
