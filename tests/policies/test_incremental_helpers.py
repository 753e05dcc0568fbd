"""The incremental helpers give exactly the answers of the whole-array computations they replace:
LRU orders vs ``StampLRU``'s argmin, quota donors vs a lexsort, the split memo and its vectorised
objective vs fresh searches, the Belady heap's batch push vs single pushes, and MoE-Infinity's
row-by-row priority vs a full recomputation."""
import numpy as np
import pytest

from sim.protocol.expert_cache import ExpertCache
from sim.policies import make_policy
from sim.policies.base import CPU, FETCH, GPU
from sim.policies.belady import FarthestHeap, NextUse
from sim.policies.common import fetch_all_where, gpu_where
from sim.policies.quota import QuotaVictims, even_quotas
from sim.policies.recency import LayerLRUOrder, LRUOrder, StampLRU
from sim.policies.split import ExpertTimes, best_split, two_ended
from tests.policies.conftest import context, costs, random_counts


def _reference_quota_victim(layer, cache, quota, current, pick):
    """The donor rule written with a lexsort, as the module docstring states it."""
    usage = cache.resident.sum(axis=1) + cache.inflight.sum(axis=1)
    if usage[layer] >= quota[layer] and not cache.pinned[layer]:
        own = pick(layer)
        if own is not None:
            return own
    n = len(quota)
    behind = (current - np.arange(n)) % n
    behind = np.where(behind == 0, n, behind)
    for donor in np.lexsort((behind, -(usage - quota))):
        if donor != layer and not cache.pinned[donor]:
            cand = pick(int(donor))
            if cand is not None:
                return cand
    return None


def _churn(rng, cache, lrus, steps, L, E):
    """Random lands (touched, as the protocol requires), evictions, pins and touches; yields
    after each change so the caller can compare answers."""
    for _ in range(steps):
        r = rng.random()
        l, e = int(rng.integers(L)), int(rng.integers(E))
        if r < 0.35 and not cache.present(l, e) and cache.n_free > 0:
            cache.begin(l, e)
            cache.land(l, e)
            for lru in lrus:
                lru.touch(l, e)
        elif r < 0.55 and cache.resident[l, e] and not cache.pinned[l]:
            cache.evict(l, e)
        elif r < 0.65:
            cache.pinned[:] = False
            cache.pinned[rng.choice(L, size=int(rng.integers(0, 3)), replace=False)] = True
        else:
            ids = np.flatnonzero(cache.resident[l] & (rng.random(E) < 0.5))
            for lru in lrus:
                lru.touch(l, ids if rng.random() < 0.5 else ids[::-1].tolist())
        yield


@pytest.mark.parametrize("seed", range(4))
def test_lru_orders_match_stamp_argmin(seed):
    rng = np.random.default_rng(seed)
    L, E = 4, 6
    cache = ExpertCache(L, E, 9)
    for l, e in [(0, 1), (2, 3), (3, 0)]:
        cache.load(l, e)
    keep = rng.random((L, E)) < 0.8
    ref, glob, kept, per_layer = StampLRU(L, E), LRUOrder(L, E), LRUOrder(L, E, keep=keep), LayerLRUOrder(L, E)
    lrus = [ref, glob, kept, per_layer]
    avoid = rng.random((L, E)) < 0.3
    for _ in _churn(rng, cache, lrus, 600, L, E):
        evictable = cache.resident & ~cache.pinned[:, None]
        if rng.random() < 0.2:      # otherwise the same array: scans resume where they stopped
            avoid = rng.random((L, E)) < 0.3
        assert glob.oldest_evictable(cache) == ref.oldest(evictable)
        assert glob.oldest_evictable(cache, avoid=avoid) == ref.oldest(evictable & ~avoid)
        want = ref.oldest(evictable & ~avoid) or ref.oldest(evictable)
        assert glob.oldest_evictable(cache, avoid=avoid, fallback=True) == want
        assert kept.oldest_evictable(cache) == ref.oldest(evictable & keep)
        assert kept.evictable_count(cache) == int((evictable & keep).sum())
        for l in range(L):
            assert per_layer.oldest_evictable_in(l, cache) == ref.oldest_in(l, evictable[l])
        if rng.random() < 0.3:     # one touch per expert, in a given order
            l = int(rng.integers(L))
            ids = rng.permutation(np.flatnonzero(cache.resident[l])).tolist()
            per_layer.touch_each(l, ids)
            for e in ids:
                ref.touch(l, e)
                glob.touch(l, e)
                kept.touch(l, e)


@pytest.mark.parametrize("seed", range(4))
def test_lru_order_under_a_shrinking_avoid_set_as_sp_moe_uses_it(seed):
    """Per step a protected set; as layers run their rows leave it (a new array each time), the
    running layer is pinned; scans resume across these changes."""
    rng = np.random.default_rng(100 + seed)
    L, E = 5, 7
    cache = ExpertCache(L, E, 12)
    ref, lru = StampLRU(L, E), LRUOrder(L, E)
    steps = _churn(rng, cache, [ref, lru], 10_000, L, E)
    for _ in range(40):
        protect = rng.random((L, E)) < 0.4
        for current in range(-1, L):
            coming = protect.copy()
            coming[: current + 1] = False
            cache.pinned[:] = False
            if current >= 0:
                cache.pinned[current] = True
            for _ in range(int(rng.integers(0, 6))):
                next(steps)
                evictable = cache.resident & ~cache.pinned[:, None]
                fallback = bool(rng.random() < 0.5)
                want = ref.oldest(evictable & ~coming)
                if want is None and fallback:
                    want = ref.oldest(evictable)
                assert lru.oldest_evictable(cache, avoid=coming, fallback=fallback) == want


