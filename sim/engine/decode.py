"""The SimPy engine: offloaded MoE decoding, autoregressive or speculative, driven by a policy.

The engine owns the clock (Vidur's split) and nothing else: every decision and all bookkeeping
(slots, placements, landings, tallies) is the clock-free :class:`sim.protocol.ProtocolCore`. One
decode process walks the schedule step by step and layer by layer, a :class:`sim.engine.link.Link`
process moves the core's copies over PCIe. Per step (SD): the draft phase (gamma draft forwards
on the GPU, the link free for prefetches), the target's fixed part (embeddings, lm_head, host
overhead), then every MoE layer: attention and router on the GPU, the policy's placement, the
GPU's experts (resident first, then each fetched one when it lands) and the CPU's experts run
concurrently, and the layer ends when both are done (plus a join when the CPU took part); the CPU's
experts slow down while the link's DMA reads the same host DRAM (``CostModel.dram_share``).
Autoregressive decoding is the same with gamma = 0. A policy that chooses each step's draft
length is asked through the core before the step (an online schedule builds the step then); the
draft phase is that step's draft forwards plus the policy's ``draft_extra_decodes``.

Time only advances through ``env.timeout``; every duration comes from :class:`sim.machine.cost_model.CostModel`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import simpy

from sim.machine.cost_model import CostModel, dram_cpu_time
from sim.protocol.expert_cache import ExpertCache
from sim.engine.link import Link, LinkJob, job_label, timeout_at
from sim.policies.base import Policy, PolicyContext
from sim.protocol import ProtocolCore, layer_end_delay
from sim.protocol.signals import LazySignals
from traces.windows import Schedule


DRAM_ROUNDS = 6   # rounds of CPU work re-measured against the link's DMA (each leaves at most 1-k of the last)


@dataclass(frozen=True)
class EngineOptions:
    """How an :class:`Engine` runs a schedule: the KV length before the first step (``context0``), the
    seed of its predictor noise, the timeline export, a captured trace's own signals (``recorded``),
    a hook run before the first step (``warm``), and the link's coalesced copies (``coalesce``)."""

    context0: int = 256
    seed: int = 0
    timeline: bool = False
    recorded: dict | None = None
    warm: Callable | None = None
    coalesce: bool = True


