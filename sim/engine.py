"""The SimPy engine: offloaded MoE decoding, autoregressive or speculative, driven by a policy.

The engine owns the clock (Vidur's split): one decode process walks the schedule step by step and
layer by layer, a :class:`sim.link.Link` process moves experts over PCIe, and the policy is asked
for decisions at the protocol points of :mod:`sim.policies.base`. Per step (SD): the draft phase
(gamma draft forwards on the GPU, the link free for prefetches), the target's fixed part
(embeddings, lm_head, host overhead), then every MoE layer: attention and router on the GPU, the
policy's placement, the GPU's experts (resident first, then each fetched one when it lands) and the
CPU's experts run concurrently, and the layer ends when both are done (plus a join when the CPU
took part). Autoregressive decoding is the same with gamma = 0.

Time only advances through ``env.timeout``; every duration comes from :class:`sim.cost_model.CostModel`.
"""
from __future__ import annotations

import numpy as np
import simpy

from sim.accounting import PrefetchTracker, next_prefetch, tally_requests
from sim.cost_model import CostModel
from sim.expert_cache import CacheError, ExpertCache
from sim.link import Link
from sim.metrics import Counters
from sim.policies.base import FETCH, STREAM, Policy, PolicyContext
from sim.signals import DRAFT_ACCURACY, NEXT_LAYER_ACCURACY, LazySignals
from traces.windows import Schedule


