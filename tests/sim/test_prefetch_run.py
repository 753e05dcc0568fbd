"""The fused prefetch loop against one next_prefetch + landed per copy.

:meth:`sim.protocol.ProtocolCore.prefetch_run` lands a whole run of prefetches in one call. On a
hand-made case that meets every branch -- a queued expert already
resident, one already in flight, a pick whose victim is refused, an eviction of an unrequested
prefetch, a failed reservation that the loop passes over -- it must call the policy in the same
order with the same arguments and leave the cache, the prefetch tracker and the tallies exactly
as the one-copy reference does.
"""
from dataclasses import asdict

import numpy as np
import pytest

from sim.protocol.expert_cache import CacheError, ExpertCache
from sim.protocol import PREFETCH, Copy, ProtocolCore
from tests.sim.doubles import FetchFIFO

L, E, SLOTS = 2, 6, 3
QUEUE = [(0, 0), (0, 1), (1, 0), (0, 1), (1, 1), (1, 2), (0, 3), (1, 3), (0, 4)]


class Logged(FetchFIFO):
    """FetchFIFO that logs every call the core makes and refuses the victim for ``refuse`` picks."""

    def __init__(self, refuse=((1, 2),)):
        super().__init__(prefetch=QUEUE)
        self.refuse, self.log = set(refuse), []

    def next_transfer(self, cache):
        item = super().next_transfer(cache)
        self.log.append(("pick", item))
        return item

    def victim(self, layer, expert, cache, demand):
        v = None if (layer, expert) in self.refuse else super().victim(layer, expert, cache, demand)
        self.log.append(("victim", layer, expert, demand, v))
        return v

    def on_transfer_done(self, layer, expert, cache):
        self.log.append(("done", layer, expert, bool(cache.resident[layer, expert])))
        super().on_transfer_done(layer, expert, cache)


def _core(refuse=((1, 2),)):
    policy = Logged(refuse)
    cache = ExpertCache(L, E, SLOTS)
    policy.reset(None, cache)
    core = ProtocolCore(policy, cache, expert_bytes=1000.0, gpu_tab=np.zeros(4), cpu_tab=np.zeros(4))
    cache.load(1, 1)                       # resident from the start: skipped when popped
    policy.order.append((1, 1))
    core.prefetched.landed(1, 1)           # counted as an unrequested prefetch until evicted
    policy.on_step_start(0, None, cache)
    return core, policy


def _state(core):
    return (core.cache.resident.tolist(), core.cache.inflight.tolist(), core.cache.n_used,
            core.prefetched.flags.tolist(), core.prefetched.n, asdict(core.c))


def test_fused_run_equals_one_copy_at_a_time():
    ref, ref_pol = _core()
    copies = []
    for _ in range(5):                     # four land, the fifth is left on the link
        copy = ref.next_prefetch()
        copies.append(copy)
        if len(copies) < 5:
            ref.landed(copy)
    fused, pol = _core()
    told = []
    copy, now, n = fused.prefetch_run(0.0, 0.25, 1.0 + 1e-12, lambda *a: told.append(a))
    assert (n, now) == (4, 1.0)
    assert told == [(c.layer, c.experts[0], 0.25 * i, 0.25 * (i + 1)) for i, c in enumerate(copies[:4])]
    assert copy == copies[4] == Copy(0, (3,), PREFETCH)
    assert pol.log == ref_pol.log
    assert _state(fused) == _state(ref)
    # the branches were met: (0, 1) popped twice, (1, 2)'s victim refused, unrequested prefetches
    # evicted (the tracker: 1 + 4 landed - 3 evicted)
    assert ("pick", (0, 1)) in pol.log[3:] and ("victim", 1, 2, False, None) in pol.log
    assert fused.c.evictions == 3 and fused.prefetched.n == 2 and fused.c.prefetches == 4
    fused.cache.check()


def test_fused_run_stops_at_the_horizon_and_when_the_policy_has_none():
    core, pol = _core()
    copy, now, n = core.prefetch_run(2.0, 0.5, 2.5)      # the first lands at 2.5: not before 2.5
    assert (copy, now, n) == (Copy(0, (0,), PREFETCH), 2.0, 0)
    assert core.cache.inflight[0, 0] and core.c.prefetches == 0
    core.landed(copy)
    copy, now, n = core.prefetch_run(2.5, 0.5, float("inf"))
    assert copy is None and n == 6 and now == 5.5        # the queue ran dry
    assert pol.log[-1] == ("pick", None)


def test_fused_run_checks_the_victim_like_the_cache():
    core, pol = _core(refuse=())
    core.cache.pinned[1] = True            # (1, 1), the oldest arrival, is pinned: FetchFIFO skips it
    pol.victim = lambda layer, expert, cache, demand: (1, 1)     # a policy naming a pinned expert
    with pytest.raises(CacheError, match="pinned"):
        core.prefetch_run(0.0, 0.25, float("inf"))
