"""The oracle: perfect knowledge of every future routing (Belady eviction, next-use prefetch,
exact per-layer CPU/GPU split)."""
from __future__ import annotations

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.belady import NEVER, FarthestHeap, NextUse
from sim.policies.common import OffloadPolicy, gpu_where, present_row, requested
from sim.policies.split import DEFAULT_CAP, ExpertTimes, best_split


class Oracle(OffloadPolicy):
    """A reference that knows ``ctx.future_counts`` (``needs_future = True``); speculative.

    Mechanism:

    * Initial content: the ``n_slots`` experts with the earliest first use.
    * Eviction (Belady / MIN): the evictable expert whose next use is farthest (never used again
      first). A prefetch only evicts an expert used strictly later than the one it brings.
    * Prefetch: whenever the link is idle, the absent expert with the soonest next use (from the
      layer about to run onward, any depth ahead), if a slot is free or the Belady victim is used
      later. Limited only by the link and the slots.
    * Placement: the per-layer CPU/GPU split minimising ``max(T_cpu, T_gpu)`` given the exact
      counts (:func:`sim.policies.split.best_split`, the balance Fiddler's source comment names), where a GPU-side absent
      expert is demand-fetched.

    Why it bounds the other policies, and how far: for a fixed request sequence and one pool of
    equal-size slots, Belady maximises hits among all demand-paging caches (Belady 1966), and
    prefetching in next-use order without ever evicting something needed sooner is the classic
    optimal offline prefetch order when transfers are unit-time (Cao, Felten, Karlin & Li,
    SIGMETRICS'95). Every policy in this protocol sees the same requests and cost table and
    chooses among the same actions (GPU / CPU / fetch / stream, prefetch, evict). But end-to-end
    time here is not hit count: link and compute overlap, the draft-phase window, demand fetches
    that wait behind a prefetch in flight, and the split optimising one layer at a time with an
    idle-link assumption are not jointly optimised (that is a scheduling problem far beyond
    brute force). So the oracle is a strong heuristic bound, not a proven optimum; the tests
    check empirically that no other policy beats it on random small configurations.

    Parameters:
        split_cap: class-count vectors searched exhaustively per layer before falling back to a
            local search (default 4096; AR layers never exceed it).
        link_wait: when a prefetch is in flight at placement time, the split assumes the first
            demand fetch starts after ``link_wait * transfer_s`` (default 1.0: a whole transfer,
            the worst case; the policy cannot see how much of it is left). With 0 the split
            trusts an idle link and over-fetches behind a busy one.
    """

    speculative = True
    needs_future = True

    def __init__(self, split_cap: int = DEFAULT_CAP, link_wait: float = 1.0):
        self.split_cap = split_cap
        self.link_wait = link_wait

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        if ctx.future_counts is None:
            raise ValueError("the oracle needs ctx.future_counts (needs_future = True)")
        self.index = NextUse(ctx.future_counts)
        self.heap = FarthestHeap(self.index)
        self.L = ctx.n_layers
        self.step = 0
        self.pos = 0          # first position whose requests have not been served yet
        self.cursor = 0       # positions before it hold only present experts (prefetch scan)
        self.started = False
        self.split_memo: dict = {}   # best_split answers per layer shape (one cost table per run)
        self.times = ExpertTimes(ctx.costs)
        self._ahead = None    # (prefetch offered, its victim) until the core's next call

    def initial_residency(self) -> list[tuple[int, int]]:
        return self.index.first_uses(self.ctx.n_slots)

    def on_step_start(self, step: int, signals: Signals, cache) -> None:
        self._ahead = None
        self.step = step
        self.pos = step * self.L
        if not self.started:
            self.heap.rebuild(cache, self.pos)
            self.started = True

    def on_layer_start(self, layer: int, cache) -> None:
        self._ahead = None
        self.pos = self.step * self.L + layer

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        self._ahead = None
        evictable = np.count_nonzero(cache.resident) - np.count_nonzero(cache.resident[cache.pinned])
        spare = cache.n_free + int(evictable)
        wait = self.link_wait * self.ctx.costs.transfer_s if np.count_nonzero(cache.inflight) else 0.0
        on_gpu = best_split(counts, present_row(cache, layer), self.ctx.costs,
                            max_fetch=spare, cap=self.split_cap, link_wait_s=wait, memo=self.split_memo,
                            times=self.times)
        where = gpu_where(cache, layer, counts, on_gpu)
        self.pos = self.step * self.L + layer + 1
        self.heap.push_many(layer, requested(counts).tolist(), self.pos)
        return Placement(where)

    def next_transfer(self, cache):
        self._ahead = None
        q = max(self.cursor, self.pos)
        resident, inflight = cache.resident, cache.inflight
        while q < self.index.end:
            l = q % self.L
            res, fly = resident[l], inflight[l]
            missing = [e for e in self.index.uses_at(q) if not (res[e] or fly[e])]
            if missing:
                break
            q += 1
        self.cursor = q
        if q >= self.index.end:
            return None
        item = (q % self.L, missing[0])
        if cache.n_free <= 0:
            far = self.heap.farthest(cache, self.pos)
            if far is None or far[0] <= q:
                return None
            self._ahead = (item, far)  # the victim the core asks for next, found already
        return self.offer(item)

    def victim(self, layer: int, expert: int, cache, demand: bool):
        ahead, self._ahead = self._ahead, None
        if not demand and ahead is not None and ahead[0] == (layer, expert):
            far = ahead[1]             # nothing changed since next_transfer searched it
        else:
            far = self.heap.farthest(cache, self.pos)
        need = self.index.next_use(layer, expert, self.pos)
        if far is None or (not demand and far[0] <= need):
            return self.refuse(demand)
        nu, l, e = far
        if nu < NEVER:
            self.cursor = min(self.cursor, nu)
        return (l, e)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self._ahead = None
        self.heap.push(layer, expert, self.pos)


class OracleAR(Oracle):
    """The same oracle under autoregressive decoding (gamma = 0): the bound for the AR policies.

    Everything as :class:`Oracle` (Belady eviction, next-use prefetch, exact split), one token per
    step. Parameters: ``split_cap`` and ``link_wait`` as :class:`Oracle`.
    """

    speculative = False