class Engine:
    """One simulated run of ``policy`` over ``schedule`` on the machine of ``cost``.

    ``context0`` is the prompt length (the KV cache grows from it). With ``timeline=True`` every
    busy interval is kept in :attr:`events` as ``(lane, label, start_s, end_s)`` for export.
    """

    def __init__(self, cost: CostModel, policy: Policy, cache: ExpertCache, schedule: Schedule,
                 ctx: PolicyContext, *, context0: int = 256, seed: int = 0, timeline: bool = False):
        self.env = simpy.Environment()
        self.cost, self.policy, self.cache, self.sched, self.ctx = cost, policy, cache, schedule, ctx
        self.gpu_tab = cost.gpu_expert_table()
        self.cpu_tab = cost.cpu_expert_table()
        if len(self.gpu_tab) <= int(schedule.counts.max(initial=0)):
            raise ValueError("cost tables are shorter than the largest per-expert token count")
        self.transfer_s = cost.transfer_s()
        self.sync_s = cost.layer_sync_s()
        self.req, self.nreq = _requests(schedule.counts)
        self.context0, self.rng = context0, np.random.default_rng(seed)
        self.c = Counters()
        self.prefetched = PrefetchTracker(cache.n_layers, cache.n_experts)
        self.events: list | None = [] if timeline else None
        self.link = Link(self.env, self)
        self.next_acc = getattr(policy, "next_layer_accuracy", NEXT_LAYER_ACCURACY)
        self.draft_acc = getattr(policy, "draft_accuracy", DRAFT_ACCURACY)

    # --- running ------------------------------------------------------------------------------
    def run(self) -> Counters:
        """Simulate the whole schedule; returns the filled :class:`sim.metrics.Counters`."""
        for layer, expert in self.policy.initial_residency():
            self.cache.load(layer, expert)
        self.link.prefetch_enabled = getattr(self.policy, "overlap", True)
        done = self.env.process(self._decode())
        self.env.run(until=done)
        self.c.decode_s = self.env.now
        self.c.pcie_busy_s = self.link.busy_s
        return self.c

    def _mark(self, lane: str, label: str, start: float, end: float) -> None:
        if self.events is not None and end > start:
            self.events.append((lane, label, start, end))

    def _decode(self):
        env, sched, cost, pol = self.env, self.sched, self.cost, self.policy
        context = self.context0
        extra = int(getattr(pol, "draft_extra_decodes", 0))
        s = 0
        while (not sched.done) if sched.online else s < sched.n_steps:
            g = sched.begin_step(s, pol)      # an online schedule builds the step with the policy's gamma
            if sched.online:
                self.req[s], self.nreq[s] = _step_requests(sched.counts[s])
            t_step = env.now
            signals = LazySignals(sched.counts, s, self.rng, self.next_acc, self.draft_acc)
            pol.on_step_start(s, signals, self.cache)
            self.link.wake()
            if not self.link.prefetch_enabled:
                yield from self._drain()
            n = int(sched.n_verify[s])
            if g > 0:
                d = (sched.draft_decodes(s) + extra) * cost.draft_token_s(context)
                yield from self._gpu_fixed(d, "draft", "draft_s")
            yield from self._gpu_fixed(cost.step_fixed_s(n), "embed+lm_head", "step_fixed_s")
            attention = cost.layer_fixed_s(n, context)
            for layer in range(self.cache.n_layers):
                yield from self._layer(s, layer, attention, signals)
            context += int(sched.produced[s])
            self.c.tokens += int(sched.produced[s])
            self.c.steps += 1
            self.c.step_s.append(env.now - t_step)
            pol.on_step_end(s, n, int(sched.produced[s]) - 1)
            s += 1

    def _gpu_fixed(self, dur: float, label: str, counter: str):
        start = self.env.now
        yield self.env.timeout(dur)
        self.c.gpu_busy_s += dur
        setattr(self.c, counter, getattr(self.c, counter) + dur)
        self._mark("GPU", label, start, self.env.now)

    def _layer(self, s: int, layer: int, attention: float, signals: LazySignals):
        env, cache, c = self.env, self.cache, self.c
        t0 = env.now
        cache.pinned[layer] = True
        self.policy.on_layer_start(layer, cache)
        yield env.timeout(attention)
        self._mark("GPU", f"L{layer} attn", t0, env.now)
        counts = self.sched.counts[s, layer]
        signals.layer = layer
        placement = self.policy.place(layer, counts, signals, cache)
        gpu_now, cpu_t, waits = self._dispatch(s, layer, placement)
        self.link.wake()  # place() may have queued prefetches (next-layer predictions)
        t1 = env.now
        if waits and all(g > 0 for _, g in waits):
            # every landing time is known (demand jobs queue behind the job on the link), so the
            # GPU's in-order recurrence gives the layer's end without waiting event by event
            gpu_end = t1 + gpu_now
            for ev, g in waits:
                gpu_end = max(gpu_end, ev.land_at) + g
                gpu_now += g
            yield env.timeout(max(gpu_end, t1 + cpu_t) - t1 + (self.sync_s if cpu_t > 0 else 0.0))
        elif waits:
            if gpu_now:
                yield env.timeout(gpu_now)
            for ev, g in waits:
                if not ev.processed:
                    yield ev
                if g:
                    yield env.timeout(g)
                gpu_now += g
            gpu_end = env.now
            if t1 + cpu_t > gpu_end:
                yield env.timeout(t1 + cpu_t - gpu_end)
            if cpu_t > 0:
                yield env.timeout(self.sync_s)
        else:
            gpu_end = t1 + gpu_now
            yield env.timeout(max(gpu_now, cpu_t) + (self.sync_s if cpu_t > 0 else 0.0))
        c.gpu_busy_s += attention + gpu_now
        c.cpu_busy_s += cpu_t
        self._mark("GPU", f"L{layer} experts", t1, gpu_end)
        if cpu_t > 0:
            self._mark("CPU", f"L{layer} experts", t1, t1 + cpu_t)
            c.bubble_s += abs(gpu_end - (t1 + cpu_t))
        cache.pinned[layer] = False
        self.policy.on_layer_end(layer, counts, cache)
        self.link.wake()
        c.layer_s.append(env.now - t0)
        if not self.link.prefetch_enabled:
            yield from self._drain()

    def _dispatch(self, s: int, layer: int, placement):
        """Apply a placement: tally hits, start demand transfers; returns (gpu_s, cpu_s, waits)."""
        cache, c = self.cache, self.c
        req, n = self.req[s][layer], self.nreq[s][layer]
        where = np.asarray(placement.where)[req]
        on_gpu, on_cpu = tally_requests(c, cache, self.prefetched, layer, req, where, self.policy.name)
        gpu_s = float(self.gpu_tab[n] @ on_gpu)
        cpu_s = float(self.cpu_tab[n] @ on_cpu)
        n_gpu, n_cpu = int(np.count_nonzero(on_gpu)), int(np.count_nonzero(on_cpu))
        c.gpu_execs += n_gpu
        c.cpu_execs += n_cpu
        waits = []
        if placement.bulk:
            gpu_s, cpu_s = self._dispatch_bulk(layer, req, n, where, placement.extra_fetch, gpu_s, cpu_s, waits)
            return gpu_s, cpu_s, waits
        if n_gpu + n_cpu < req.size:
            rest = ~(on_gpu | on_cpu)
            for e, k, w in zip(req[rest].tolist(), n[rest].tolist(), where[rest].tolist()):
                gpu_s, cpu_s = self._dispatch_one(layer, e, k, w, gpu_s, cpu_s, waits)
        for e in placement.extra_fetch:
            e = int(e)
            if cache.inflight[layer, e]:
                waits.append((self.link.landing[(layer, e)], 0.0))
            elif not cache.resident[layer, e] and self._reserve(layer, e):
                waits.append((self.link.request(layer, e), 0.0))
        return gpu_s, cpu_s, waits

    def _dispatch_bulk(self, layer, req, n, where, extra, gpu_s, cpu_s, waits):
        """All of a layer's demand fetches as one block copy (``Placement.bulk``)."""
        cache, c = self.cache, self.c
        if (where == STREAM).any():
            raise ValueError(f"policy {self.policy.name!r}: a bulk placement cannot STREAM")
        fetch = where == FETCH
        want, gpu_of = [], {}
        for e, k in zip(req[fetch].tolist(), n[fetch].tolist()):
            g = float(self.gpu_tab[k])
            if cache.resident[layer, e]:
                gpu_s += g
            elif cache.inflight[layer, e]:
                waits.append((self.link.landing[(layer, e)], g))
            else:
                want.append(e)
                gpu_of[e] = (g, k)
        c.gpu_execs += int(fetch.sum())
        ex = np.asarray(extra, dtype=np.int64)
        if ex.size:
            fly = cache.inflight[layer, ex]
            waits.extend((self.link.landing[(layer, int(e))], 0.0) for e in dict.fromkeys(ex[fly].tolist()))
            rest = ex[~fly & ~cache.resident[layer, ex]]
            want.extend(e for e in rest.tolist() if e not in gpu_of)
        granted = self._reserve_many(layer, want)
        for e in want[len(granted):]:
            if e in gpu_of:  # a routed expert that found no slot runs on the CPU
                c.fallbacks += 1
                c.gpu_execs -= 1
                c.cpu_execs += 1
                cpu_s += float(self.cpu_tab[gpu_of[e][1]])
        if granted:
            ev = self.link.request_bulk(layer, tuple(granted), self.cost.bulk_transfer_s(len(granted)))
            waits.append((ev, sum(gpu_of[e][0] for e in granted if e in gpu_of)))
        return gpu_s, cpu_s

    def _dispatch_one(self, layer: int, e: int, k: int, w: int, gpu_s: float, cpu_s: float, waits: list):
        """A FETCH or STREAM placement of one expert."""
        cache, c = self.cache, self.c
        g = float(self.gpu_tab[k])
        if w == STREAM:
            waits.append((self.link.request(layer, e, stream=True), g))
        elif w != FETCH:
            raise ValueError(f"policy {self.policy.name!r} returned placement code {w} (valid: 0..3)")
        elif cache.resident[layer, e]:
            gpu_s += g
        elif cache.inflight[layer, e]:
            waits.append((self.link.landing[(layer, e)], g))
        elif self._reserve(layer, e):
            waits.append((self.link.request(layer, e), g))
        else:
            c.fallbacks += 1
            c.cpu_execs += 1
            return gpu_s, cpu_s + float(self.cpu_tab[k])
        c.gpu_execs += 1
        return gpu_s, cpu_s

    # --- slots and transfers ------------------------------------------------------------------
    def _reserve(self, layer: int, expert: int) -> bool:
        """Reserve a slot for (layer, expert), evicting the policy's victim if none is free."""
        cache = self.cache
        if cache.n_free <= 0:
            victim = self.policy.victim(layer, expert, cache)
            if victim is None:
                return False
            self._evict(*victim)
        cache.begin(layer, expert)
        return True

    def _reserve_many(self, layer: int, experts: list) -> list:
        """Reserve slots for a block copy, in order; returns the experts that got one.

        A policy with a ``victims(layer, n, cache)`` method names all victims at once; otherwise
        it is asked one victim at a time, as for single transfers."""
        cache = self.cache
        if not hasattr(self.policy, "victims"):
            return [e for e in experts if self._reserve(layer, e)]
        short = len(experts) - cache.n_free
        if short > 0:
            victims = np.asarray(self.policy.victims(layer, short, cache), dtype=np.int64).reshape(-1, 2)
            if len(np.unique(victims, axis=0)) != len(victims):
                raise CacheError(f"policy {self.policy.name!r} named the same victim twice")
            cache.evict_many(victims[:, 0], victims[:, 1])
            self.prefetched.evicted(victims[:, 0], victims[:, 1])
            self.c.evictions += len(victims)
        granted = experts[:max(0, min(len(experts), cache.n_free))]
        if granted:
            cache.begin_many(layer, granted)
        return granted

    def _evict(self, layer: int, expert: int) -> None:
        self.cache.evict(layer, expert)
        self.prefetched.evicted(layer, expert)
        self.c.evictions += 1

    def start_prefetch(self):
        """The link is idle: the policy's next valid prefetch as a link job, or None."""
        item = next_prefetch(self.policy, self.cache, self._reserve)
        if item is None:
            return None
        return item[0], (item[1],), False, self.env.event(), True, self.transfer_s

    def block_landed(self, layer: int, experts: tuple, start: float) -> None:
        """A block copy of several experts (demand, ``Placement.bulk``) landed."""
        c = self.c
        c.pcie_bytes += self.cost.expert_bytes * len(experts)
        c.demand_fetches += len(experts)
        self._mark("PCIe", f"block L{layer} x{len(experts)}", start, self.env.now)
        self.cache.land_many(layer, list(experts))
        if hasattr(self.policy, "on_transfers_done"):
            self.policy.on_transfers_done(layer, list(experts), self.cache)
        else:
            for e in experts:
                self.policy.on_transfer_done(layer, e, self.cache)

    def transfer_landed(self, layer: int, expert: int, stream: bool, start: float, prefetch: bool) -> None:
        """Called by the link when a transfer's bytes have arrived."""
        c = self.c
        c.pcie_bytes += self.cost.expert_bytes
        self._mark("PCIe", f"{'prefetch' if prefetch else 'stream' if stream else 'fetch'} L{layer}E{expert}",
                   start, self.env.now)
        if stream:
            c.streams += 1
            return
        self.cache.land(layer, expert)
        if prefetch:
            c.prefetches += 1
            self.prefetched.landed(layer, expert)
        else:
            c.demand_fetches += 1
        self.policy.on_transfer_done(layer, expert, self.cache)

    def _drain(self):
        """Blocking prefetch (policies with ``overlap = False``): move every queued expert now."""
        while True:
            job = self.start_prefetch()
            if job is None:
                return
            layer, (expert,) = job[0], job[1]
            start = self.env.now
            yield self.env.timeout(self.transfer_s)
            self.link.busy_s += self.transfer_s
            self.transfer_landed(layer, expert, False, start, True)


def _step_requests(counts: np.ndarray):
    """The requested experts and their token counts of one step, per layer."""
    req = [np.flatnonzero(row) for row in counts]
    return req, [row[r] for row, r in zip(counts, req)]


def _requests(counts: np.ndarray):
    """Per step and layer, the requested experts and their token counts (precomputed once)."""
    S, L, _ = counts.shape
    s_idx, l_idx, e_idx = np.nonzero(counts)
    n = counts[s_idx, l_idx, e_idx]
    bounds = np.searchsorted(s_idx * L + l_idx, np.arange(S * L + 1))
    req = [[e_idx[bounds[s * L + l]:bounds[s * L + l + 1]] for l in range(L)] for s in range(S)]
    nreq = [[n[bounds[s * L + l]:bounds[s * L + l + 1]] for l in range(L)] for s in range(S)]
    return req, nreq
