"""The protocol core: slots, reservations, placements, landings and tallies, with no clock.

One object per run, shared by every executor (:mod:`sim.engine.decode`, :mod:`real.offload`,
:mod:`tests.sim.fast_eval`, the tests' driver). It calls the policy at the protocol points of
:mod:`sim.policies.base`, mutates the :class:`sim.protocol.expert_cache.ExpertCache`, fills the
:class:`sim.protocol.metrics.Counters`, and tells the executor what to move (:class:`Copy`) and what each
layer waits for (:class:`LayerPlan`). What counts as a hit, a useful prefetch or an invalid
placement is therefore identical on every executor (DESIGN.md section 3.3).
"""
from __future__ import annotations

import numpy as np

from sim.protocol.accounting import MAX_PREFETCH_TRIES, PrefetchTracker, tally_requests
from sim.protocol.expert_cache import CacheError, ExpertCache
from sim.protocol.metrics import Counters
from sim.policies.base import FETCH, STREAM, Placement, Policy, Signals
from sim.protocol.plan import DEMAND, PREFETCH, STREAM_COPY, Copy, LayerPlan, SlotObserver, Wait


RUN_CHUNK = 256   # copies one plan of a prefetch run covers at most (a longer run takes several)


class ProtocolCore:
    """The bookkeeping of one run of ``policy`` on ``cache``.

    ``gpu_tab`` / ``cpu_tab`` are the cost model's per-expert seconds by token count (the layer
    plan's ``gpu_s`` / ``cpu_s``); ``expert_bytes`` is what one copied expert adds to
    ``pcie_bytes``; ``slots`` observes slot changes (the real executor's buffers).
    """

    def __init__(self, policy: Policy, cache: ExpertCache, *, expert_bytes: float, gpu_tab: np.ndarray,
                 cpu_tab: np.ndarray, slots: SlotObserver | None = None):
        self.policy, self.cache = policy, cache
        self.expert_bytes, self.gpu_tab, self.cpu_tab = expert_bytes, gpu_tab, cpu_tab
        self._finite = bool(np.isfinite(gpu_tab).all() and np.isfinite(cpu_tab).all())
        self.slots = slots or SlotObserver()
        self._observed = type(self.slots) is not SlotObserver    # the base observer does nothing
        self.c = Counters()
        self.prefetched = PrefetchTracker(cache.n_layers, cache.n_experts)
        self.failed = 0
        # the policy plans whole prefetch runs (Policy.plan_prefetches); False: one copy at a time
        # (also for a wrapper that is no Policy subclass, e.g. the real executor's timing proxy)
        plans = getattr(type(policy), "plan_prefetches", Policy.plan_prefetches)
        self.planned_runs = plans is not Policy.plan_prefetches

    # --- protocol points ------------------------------------------------------------------------
    def load_initial(self) -> list[tuple[int, int]]:
        """Load the policy's static placement (no time); returns the experts loaded."""
        loaded = []
        for layer, expert in self.policy.initial_residency():
            layer, expert = int(layer), int(expert)
            self.cache.load(layer, expert)
            self.slots.taken(layer, expert)
            loaded.append((layer, expert))
        return loaded

    def step_gamma(self, step: int, gamma: int) -> int | None:
        """The draft length the policy chooses for ``step`` (``adaptive_gamma``), checked against
        0..``gamma`` (the run's largest); None when the policy does not choose (the run's gamma)."""
        if not self.policy.adaptive_gamma:
            return None
        g = int(self.policy.choose_gamma(step))
        if not 0 <= g <= gamma:
            raise ValueError(f"policy {self.policy.name!r} chose gamma {g} at step {step}; allowed 0..{gamma}")
        return g

    def step_start(self, step: int, signals: Signals) -> None:
        """The draft phase of ``step`` begins."""
        self.policy.on_step_start(step, signals, self.cache)

    def step_end(self, step: int, n_verified: int, accepted: int) -> None:
        """``step`` verified ``n_verified`` positions and accepted ``accepted`` drafts."""
        self.policy.on_step_end(step, n_verified, accepted)

    def layer_start(self, layer: int) -> None:
        """Pin ``layer`` (its experts may not be evicted while it computes) and tell the policy."""
        self.cache.pinned[layer] = True
        self.policy.on_layer_start(layer, self.cache)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, req: np.ndarray,
              n: np.ndarray) -> LayerPlan:
        """Ask the policy where ``layer``'s requested experts ``req`` (``n`` tokens each) run and
        apply the answer: tallies, reservations, copies to start."""
        placement = self.policy.place(layer, counts, signals, self.cache)
        return self.apply(layer, req, n, placement)

    def layer_end(self, layer: int, counts: np.ndarray) -> None:
        """Unpin ``layer`` and tell the policy (it may enqueue prefetches)."""
        self.cache.pinned[layer] = False
        self.policy.on_layer_end(layer, counts, self.cache)

    # --- placements -------------------------------------------------------------------------------
    def apply(self, layer: int, req: np.ndarray, n: np.ndarray, placement: Placement) -> LayerPlan:
        """Tally ``layer``'s requests and turn ``placement`` into a :class:`LayerPlan`."""
        c = self.c
        where = np.asarray(placement.where)[req]
        on_gpu, on_cpu = tally_requests(c, self.cache, self.prefetched, layer, req, where, self.policy.name)
        gpu, cpu = req[on_gpu].tolist(), req[on_cpu].tolist()
        plan = LayerPlan(gpu=gpu, cpu=cpu, gpu_s=self._seconds(self.gpu_tab, n, on_gpu, gpu),
                         cpu_s=self._seconds(self.cpu_tab, n, on_cpu, cpu))
        c.gpu_execs += len(plan.gpu)
        c.cpu_execs += len(plan.cpu)
        if placement.bulk:
            self._apply_bulk(layer, req, n, where, placement.extra_fetch, plan)
            return plan
        if len(plan.gpu) + len(plan.cpu) < req.size:
            rest = ~(on_gpu | on_cpu)
            for e, k, w in zip(req[rest].tolist(), n[rest].tolist(), where[rest].tolist()):
                self._apply_one(layer, e, k, w, plan)
        for e in placement.extra_fetch:
            e = int(e)
            if self.cache.inflight[layer, e]:
                plan.waits.append(Wait((layer, e), None, (), 0.0))
            elif not self.cache.resident[layer, e] and self.reserve(layer, e, demand=True):
                plan.waits.append(Wait((layer, e), Copy(layer, (e,), DEMAND), (), 0.0))
        return plan

    def _seconds(self, tab: np.ndarray, n: np.ndarray, mask: np.ndarray, experts: list) -> float:
        """The cost table's seconds of the experts under ``mask`` (``n`` tokens each): one dot
        product, 0.0 without one when none is (the tables are finite, so the dot would be 0.0)."""
        if not experts and self._finite:
            return 0.0
        return float(tab[n].dot(mask))

    def _apply_one(self, layer: int, e: int, k: int, w: int, plan: LayerPlan) -> None:
        """A FETCH or STREAM placement of one requested expert."""
        c = self.c
        g = float(self.gpu_tab[k])
        if w == STREAM:
            plan.waits.append(Wait(None, Copy(layer, (e,), STREAM_COPY), (e,), g))
        elif w != FETCH:
            raise ValueError(f"policy {self.policy.name!r} returned placement code {w} (valid: 0..3)")
        elif self._present(layer, e, g, plan):
            pass
        elif self.reserve(layer, e, demand=True):
            plan.waits.append(Wait((layer, e), Copy(layer, (e,), DEMAND), (e,), g))
        else:
            self._fallback(e, k, plan)
            return
        c.gpu_execs += 1

    def _present(self, layer: int, e: int, g: float, plan: LayerPlan) -> bool:
        """A FETCH of a resident (computed now) or in-flight (awaited) expert; False if absent."""
        if self.cache.resident[layer, e]:
            plan.gpu.append(e)
            plan.gpu_s += g
        elif self.cache.inflight[layer, e]:
            plan.waits.append(Wait((layer, e), None, (e,), g))
        else:
            return False
        return True

    def fell_back(self) -> None:
        """An awaited demand copy failed (:meth:`landed` with ``ok=False``): its expert runs on the
        CPU instead of the GPU, and the tallies say so (an executor calls this; it never re-tallies)."""
        self.c.gpu_execs -= 1
        self.c.cpu_execs += 1

    def _fallback(self, e: int, k: int, plan: LayerPlan) -> None:
        """A demand fetch found no slot: the expert runs on the CPU."""
        self.c.fallbacks += 1
        self.c.cpu_execs += 1
        plan.cpu.append(e)
        plan.cpu_s += float(self.cpu_tab[k])

    def _apply_bulk(self, layer: int, req, n, where, extra, plan: LayerPlan) -> None:
        """All of a layer's demand fetches as one block copy (``Placement.bulk``): the routed
        FETCH experts (resident ones computed now, in-flight ones awaited, absent ones wanted, in
        request order) then the absent ``extra`` ones, reserved together (:meth:`reserve_many`)."""
        cache, c = self.cache, self.c
        if np.count_nonzero(where == STREAM):    # (count_nonzero: faster than any() on small arrays)
            raise ValueError(f"policy {self.policy.name!r}: a bulk placement cannot STREAM")
        fetch = where == FETCH
        ef, nf = req[fetch], n[fetch]
        res_row, fly_row = cache.resident[layer], cache.inflight[layer]
        res, fly = res_row[ef], fly_row[ef]
        g = self.gpu_tab[nf]
        if np.count_nonzero(res):               # computed now: the same sums as one by one
            plan.gpu.extend(ef[res].tolist())
            for x in g[res].tolist():
                plan.gpu_s += x
        if np.count_nonzero(fly):
            plan.waits.extend(Wait((layer, e), None, (e,), x) for e, x in zip(ef[fly].tolist(), g[fly].tolist()))
        absent = ~(res | fly)
        want = ef[absent]
        gpu_of = dict(zip(want.tolist(), zip(g[absent].tolist(), nf[absent].tolist())))
        c.gpu_execs += ef.size
        ex = np.asarray(extra, dtype=np.int64)
        if ex.size:
            fly = fly_row[ex]
            if np.count_nonzero(fly):
                plan.waits.extend(Wait((layer, e), None, (), 0.0) for e in dict.fromkeys(ex[fly].tolist()))
            rest = ex[~fly & ~res_row[ex]]
            if gpu_of and rest.size:            # not twice: a routed expert is wanted already
                mark = np.zeros(cache.n_experts, dtype=bool)
                mark[want] = True
                rest = rest[~mark[rest]]
            want = np.concatenate((want, rest)) if want.size else rest
        if not want.size:
            return
        granted = self.reserve_many(layer, want)
        if isinstance(granted, np.ndarray):
            granted = granted.tolist()
        if len(granted) < want.size:
            for e in want[len(granted):].tolist():
                if e in gpu_of:  # a routed expert that found no slot runs on the CPU
                    c.gpu_execs -= 1
                    self._fallback(e, gpu_of[e][1], plan)
        if granted:
            computed = tuple(filter(gpu_of.__contains__, granted))
            plan.waits.append(Wait((layer, granted[0]), Copy(layer, tuple(granted), DEMAND), computed,
                                   sum(gpu_of[e][0] for e in computed)))

    # --- slots ----------------------------------------------------------------------------------------
    def reserve(self, layer: int, expert: int, demand: bool) -> bool:
        """Reserve a slot for (layer, expert), evicting the policy's victim if none is free."""
        cache = self.cache
        if cache.n_used >= cache.n_slots:
            victim = self.policy.victim(layer, expert, cache, demand)
            if victim is None:
                return False
            self.evict(int(victim[0]), int(victim[1]))
        self._take(layer, expert)
        return True

    def _take(self, layer: int, expert: int, landed: bool = False) -> None:
        """Reserve a free slot for (layer, expert) (its transfer begins); ``landed``: and the
        transfer lands at once (a copy of a planned run)."""
        if landed:
            self.cache.load(layer, expert)
        else:
            self.cache.begin(layer, expert)
        if self._observed:
            self.slots.taken(layer, expert)

    def reserve_many(self, layer: int, experts: list) -> list:
        """Reserve slots for a block copy, in order; returns the experts that got one (a prefix of
        ``experts``, a list or an int array: the same kind, except a list when the policy is asked
        one victim at a time).

        The policy's :meth:`~sim.policies.base.Policy.victims` names all victims at once; when it
        returns None the policy is asked one victim at a time, as for single transfers."""
        cache = self.cache
        short = len(experts) - cache.n_free
        named = self.policy.victims(layer, short, cache) if short > 0 else ()
        if named is None:
            ids = experts.tolist() if isinstance(experts, np.ndarray) else experts
            return [e for e in ids if self.reserve(layer, e, demand=True)]
        victims = np.asarray(named, dtype=np.int64).reshape(-1, 2) if len(named) else ()
        if len(victims):
            vl, ve = victims[:, 0], victims[:, 1]
            seen = np.zeros(cache.n_layers * cache.n_experts, dtype=bool)
            seen[vl * cache.n_experts + ve] = True
            if np.count_nonzero(seen) != len(victims):
                raise CacheError(f"policy {self.policy.name!r} named the same victim twice")
            cache.evict_many(vl, ve)
            self.prefetched.evicted(vl, ve)
            self.c.evictions += len(victims)
            if self._observed:
                for l, e in victims.tolist():
                    self.slots.released(l, e)
        granted = experts[:max(0, min(len(experts), cache.n_free))]
        if len(granted):
            cache.begin_many(layer, granted)
            if self._observed:
                for e in (granted.tolist() if isinstance(granted, np.ndarray) else granted):
                    self.slots.taken(layer, e)
        return granted

    def evict(self, layer: int, expert: int) -> None:
        """Free a resident expert's slot."""
        self.cache.evict(layer, expert)
        if self._observed:
            self.slots.released(layer, expert)
        self.prefetched.evicted_one(layer, expert)
        self.c.evictions += 1

    # --- transfers ------------------------------------------------------------------------------------
    def next_prefetch(self) -> Copy | None:
        """The link is idle: the policy's next prefetch that needs a copy and got a slot, or None.

        Entries already resident or in flight are skipped (at most ``MAX_PREFETCH_TRIES``)."""
        cache, pick = self.cache, self.policy.next_transfer
        resident, inflight = cache.resident, cache.inflight
        for _ in range(MAX_PREFETCH_TRIES):
            item = pick(cache)
            if item is None:
                return None
            layer, expert = int(item[0]), int(item[1])
            if not (resident.item(layer, expert) or inflight.item(layer, expert)) \
                    and self.reserve(layer, expert, demand=False):
                return Copy(layer, (expert,), PREFETCH)
        return None

    def prefetch_run(self, now: float, duration: float, horizon: float, on_landed=None):
        """The link's coalesced run (:mod:`sim.engine.link`): prefetches on an idle link from ``now``, each
        ``duration`` long, back to back, each one that lands strictly before ``horizon`` landed here
        (``on_landed(layer, expert, start, land)`` told after each) -- the same copies, calls and
        bookkeeping as one :meth:`next_prefetch` and one :meth:`landed_prefetch` per copy, without
        a trip through the link and SimPy for each. A policy that plans whole runs
        (:meth:`sim.policies.base.Policy.plan_prefetches`) is asked once per run
        (:meth:`_planned_run`); otherwise :meth:`_copy_run` asks it once per copy. Returns
        ``(copy, now, landed)``: the first prefetch that does not land before ``horizon`` (its slot
        reserved; the executor moves it) or None when the policy has none, the link's time then,
        and how many landed."""
        if self.planned_runs:
            return self._planned_run(now, duration, horizon, on_landed)
        return self._copy_run(now, duration, horizon, on_landed)

    def _copy_run(self, now: float, duration: float, horizon: float, on_landed=None):
        """:meth:`prefetch_run` one :meth:`next_prefetch` and :meth:`landed_prefetch` per copy
        (every policy; the reference the planned runs are tested against)."""
        n = 0
        while (copy := self.next_prefetch()) is not None:
            land = now + duration
            if not land < horizon:
                return copy, now, n
            layer, expert = copy.layer, copy.experts[0]
            self.landed_prefetch(layer, expert)
            if on_landed is not None:
                on_landed(layer, expert, now, land)
            now, n = land, n + 1
        return None, now, n

    def _planned_run(self, now: float, duration: float, horizon: float, on_landed=None):
        """:meth:`prefetch_run` with the policy's plan: how many copies land before ``horizon`` is
        counted first (the same float sums), the policy names that many picks and victims plus
        the one left on the link, and the core applies them in order with its one-copy helpers
        (:meth:`evict`, :meth:`_take`, :meth:`_count_prefetch`). At most ``RUN_CHUNK`` copies are
        planned at once; a longer run continues with the next plan."""
        n, plan = 0, self.policy.plan_prefetches
        while True:
            k, t = 0, now
            while k < RUN_CHUNK:
                t_next = t + duration
                if not t_next < horizon:
                    break
                t, k = t_next, k + 1
            picks = plan(self.cache, k)
            layer = expert = None
            for i, (layer, expert, victim) in enumerate(picks):
                if victim is not None:
                    self.evict(victim[0], victim[1])
                if i == k:
                    self._take(layer, expert)
                    break
                land = now + duration
                self._take(layer, expert, landed=True)
                self._count_prefetch(layer, expert)
                if on_landed is not None:
                    on_landed(layer, expert, now, land)
                now, n = land, n + 1
            if len(picks) <= k:
                return None, now, n
            land = now + duration
            if k < RUN_CHUNK or not land < horizon:
                return Copy(layer, (expert,), PREFETCH), now, n
            self.landed_prefetch(layer, expert)    # a full chunk: the extra pick lands as well
            if on_landed is not None:
                on_landed(layer, expert, now, land)
            now, n = land, n + 1

    def landed_prefetch(self, layer: int, expert: int) -> None:
        """One prefetched expert arrived (:meth:`landed` of a PREFETCH copy)."""
        self._land_prefetch(layer, expert)
        self.policy.on_transfer_done(layer, expert, self.cache)

    def _land_prefetch(self, layer: int, expert: int) -> None:
        """The core's part of :meth:`landed_prefetch` (cache, tallies, tracker): not the policy's."""
        self.cache.land(layer, expert)
        self._count_prefetch(layer, expert)

    def _count_prefetch(self, layer: int, expert: int) -> None:
        """Tally one landed prefetch."""
        c = self.c
        c.pcie_bytes += self.expert_bytes
        c.prefetches += 1
        self.prefetched.landed(layer, expert)

    def landed(self, copy: Copy, ok: bool = True) -> None:
        """``copy``'s bytes arrived (``ok``), or the copy failed: its slots are freed."""
        c, cache, layer = self.c, self.cache, copy.layer
        if not ok:
            self.failed += 1
            if copy.kind != STREAM_COPY:
                for e in copy.experts:
                    cache.cancel(layer, e)
                    self.slots.released(layer, e)
            return
        kind = copy.kind
        if kind == PREFETCH:                   # the common case first: one prefetched expert
            self.landed_prefetch(layer, copy.experts[0])
            return
        c.pcie_bytes += self.expert_bytes * len(copy.experts)
        if kind == STREAM_COPY:
            c.streams += 1
        elif len(copy.experts) > 1:
            experts = list(copy.experts)
            cache.land_many(layer, experts)
            c.demand_fetches += len(experts)
            self.policy.on_transfers_done(layer, experts, cache)
        else:
            expert = copy.experts[0]
            cache.land(layer, expert)
            c.demand_fetches += 1
            self.policy.on_transfer_done(layer, expert, cache)
