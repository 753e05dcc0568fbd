"""Block reservations (:meth:`sim.protocol.ProtocolCore.reserve_many`): the policy's named victims.

The core evicts every named victim at once and grants the block's first experts as many slots as
are then free. A victim named twice is a policy bug and must raise before anything is evicted;
two victims that differ only by swapping layer and expert ids are distinct and must both go.
"""
import numpy as np
import pytest

from sim.protocol.expert_cache import CacheError, ExpertCache
from sim.protocol import ProtocolCore
from sim.protocol.plan import SlotObserver
from tests.sim.doubles import FetchFIFO

L, E, SLOTS = 3, 4, 4


class Named(FetchFIFO):
    """FetchFIFO whose block victims are the fixed list ``named``."""

    def __init__(self, named):
        super().__init__()
        self.named = named

    def victims(self, layer, n, cache):
        return self.named[:n]


class Log(SlotObserver):
    """Records every slot change the core reports."""

    def __init__(self):
        self.log = []

    def taken(self, layer, expert):
        self.log.append(("taken", layer, expert))

    def released(self, layer, expert):
        self.log.append(("released", layer, expert))


def _core(named, slots=None):
    policy = Named(named)
    cache = ExpertCache(L, E, SLOTS)
    policy.reset(None, cache)
    core = ProtocolCore(policy, cache, expert_bytes=1.0, gpu_tab=np.zeros(4), cpu_tab=np.zeros(4), slots=slots)
    for layer, expert in [(0, 1), (1, 0), (0, 2), (1, 2)]:
        cache.load(layer, expert)
    return core


def test_swapped_layer_and_expert_ids_are_two_victims():
    log = Log()
    core = _core([(0, 1), (1, 0), (0, 2)], slots=log)
    granted = core.reserve_many(2, [0, 1, 3])
    assert granted == [0, 1, 3]
    cache = core.cache
    assert not cache.resident[0, 1] and not cache.resident[1, 0] and not cache.resident[0, 2]
    assert cache.resident[1, 2] and cache.inflight[2, [0, 1, 3]].all() and cache.n_used == 4
    assert core.c.evictions == 3
    assert log.log == [("released", 0, 1), ("released", 1, 0), ("released", 0, 2),
                       ("taken", 2, 0), ("taken", 2, 1), ("taken", 2, 3)]


def test_a_victim_named_twice_raises_before_any_eviction():
    core = _core([(1, 0), (0, 1), (1, 0)])
    before = core.cache.resident.copy()
    with pytest.raises(CacheError, match="same victim twice"):
        core.reserve_many(2, [0, 1, 3])
    assert (core.cache.resident == before).all() and core.c.evictions == 0


def test_fewer_victims_than_needed_grant_the_first_experts():
    core = _core([(0, 2)])
    assert core.reserve_many(2, [3, 0, 1]) == [3]
    assert core.cache.inflight[2].tolist() == [False, False, False, True] and core.cache.n_used == 4