class Engine:
    """One simulated run of ``policy`` over ``schedule`` on the machine of ``cost``.

    ``context0`` is the prompt length (the KV cache grows from it). With ``timeline=True`` every
    busy interval is kept in :attr:`events` as ``(lane, label, start_s, end_s)`` for export.
    ``recorded`` holds a captured trace's own signals (see :class:`sim.protocol.signals.LazySignals`).
    ``warm(core)``, if given, runs after the startup residency is loaded and before the first step
    (a simulated prefill lands its copies: :func:`sim.prefill.handoff.land_prefill_copies`).
    ``coalesce=False`` gives every copy its own SimPy event (:class:`sim.engine.link.Link`'s reference).
    """

    def __init__(self, cost: CostModel, policy: Policy, cache: ExpertCache, schedule: Schedule,
                 ctx: PolicyContext, opts: EngineOptions = EngineOptions()):
        context0, seed, timeline, coalesce = opts.context0, opts.seed, opts.timeline, opts.coalesce
        recorded, warm = opts.recorded, opts.warm
        self.env = simpy.Environment()
        self.cost, self.policy, self.cache, self.sched, self.ctx = cost, policy, cache, schedule, ctx
        gpu_tab, cpu_tab = cost.gpu_expert_table(), cost.cpu_expert_table()
        if len(gpu_tab) <= int(schedule.counts.max(initial=0)):
            raise ValueError("cost tables are shorter than the largest per-expert token count")
        self.core = ProtocolCore(policy, cache, expert_bytes=cost.expert_bytes, gpu_tab=gpu_tab, cpu_tab=cpu_tab)
        self.c = self.core.c
        self.expert_bytes = cost.expert_bytes
        self.transfer_s = cost.transfer_s()
        self.sync_s = cost.layer_sync_s()
        self.req, self.nreq = (requests_by_layer(schedule.counts) if schedule.online
                               else shared_requests(schedule.counts))
        self.context0, self.rng, self.recorded = context0, np.random.default_rng(seed), recorded
        self.events: list | None = [] if timeline else None
        self.warm = warm
        self.beside = 0.0   # this step's GPU seconds beside the CPU experts per layer (CostModel.gpu_beside_s)
        self.defer = 0      # this step's deferred CPU experts per layer (Policy.deferred_experts; one-token forwards)
        self.carry_end = 0.0   # when the CPU finishes the previous layer's deferred experts
        self.may_prefetch = policy.prefetches()
        self.link = Link(self.env, self.core, self.transfer_s, self._landed if timeline else None,
                         coalesce=coalesce, prefetches=self.may_prefetch)

    # --- running ------------------------------------------------------------------------------
    def run(self):
        """Simulate the whole schedule; returns the filled :class:`sim.protocol.metrics.Counters`."""
        self.core.load_initial()
        if self.warm is not None:
            self.warm(self.core)
        self.link.prefetch_enabled = self.policy.overlap
        done = self.env.process(self._settling(self._decode()))
        self.env.run(until=done)
        self.c.decode_s = self.env.now
        self.c.pcie_busy_s = self.link.busy_s
        return self.c

    def _settling(self, gen):
        """The process ``gen`` with the link settled before each of its waits
        (:meth:`sim.engine.link.Link.settle`: a link it woke looks for prefetches then)."""
        settle = self.link.settle
        try:
            event = next(gen)
            while True:
                settle()
                event = gen.send((yield event))
        except StopIteration as stop:
            settle(self.env.now)            # the process's end, scheduled now, is the next event
            return stop.value

    def _mark(self, lane: str, label: str, start: float, end: float) -> None:
        if self.events is not None and end > start:
            self.events.append((lane, label, start, end))

    def _landed(self, job: LinkJob) -> None:
        self._mark("PCIe", job_label(job.copy), job.start, job.end)

    def _decode(self):
        env, sched, cost = self.env, self.sched, self.cost
        context = self.context0
        cpu_layers, n_layers = self.policy.cpu_layers, self.cache.n_layers   # fixed once reset returns
        s = 0
        while sched.has_step(s):
            sched.begin_step(s, self.core.step_gamma(s, sched.gamma))   # an online schedule builds it now
            if sched.online:
                (self.req[s],), (self.nreq[s],) = requests_by_layer(sched.counts[s:s + 1])
            t_step = env.now
            signals = LazySignals(sched.counts, s, self.rng, self.policy.next_layer_accuracy,
                                  self.policy.draft_accuracy, self.recorded)
            self.core.step_start(s, signals)
            self.link.wake()
            if not self.link.prefetch_enabled:
                yield from self._drain()
            n = int(sched.n_verify[s])
            forwards = sched.draft_decodes(s)
            if forwards > 0:
                d = cost.draft_step_s(forwards, self.policy.draft_extra_decodes, context)
                yield from self._gpu_fixed(d, "draft", "draft_s")
            head = cost.cpu_step_fixed_s(n) if self.policy.output_on_cpu else cost.step_fixed_s(n)
            yield from self._gpu_fixed(head, "embed+lm_head", "step_fixed_s",
                                       "CPU" if self.policy.output_on_cpu else "GPU")
            attention = cost.layer_fixed_s(n, context)
            self.beside = cost.gpu_beside_s(n)   # shared experts on the GPU beside the CPU experts (0: none)
            self.defer = self.policy.deferred_experts if n == 1 else 0
            cpu_attention = cost.cpu_layer_fixed_s(n, context) if self.policy.cpu_layers else 0.0
            for layer in range(n_layers):
                on_cpu = layer in cpu_layers
                yield from self._layer(s, layer, cpu_attention if on_cpu else attention, signals, on_cpu)
            context += int(sched.produced[s])
            self.c.tokens += int(sched.produced[s])
            self.c.steps += 1
            self.c.step_s.append(env.now - t_step)
            self.core.step_end(s, n, int(sched.produced[s]) - 1)
            s += 1

    def _gpu_fixed(self, dur: float, label: str, counter: str, lane: str = "GPU"):
        start = self.env.now
        yield self.env.timeout(dur)
        if lane == "GPU":
            self.c.gpu_busy_s += dur
        else:
            self.c.cpu_busy_s += dur
        setattr(self.c, counter, getattr(self.c, counter) + dur)
        self._mark(lane, label, start, self.env.now)

    def _layer(self, s: int, layer: int, attention: float, signals: LazySignals, attn_on_cpu: bool = False):
        env, c, link, marks = self.env, self.c, self.link, self.events is not None
        t0 = env.now
        self.core.layer_start(layer)
        yield env.timeout(attention)
        if marks:
            self._mark("CPU" if attn_on_cpu else "GPU", f"L{layer} attn", t0, env.now)
        counts = self.sched.counts[s, layer]
        signals.layer = layer
        plan = self.core.place(layer, counts, signals, self.req[s][layer], self.nreq[s][layer])
        waits = plan.waits
        if waits:
            jobs = link.submit_waits(waits, self.cost.bulk_transfer_s)
            lands, wait_gpu = [j.land_at for j in jobs], [w.gpu_s for w in waits]
        else:
            jobs = lands = wait_gpu = ()
        link.wake()  # place() may have queued prefetches (next-layer predictions)
        t1 = env.now
        gpu_s = plan.gpu_s + (0.0 if attn_on_cpu else self.beside)
        carried, deferred = self._deferral(t1, layer, plan)
        cpu_s = carried + plan.cpu_s - deferred
        delay, gpu_end, gpu_busy = layer_end_delay(gpu_s, cpu_s, t1, lands, wait_gpu, self.sync_s)
        k = self.cost.dram_share(len(plan.cpu) * self.expert_bytes, cpu_s) if cpu_s > 0 else 1.0
        if k < 1.0 and link.prefetch_enabled and self.may_prefetch:
            # host DRAM shared with the link's DMA: the CPU slows while copies run, and prefetches
            # may start at any time, so the CPU's progress is re-measured against the link
            cpu_s, now = yield from self._cpu_with_dma(t1, cpu_s, k)
            delay = layer_end_delay(gpu_s, cpu_s, t1, lands, wait_gpu, self.sync_s)[0]
            yield timeout_at(env, now + max(0.0, t1 + delay - now))
        else:
            if k < 1.0:   # only demand copies: the link is busy back to back until demand_tail
                cpu_s = dram_cpu_time(cpu_s, k, max(0.0, max(link.busy_until, link.demand_tail) - t1))
                delay = layer_end_delay(gpu_s, cpu_s, t1, lands, wait_gpu, self.sync_s)[0]
            yield env.timeout(delay)
        for job in jobs:  # a copy nobody computes may land at the layer's very end: let it land first
            if not job.done:
                yield link.until_landed(job)
        self.carry_end = t1 + cpu_s + deferred   # the CPU goes on to this layer's deferred experts
        c.gpu_busy_s += (0.0 if attn_on_cpu else attention) + gpu_busy
        c.cpu_busy_s += cpu_s - carried + deferred + (attention if attn_on_cpu else 0.0)
        if marks:
            self._mark("GPU", f"L{layer} experts", t1, gpu_end)
        if cpu_s > 0:
            if marks:
                self._mark("CPU", f"L{layer} experts", t1, t1 + cpu_s)
            c.bubble_s += abs(gpu_end - (t1 + cpu_s))
        self.core.layer_end(layer, counts)
        link.wake()
        c.layer_s.append(env.now - t0)
        if not link.prefetch_enabled:
            yield from self._drain()

    def _deferral(self, t1: float, layer: int, plan) -> tuple[float, float]:
        """Expert Deferral (:attr:`Policy.deferred_experts`): the CPU seconds of the previous layer's
        deferred experts still left at placement ``t1`` (they ran during this layer's attention), and
        the seconds of this layer's CPU experts deferred to the next one (up to ``defer`` of them, by
        their share of the CPU work; none in the last layer, whose output the head needs)."""
        carried = max(0.0, self.carry_end - t1) if self.defer else 0.0
        n_cpu = len(plan.cpu)
        if not self.defer or not n_cpu or layer == self.cache.n_layers - 1:
            return carried, 0.0
        return carried, plan.cpu_s * min(self.defer, n_cpu) / n_cpu

    def _cpu_with_dma(self, t1: float, work_s: float, k: float):
        """Run ``work_s`` of CPU expert work from ``t1`` at speed ``k`` while the link is busy and 1
        otherwise (work done in an interval = its length - link-busy part x (1 - k)); returns the
        CPU's seconds and the time the last round ended. After DRAM_ROUNDS rounds the rest is taken
        at speed ``k``. A round that ends before the link's next event (:meth:`sim.engine.link.Link.quiet_until`)
        needs no SimPy event: nothing can change the link's busy time before it ends."""
        env, link, left, now = self.env, self.link, work_s, t1
        busy = link.busy_to(t1)
        for _ in range(DRAM_ROUNDS):
            t = now + left
            if not link.quiet_until() > t:
                yield timeout_at(env, t)
            now = t
            now_busy = link.busy_to(now)
            left, busy = (now_busy - busy) * (1.0 - k), now_busy
            if left <= 1e-12:
                return now - t1, now
        return now + left / k - t1, now

    def _drain(self):
        """Blocking prefetch (policies with ``overlap = False``): move every queued expert now.
        Copies that land before another process's next event land in one coalesced run
        (:meth:`sim.engine.link.Link.drain_run`); ``coalesce=False`` moves one copy per event."""
        link, env = self.link, self.env
        while True:
            if link.coalesce:
                copy, end = link.drain_run()
                if end > env.now:
                    yield timeout_at(env, end)
            else:
                copy = self.core.next_prefetch()
            if copy is None:
                return
            yield link.until_landed(link.submit(copy, self.transfer_s))


