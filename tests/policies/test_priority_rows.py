"""MoE-Infinity's row-by-row searches (:class:`sim.policies.priority_rows.RowExtremes`) give exactly
the answers of the whole-array argmin/argmax they replace, ties included, under random protocol
traffic: layer starts and ends, prefetches offered and reserved, victims evicted, copies landing."""
import numpy as np
import pytest

from sim.protocol.expert_cache import ExpertCache
from sim.policies import make_policy
from tests.policies.conftest import context


def _reference_lowest(pol, cache, below=np.inf):
    """The lowest-priority resident expert of an unpinned layer, by one masked argmin."""
    score = np.where(cache.resident, pol._prio, np.inf)
    score[cache.pinned] = np.inf
    i = int(score.argmin())
    low = score.flat[i]
    return divmod(i, cache.n_experts) if low < below and low != np.inf else None


def _reference_next(pol, cache):
    """The next prefetch by one masked argmax over the layers ahead (None: nothing to offer)."""
    first = pol.current + 1
    absent = ~(cache.resident[first:] | cache.inflight[first:])
    score = np.where(pol._seen[first:] & absent, pol._prio[first:], -np.inf)
    if not score.size or score.max() == -np.inf:
        return None
    l, e = divmod(int(score.argmax()), cache.n_experts)
    if cache.n_free <= 0 and _reference_lowest(pol, cache, score.flat[l * cache.n_experts + e]) is None:
        return None
    return first + l, e


def _land_one(rng, pol, cache):
    fly = np.argwhere(cache.inflight)
    if len(fly):
        l, e = (int(x) for x in fly[rng.integers(len(fly))])
        cache.land(l, e)
        pol.on_transfer_done(l, e, cache)


def _moe_infinity_victim(pol, layer, expert, cache, demand):
    """MoE-Infinity's victim by one whole-array pass: the lowest priority (below the incoming one's
    for a prefetch)."""
    return _reference_lowest(pol, cache, np.inf if demand else pol._prio[layer, expert])


def _reserve(pol, cache, layer, expert, demand, reference=_moe_infinity_victim):
    """The core's reserve: ask for a victim when no slot is free, checked against the reference."""
    if cache.n_used >= cache.n_slots:
        want = reference(pol, layer, expert, cache, demand)
        got = pol.victim(layer, expert, cache, demand)
        assert got == want
        if got is None:
            return
        cache.evict(*got)
    cache.begin(layer, expert)


@pytest.mark.parametrize("seed", range(6))
def test_moe_infinity_searches_equal_whole_array_passes(seed):
    rng = np.random.default_rng(seed)
    L, E, slots = 4, 8, 12
    pol = make_policy("moe_infinity")
    cache = ExpertCache(L, E, slots)
    # a coarse profile makes equal priorities (ties) common
    pol.reset(context(L=L, E=E, slots=slots, profile=rng.integers(1, 3, size=(L, E)).astype(float)), cache)
    for _ in range(60):
        for layer in range(L):
            cache.pinned[layer] = True
            pol.on_layer_start(layer, cache)
            counts = (rng.random(E) < 0.35).astype(np.int64)
            for e in np.flatnonzero(counts & ~(cache.resident[layer] | cache.inflight[layer])).tolist():
                _reserve(pol, cache, layer, e, demand=True)
            for _ in range(int(rng.integers(0, 12))):
                if rng.random() < 0.5:
                    _land_one(rng, pol, cache)
                want = _reference_next(pol, cache)
                item = pol.next_transfer(cache)
                assert item == want
                if item is not None:
                    _reserve(pol, cache, *item, demand=False)
            cache.pinned[layer] = False
            pol.on_layer_end(layer, counts, cache)
            if rng.random() < 0.5:
                _land_one(rng, pol, cache)
            assert pol.next_transfer(cache) == _reference_next(pol, cache)
            cache.check()


def _reference_adaspec_victim(pol, layer, expert, cache, demand):
    """AdaSpec's victim by one masked argmin over the evictable experts."""
    ok = cache.resident & ~cache.pinned[:, None]
    if not ok.any():
        return None
    masked = np.where(ok, pol.score, np.inf)
    l, e = divmod(int(np.argmin(masked)), cache.n_experts)
    if not demand and masked[l, e] + pol.swap_margin >= pol.score[layer, expert]:
        return None
    return l, e


@pytest.mark.parametrize("seed", range(4))
def test_adaspec_victim_equals_a_whole_array_pass(seed):
    rng = np.random.default_rng(seed)
    L, E, slots = 4, 8, 12
    pol = make_policy("adaspec")
    cache = ExpertCache(L, E, slots)
    pol.reset(context(L=L, E=E, slots=slots, gamma=2), cache)
    for _ in range(60):
        for layer in range(L):
            cache.pinned[layer] = True
            pol.on_layer_start(layer, cache)
            for _ in range(int(rng.integers(0, 8))):
                if rng.random() < 0.4:
                    _land_one(rng, pol, cache)
                demand = rng.random() < 0.5
                l = layer if demand else int(rng.integers(L))
                free = np.flatnonzero(~(cache.resident[l] | cache.inflight[l]))
                if not free.size:
                    continue
                e = int(rng.choice(free))
                _reserve(pol, cache, l, e, demand, _reference_adaspec_victim)
            cache.pinned[layer] = False
            # small integer counts and a decay make equal scores (ties) common
            pol.on_layer_end(layer, rng.integers(0, 2, size=E), cache)
            cache.check()
