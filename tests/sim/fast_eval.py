"""A test reference: an event-free evaluator for policies that never prefetch, the engine's recurrence
without SimPy (no production code calls it; the planner prices static placements in closed form,
:mod:`sim.plan.evaluate`).

It runs the same :class:`sim.protocol.ProtocolCore` as :class:`sim.engine.decode.Engine`, prices a
step's fixed parts with the same cost-model calls (:meth:`sim.machine.cost_model.CostModel.draft_step_s`)
and advances the GPU's and the link's "free at" times by the same arithmetic
(:func:`sim.protocol.layer_end_delay`), so on every policy it accepts it returns the engine's decode
time and its request, hit and copy counters exactly; it leaves the busy, bubble and per-step timing
counters empty. It accepts
exactly the policies that never prefetch: those that keep the protocol's default
:meth:`sim.policies.base.Policy.next_transfer`; any other raises :class:`PrefetchingPolicyError`
before running (when and how often the link asks for a prefetch needs the event engine). Demand
fetches, streams, block copies (``bulk``), ``extra_fetch`` and CPU fallbacks are all supported.
"""
from __future__ import annotations

import numpy as np

from sim.machine.cost_model import CostModel, dram_cpu_time
from sim.engine.decode import requests_by_layer
from sim.protocol.expert_cache import ExpertCache
from sim.policies.base import Policy
from sim.protocol import ProtocolCore, layer_end_delay
from sim.protocol.signals import LazySignals
from traces.windows import Schedule


class PrefetchingPolicyError(ValueError):
    """The fast evaluator only handles policies whose ``next_transfer`` never returns work."""


def check_supported(policy: Policy) -> None:
    """Raise :class:`PrefetchingPolicyError` unless ``policy`` keeps the default ``next_transfer``."""
    if policy.prefetches():
        raise PrefetchingPolicyError(
            f"policy {policy.name!r} may prefetch (it defines next_transfer); the fast evaluator handles "
            "only policies that never prefetch: use the SimPy engine (sim.engine.decode.Engine, python -m sim run)")


def fast_decode_time(cost: CostModel, policy: Policy, cache: ExpertCache, schedule: Schedule,
                     context0: int = 256, seed: int = 0):
    """The engine's :class:`sim.protocol.metrics.Counters` (decode time, tokens, hits, transfers) by recurrence."""
    check_supported(policy)
    core = ProtocolCore(policy, cache, expert_bytes=cost.expert_bytes, gpu_tab=cost.gpu_expert_table(),
                           cpu_tab=cost.cpu_expert_table())
    c, xfer, sync = core.c, cost.transfer_s(), cost.layer_sync_s()
    req, nreq = requests_by_layer(schedule.counts)
    rng = np.random.default_rng(seed)
    core.load_initial()
    now, link_free, context = 0.0, 0.0, context0
    s = 0
    while schedule.has_step(s):
        schedule.begin_step(s, core.step_gamma(s, schedule.gamma))
        if schedule.online:
            (req[s],), (nreq[s],) = requests_by_layer(schedule.counts[s:s + 1])
        signals = LazySignals(schedule.counts, s, rng, policy.next_layer_accuracy, policy.draft_accuracy)
        core.step_start(s, signals)
        n = int(schedule.n_verify[s])
        now += cost.draft_step_s(schedule.draft_decodes(s), policy.draft_extra_decodes, context)
        now += cost.cpu_step_fixed_s(n) if policy.output_on_cpu else cost.step_fixed_s(n)
        attention = cost.layer_fixed_s(n, context)
        cpu_attention = cost.cpu_layer_fixed_s(n, context) if policy.cpu_layers else 0.0
        for layer in range(cache.n_layers):
            core.layer_start(layer)
            now += cpu_attention if layer in policy.cpu_layers else attention
            signals.layer = layer
            plan = core.place(layer, schedule.counts[s, layer], signals, req[s][layer], nreq[s][layer])
            lands, link_free = _copies(plan, now, link_free, xfer, cost, core)
            cpu_s = plan.cpu_s
            k = cost.dram_share(len(plan.cpu) * cost.expert_bytes, cpu_s) if cpu_s > 0 else 1.0
            if k < 1.0:   # demand copies run back to back: the link is busy from now to link_free
                cpu_s = dram_cpu_time(cpu_s, k, max(0.0, link_free - now))
            delay, _, _ = layer_end_delay(plan.gpu_s, cpu_s, now, lands, [w.gpu_s for w in plan.waits], sync)
            now = max([now + delay] + lands)
            core.layer_end(layer, schedule.counts[s, layer])
        context += int(schedule.produced[s])
        c.tokens += int(schedule.produced[s])
        c.steps += 1
        core.step_end(s, n, int(schedule.produced[s]) - 1)
        s += 1
    c.decode_s = now
    return c


def _copies(plan, now: float, link_free: float, xfer: float, cost: CostModel, core) -> tuple[list, float]:
    """Landing time of every wait of ``plan`` (demand copies back to back on the link), and the
    link's new free-at time; each copy lands (the core's bookkeeping) in link order."""
    lands, by_key = [], {}
    for w in plan.waits:
        if w.copy is None:
            lands.append(by_key[w.key])
            continue
        n = len(w.copy.experts)
        link_free = max(now, link_free) + (xfer if n == 1 else cost.bulk_transfer_s(n))
        lands.append(link_free)
        for e in w.copy.experts:
            by_key[(w.copy.layer, e)] = link_free
    for w in plan.waits:
        if w.copy is not None:
            core.landed(w.copy)
    return lands, link_free
