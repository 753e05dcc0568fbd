"""OnDemandLRU and the LRUOrder helper: least recently used goes first, pinned layers never."""
import numpy as np
import pytest

from sim.policies import make_policy
from sim.policies.base import FETCH, GPU, Signals
from sim.policies.recency import StampLRU
from tests.policies.conftest import Driver, context, onehot, random_counts


def test_stamp_lru_touch_and_oldest():
    lru = StampLRU(2, 3)
    lru.touch(0, 1)
    lru.touch(1, [0, 2])
    lru.touch(0, 1)
    everything = np.ones((2, 3), dtype=bool)
    assert lru.oldest(everything) == (0, 0)            # never used: oldest, lowest index first
    only_used = lru.stamp > 0
    assert lru.oldest(only_used) == (1, 0)             # (1,0) and (1,2) share a tick: lower id first
    assert lru.oldest_in(0, only_used[0]) == 1
    assert lru.oldest(np.zeros((2, 3), dtype=bool)) is None


def test_lru_evicts_least_recent_hand_sequence():
    E = 4
    seq = np.array([[onehot(E, 0), onehot(E, 0)],
                    [onehot(E, 1), onehot(E, 1)],   # layer 1 miss: (0,0) is the LRU unpinned expert
                    [onehot(E, 0), onehot(E, 1)],   # layer 0 miss: (1,0) is the LRU unpinned expert
                    [onehot(E, 1), onehot(E, 1)]])  # both hits
    d = Driver(make_policy("ondemand_lru"), context(L=2, E=E, slots=3)).run(seq)
    assert d.evicted == [(0, 0), (1, 0)]
    assert (d.hits, d.fetches, d.cpu) == (3, 5, 0)


def _reference_lru_hits(seq, slots):
    """Independent LRU over (layer, expert) with the computing layer protected; a layer's hits are
    used when it is placed, its misses when they land (in expert order)."""
    last, t, hits = {}, 0, 0
    for counts in seq:
        for layer, row in enumerate(counts):
            req = list(np.flatnonzero(row))
            for e in sorted(req, key=lambda e: (layer, e) not in last):
                t += 1
                if (layer, e) in last:
                    hits += 1
                elif len(last) >= slots:
                    victim = min((k for k in last if k[0] != layer), key=last.get)
                    del last[victim]
                last[(layer, e)] = t
    return hits


@pytest.mark.parametrize("seed", range(5))
def test_lru_matches_reference_on_random_traces(seed):
    rng = np.random.default_rng(seed)
    seq = random_counts(rng, S=30, L=3, E=6, k=2)
    d = Driver(make_policy("ondemand_lru"), context(L=3, E=6, k=2, slots=7)).run(seq)
    assert d.hits == _reference_lru_hits(seq, 7)
    assert d.cpu == 0 and d.fallbacks == 0


def test_lru_places_resident_on_gpu_and_fetches_misses():
    pol = make_policy("ondemand_lru")
    d = Driver(pol, context(L=1, E=4, slots=2))
    d.cache.load(0, 2)
    where = pol.place(0, onehot(4, 1, 2), Signals(), d.cache).where
    assert where[2] == GPU and where[1] == FETCH
    assert pol.next_transfer(d.cache) is None
