"""Load-time pricing of a candidate strategy: its own decisions on routing drawn from the profile.

A real engine knows at load time the model's shapes, the cost model (``ctx.costs``) and an offline
profile of expert popularity (``ctx.profile``, as Fiddler and kTransformers measure it). The
expected per-token time of a strategy is priced here by asking the strategy itself where each
expert runs (:meth:`Policy.place` on a scratch cache holding its initial residency) for ``samples``
autoregressive tokens whose routing is drawn from the profile (top-k without replacement, each
layer independently, probabilities proportional to the profile plus one), and costing each layer's
answer with the cost model (:func:`sim.policies.split.split_time`, the same per-layer time model
AdaSpec and Fiddler decide with): ``step_fixed + sum_l (layer_fixed + max(T_gpu, T_cpu) + sync)``.

What this leaves out (and the online check in :mod:`sim.policies.auto.policy` corrects): the
temporal reuse a dynamic cache exploits (the profile is a popularity, not a sequence), the gain of
speculation (acceptance is learnt online). The host-DRAM contention of copies is priced: a layer's
CPU experts slow down while the link copies (:func:`cpu_with_copies`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.machine.cost_model import dram_cpu_time, dram_speed
from sim.policies.base import CPU, PolicyContext, Signals
from sim.policies.common import present_row
from sim.policies.split import ExpertTimes, split_time
from sim.protocol.expert_cache import ExpertCache


def profile_tokens(profile: np.ndarray | None, n_layers: int, n_experts: int, top_k: int, n: int,
                   seed: int) -> np.ndarray:
    """``[n, L, k]`` expert ids drawn from the profile: per (token, layer) ``k`` distinct experts,
    with probabilities proportional to ``profile + 1`` (Gumbel top-k; uniform without a profile)."""
    rng = np.random.default_rng(seed)
    pop = np.ones((n_layers, n_experts)) if profile is None else np.asarray(profile, float) + 1.0
    logp = np.log(pop / pop.sum(axis=1, keepdims=True))
    keys = logp[None] + rng.gumbel(size=(n, n_layers, n_experts))
    return np.argsort(-keys, axis=2, kind="stable")[:, :, :top_k]


@dataclass(frozen=True)
class LayerRun:
    """What runs beside a layer's placement: ``link_wait_s`` until the link is free (a copy already on
    it), ``copies`` host-to-device copies during the layer (None: those the placement makes; they
    share host DRAM with the CPU's experts, :func:`cpu_with_copies`), ``n_tokens`` in the forward
    (1 autoregressive, g + 1 for a verify of g drafts), and the placement's expert ``phase`` when the
    policy that placed it priced it already (None: priced here)."""

    link_wait_s: float = 0.0
    copies: int | None = None
    n_tokens: int = 1
    phase: float | None = None


def layer_seconds(where: np.ndarray, counts: np.ndarray, present: np.ndarray, ctx: PolicyContext,
                  times: ExpertTimes, sync_s: float) -> float:
    """Cost-model time of one autoregressive layer for a placement ``where`` (GPU/FETCH/STREAM run on
    the GPU, absent ones after their copy): fixed part, ``max(T_gpu, T_cpu)``, and the CPU/GPU join;
    the CPU's experts share host DRAM with this placement's copies (:func:`layer_times`)."""
    return layer_times(where, counts, present, ctx, times, sync_s)[1]


def layer_times(where: np.ndarray, counts: np.ndarray, present: np.ndarray, ctx: PolicyContext,
                times: ExpertTimes, sync_s: float, run: LayerRun = LayerRun()) -> tuple[float, float]:
    """The layer's time without and with the copies' share of host DRAM (one pass), for what ``run``
    says runs beside it."""
    req = counts > 0
    on_gpu = req & (where != CPU)
    cpu = bool((req & ~on_gpu).any())
    phase = run.phase
    if phase is None:
        phase = split_time(counts, on_gpu, present, ctx.costs, run.link_wait_s, times=times)
    slowed = phase
    if cpu and ctx.costs.dram_left_bps != float("inf"):
        n = int(np.count_nonzero(on_gpu & ~present)) if run.copies is None else run.copies
        if n > 0:
            slowed = max(phase, cpu_with_copies(counts[req & ~on_gpu].tolist(), n, ctx.costs, times))
    base = ctx.costs.layer_fixed(run.n_tokens) + (sync_s if cpu else 0.0)
    return base + phase, base + slowed


def cpu_with_copies(ns: list[int], copies: int, costs, times: ExpertTimes) -> float:
    """CPU seconds of experts with token counts ``ns`` while the link runs ``copies`` expert copies
    back to back from the layer's start: both read host DRAM (the cost model's shared-DRAM
    mechanism, :meth:`sim.machine.cost_model.CostModel.dram_share`, :func:`dram_cpu_time`)."""
    cpu_s = float(sum(times.cpu(ns)))
    k = dram_speed(len(ns) * costs.expert_bytes, cpu_s, costs.dram_left_bps)
    return dram_cpu_time(cpu_s, k, copies * costs.transfer_s)


def loaded_cache(ctx: PolicyContext, experts) -> ExpertCache:
    """A scratch cache holding ``experts`` (a strategy's initial residency)."""
    cache = ExpertCache(ctx.n_layers, ctx.n_experts, ctx.n_slots)
    for layer, expert in experts:
        cache.load(int(layer), int(expert))
    return cache


def token_seconds(policy, cache: ExpertCache, tokens: np.ndarray, ctx: PolicyContext, sync_s: float) -> float:
    """Mean cost-model seconds per autoregressive token of ``policy`` (already reset) deciding on
    ``cache`` (not changed) for the sampled ``tokens`` ``[n, L, k]``; its misses' copies slow the
    CPU's experts (:func:`layer_seconds`)."""
    times = ExpertTimes(ctx.costs)
    total = 0.0
    counts = np.zeros(ctx.n_experts, dtype=np.int64)
    for token in tokens:
        total += ctx.costs.step_fixed(1)
        for layer, experts in enumerate(token):
            counts[:] = 0
            counts[experts] = 1
            where = np.asarray(policy.place(layer, counts, Signals(), cache).where)
            total += layer_seconds(where, counts, present_row(cache, layer), ctx, times, sync_s)
    return total / max(1, len(tokens))