def test_lru_order_resumes_only_while_pins_and_avoid_are_unchanged():
    cache = ExpertCache(2, 3, 6)
    lru = LRUOrder(2, 3)
    for l, e in [(0, 0), (1, 0), (0, 1)]:
        cache.load(l, e)
        lru.touch(l, e)
    avoid = np.zeros((2, 3), dtype=bool)
    avoid[0, 0] = True
    assert lru.oldest_evictable(cache, avoid=avoid) == (1, 0)
    cache.pinned[1] = True
    assert lru.oldest_evictable(cache, avoid=avoid) == (0, 1)
    cache.pinned[1] = False
    assert lru.oldest_evictable(cache, avoid=avoid) == (1, 0)       # the pin went: rescanned
    assert lru.oldest_evictable(cache, avoid=np.zeros((2, 3), dtype=bool)) == (0, 0)


@pytest.mark.parametrize("seed", range(3))
def test_quota_donors_match_lexsort(seed):
    rng = np.random.default_rng(seed)
    L, E = 5, 8
    cache = ExpertCache(L, E, 20)
    quota = even_quotas(L, E, 20)
    donors = QuotaVictims(quota)
    lru = StampLRU(L, E)
    for _ in _churn(rng, cache, [lru], 400, L, E):
        mask = cache.resident & ~cache.pinned[:, None]

        def pick(l):
            e = lru.oldest_in(l, mask[l])
            return None if e is None or rng.random() < 0.2 else (l, e)

        layer, current = int(rng.integers(L)), int(rng.integers(L))
        state = rng.bit_generator.state
        got = donors.victim(layer, cache, current, pick)
        rng.bit_generator.state = state
        assert got == _reference_quota_victim(layer, cache, quota, current, pick)


def test_split_memo_times_and_where_codes_change_nothing():
    rng = np.random.default_rng(7)
    cost = costs(gpu=12.0, cpu=90.0, cpu_per_token=40.0, transfer=180.0, n_max=4)
    times, memo = ExpertTimes(cost), {}
    for _ in range(300):
        E = 10
        counts = rng.integers(0, 7, size=E) * (rng.random(E) < 0.6)     # beyond the table: extrapolated
        present = rng.random(E) < 0.4
        kw = dict(max_fetch=None if rng.random() < 0.3 else int(rng.integers(0, 4)),
                  cap=int(rng.choice([4096, 8])), link_wait_s=float(rng.choice([0.0, 90.0])))
        assert (best_split(counts, present, cost, memo=memo, **kw) == best_split(counts, present, cost, **kw)).all()
        assert (two_ended(counts, present, cost, times) == two_ended(counts, present, cost)).all()
    assert len(memo) < 300
    cache = ExpertCache(2, 6, 6)
    cache.load(0, 1)
    cache.load(0, 4)
    on_gpu = np.array([1, 1, 0, 0, 1, 0], dtype=bool)
    assert gpu_where(cache, 0, None, on_gpu).tolist() == [FETCH, GPU, CPU, CPU, GPU, CPU]
    assert fetch_all_where(cache, 0, np.ones(6)).tolist() == [FETCH, GPU, FETCH, FETCH, GPU, FETCH]


def test_next_use_memo_and_batch_push():
    fc = random_counts(np.random.default_rng(3), S=12, L=3, E=5, k=2, window=2)
    index = NextUse(fc)
    assert index.uses_at(4) is index.uses_at(4)
    one, many = FarthestHeap(index), FarthestHeap(index)
    for pos, (layer, experts) in enumerate([(0, [1, 3]), (2, [0]), (1, [4, 2, 0])]):
        for e in experts:
            one.push(layer, e, pos * 5)
        many.push_many(layer, experts, pos * 5)
    assert one._heap == many._heap


def _reference_priority(pol, current):
    """MoE-Infinity's priority from the EAM in one pass (the formula of its docstring)."""
    L, E = pol.eam.shape
    rows = pol.eam.sum(axis=1, keepdims=True)
    norm = np.where(rows > 0, pol.eam / np.maximum(rows, 1e-12), 1.0 / E)
    topo = 1.0 - ((np.arange(L) - current) % L) / (L + 1)
    return (norm + 1e-6) * topo[:, None] * pol.freq


def test_moe_infinity_priority_is_kept_equal_to_a_full_recomputation():
    rng = np.random.default_rng(5)
    pol = make_policy("moe_infinity")
    cache = ExpertCache(4, 6, 8)
    pol.reset(context(L=4, E=6, slots=8, profile=rng.random((4, 6))), cache)
    seen_from = 0
    for _ in range(80):
        seen_from = int(rng.integers(4))
        if rng.random() < 0.5:
            pol.on_layer_start(seen_from, cache)
        else:
            pol.on_layer_end(seen_from, rng.integers(0, 3, size=6), cache)
        assert np.array_equal(pol._prio, _reference_priority(pol, seen_from))
