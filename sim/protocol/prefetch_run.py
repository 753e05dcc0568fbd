"""A run of prefetches landed in one call: the link's fast path between two events.

Between two events of the other processes nothing but the link touches the cache or the policy
(:mod:`sim.link`), so every prefetch that lands before the next event can be chosen, reserved
and landed in one loop. :func:`prefetch_run` does exactly what one
:meth:`~sim.protocol.core.ProtocolCore.next_prefetch` followed by one
:meth:`~sim.protocol.core.ProtocolCore.landed` per copy does -- the same policy calls in the same
order, the same cache, tracker and counter updates, the same invariant checks -- with the slot
reservation, eviction and landing written out in the loop instead of six method calls per copy
(this is the simulator's innermost loop: tens of thousands of copies per run). The one-copy
methods stay the reference: the link's ``coalesce=False`` mode uses them, and the tests compare
the two timelines to the bit (``tests/sim/test_link_coalesced.py``).
"""
from __future__ import annotations

from sim.accounting import MAX_PREFETCH_TRIES
from sim.expert_cache import CacheError
from sim.protocol.plan import PREFETCH, Copy


def prefetch_run(core, now: float, duration: float, horizon: float, on_landed=None):
    """Prefetches of ``core``'s policy on an idle link from ``now``, each ``duration`` long, back
    to back: each one that lands strictly before ``horizon`` lands here (``on_landed(layer, expert,
    start, land)`` told after each). Returns ``(copy, now, landed)``: the first prefetch that
    does not land before ``horizon`` (its slot reserved; the executor moves it), or None when the
    policy has none; the link's time then; how many landed."""
    cache, policy, c, tracker = core.cache, core.policy, core.c, core.prefetched
    pick, victim_of, done = policy.next_transfer, policy.victim, policy.on_transfer_done
    resident, inflight, pinned, flags = cache.resident, cache.inflight, cache.pinned, tracker.flags
    slots = core.slots if core._observed else None
    n_slots, nbytes = cache.n_slots, core.expert_bytes
    n = 0
    while True:
        for _ in range(MAX_PREFETCH_TRIES):
            item = pick(cache)
            if item is None:
                return None, now, n
            layer, expert = int(item[0]), int(item[1])
            if resident.item(layer, expert) or inflight.item(layer, expert):
                continue
            if cache.n_used >= n_slots:                 # ProtocolCore.reserve: evict a victim
                v = victim_of(layer, expert, cache, False)
                if v is None:
                    continue
                vl, ve = int(v[0]), int(v[1])
                if not resident.item(vl, ve):
                    raise CacheError(f"cannot evict ({vl}, {ve}): not resident")
                if pinned.item(vl):
                    raise CacheError(f"cannot evict ({vl}, {ve}): layer {vl} is pinned while it computes")
                resident[vl, ve] = False
                cache.n_used -= 1
                if slots is not None:
                    slots.released(vl, ve)
                if tracker.n and flags.item(vl, ve):   # PrefetchTracker.evicted_one
                    tracker.n -= 1
                    flags[vl, ve] = False
                c.evictions += 1
            if cache.n_used >= n_slots:
                raise CacheError("no free slot: evict first")
            inflight[layer, expert] = True             # ExpertCache.begin
            cache.n_used += 1
            if slots is not None:
                slots.taken(layer, expert)
            break
        else:
            return None, now, n
        land = now + duration
        if not land < horizon:
            return Copy(layer, (expert,), PREFETCH), now, n
        c.pcie_bytes += nbytes                         # ProtocolCore.landed of one prefetch
        inflight[layer, expert] = False
        resident[layer, expert] = True
        c.prefetches += 1
        flags[layer, expert] = True                    # PrefetchTracker.landed
        tracker.n += 1
        done(layer, expert, cache)
        if on_landed is not None:
            on_landed(layer, expert, now, land)
        now = land
        n += 1