_SHARED: dict[int, tuple] = {}   # id(counts) -> (counts, req, nreq), for read-only counts
SHARED_MAX = 16                  # as many as the memoised schedules (sim.run.runner)


def shared_requests(counts: np.ndarray):
    """:func:`requests_by_layer` of a read-only ``counts`` (a memoised schedule's, shared by every
    run of a sweep point), computed once per array; the lists must not be changed (an online
    schedule, which fills them as it goes, gets its own)."""
    if counts.flags.writeable:
        return requests_by_layer(counts)
    hit = _SHARED.get(id(counts))
    if hit is None or hit[0] is not counts:
        if len(_SHARED) >= SHARED_MAX:
            del _SHARED[next(iter(_SHARED))]
        hit = _SHARED[id(counts)] = (counts, *requests_by_layer(counts))
    return hit[1], hit[2]


def requests_by_layer(counts: np.ndarray):
    """Per step and layer, the requested experts and their token counts (precomputed once)."""
    S, L, _ = counts.shape
    s_idx, l_idx, e_idx = np.nonzero(counts)
    n = counts[s_idx, l_idx, e_idx]
    bounds = np.searchsorted(s_idx * L + l_idx, np.arange(S * L + 1))
    req = [[e_idx[bounds[s * L + l]:bounds[s * L + l + 1]] for l in range(L)] for s in range(S)]
    nreq = [[n[bounds[s * L + l]:bounds[s * L + l + 1]] for l in range(L)] for s in range(S)]
    return req, nreq
