"""Statistics against brute-force plain-Python simulations (exact equality) and hand cases."""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

from traces.cachesim import NEVER, belady_hits, hit_rate_from_ranks, lru_ranks, next_prev_use
from traces.schema import Trace
from traces.stats import analyse, default_slots, format_table, popularity_entropy

from .helpers import meta, random_routing


def bf_lru(seq, slots, sequential):
    """Hits of a per-layer LRU cache over a list of top-k rows (plain Python)."""
    cache, hits = OrderedDict(), 0
    for row in seq:
        row = [int(e) for e in row]
        if not sequential:
            hits += sum(e in cache for e in row)
        for e in row:
            if sequential:
                hits += e in cache
            if e in cache:
                cache.move_to_end(e)
            else:
                cache[e] = True
                if len(cache) > slots:
                    cache.popitem(last=False)
    return hits


def bf_belady(seq, slots):
    """Hits of the offline optimum: keep the token's k experts plus the slots-k cached, non-requested
    experts with the nearest next use (ties: lower id)."""
    seq = [[int(e) for e in row] for row in seq]
    cache, hits, k = set(), 0, len(seq[0])
    for t, row in enumerate(seq):
        hits += sum(e in cache for e in row)

        def next_use(e):
            return next((u for u in range(t + 1, len(seq)) if e in seq[u]), len(seq))

        keep = sorted(cache - set(row), key=lambda e: (next_use(e), e))[: slots - k]
        cache = set(keep) | set(row)
    return hits


CASES = [(seed, *shape) for seed, shape in enumerate(
    [(30, 2, 8, 2), (25, 3, 6, 3), (40, 1, 12, 4), (17, 2, 5, 1), (1, 2, 6, 2), (33, 2, 16, 5), (28, 3, 7, 6)])]


@pytest.mark.parametrize("seed,T,L,E,k", CASES)
def test_lru_both_orders_equal_brute_force_at_every_size(seed, T, L, E, k):
    ex = random_routing(np.random.default_rng(seed), T, L, E, k)
    batch, seq = lru_ranks(ex, E)
    for slots in range(1, E + 2):
        for ranks, sequential in ((batch, False), (seq, True)):
            want = sum(bf_lru(ex[:, l], slots, sequential) for l in range(L))
            assert int(np.count_nonzero(ranks < slots)) == want, (slots, sequential)


@pytest.mark.parametrize("seed,T,L,E,k", CASES)
def test_belady_equals_brute_force_at_every_size(seed, T, L, E, k):
    ex = random_routing(np.random.default_rng(100 + seed), T, L, E, k)
    sizes = list(range(k, E + 2))
    hits = belady_hits(ex, E, sizes)
    assert hits.shape == (len(sizes), L)
    for i, slots in enumerate(sizes):
        assert hits[i].tolist() == [bf_belady(ex[:, l], slots) for l in range(L)], slots


def test_belady_is_never_below_lru_and_rejects_too_small_caches():
    ex = random_routing(np.random.default_rng(7), 200, 4, 16, 3)
    sizes = [3, 4, 6, 8, 12]
    bel = belady_hits(ex, 16, sizes).sum(axis=1)
    lru = [np.count_nonzero(lru_ranks(ex, 16)[0] < c) for c in sizes]
    assert all(b >= l for b, l in zip(bel, lru)) and bel[0] == lru[0]
    with pytest.raises(ValueError, match="at least top_k=3"):
        belady_hits(ex, 16, [2])


def test_lru_ranks_hand_case():
    # one layer, k=2: tokens {0,1} {2,0} {1,3}
    ex = np.array([[[0, 1]], [[2, 0]], [[1, 3]]], np.int16)
    batch, seq = lru_ranks(ex, 4)
    # token 1: expert 0 was used before expert 1 -> rank 1; token 2: expert 1 is behind 0 and 2
    assert batch[:, 0].tolist() == [[NEVER, NEVER], [NEVER, 1], [2, NEVER]]
    # sequential: at token 1 the new expert 2 in slot 0 is touched first, pushing 0 to rank 2
    assert seq[:, 0].tolist() == [[NEVER, NEVER], [NEVER, 2], [2, NEVER]]
    assert hit_rate_from_ranks(batch, [1, 2, 3]) == {1: 0.0, 2: 1 / 6, 3: 2 / 6}


def test_next_and_previous_use():
    ex = np.array([[[0, 1]], [[2, 0]], [[1, 3]], [[0, 2]]], np.int16)
    nxt, prev = next_prev_use(ex, 4)
    assert nxt[:, 0].tolist() == [[1, 2], [3, 3], [4, 4], [4, 4]]
    assert prev[:, 0].tolist() == [[-1, -1], [-1, 0], [0, -1], [1, 1]]


def _trace(ex, E):
    T, L, k = ex.shape
    return Trace(meta=meta(L, E, k), experts=ex)


def bf_reuse(ex):
    T, L, k = ex.shape
    return [sum(len(set(ex[t, l]) & set(ex[t + 1, l])) for t in range(T - 1)) / ((T - 1) * k) for l in range(L)]


def bf_unique(ex, gamma):
    T, L, _ = ex.shape
    vals = [len(set(ex[s:s + gamma + 1, l].ravel())) for s in range(T - gamma) for l in range(L)]
    return sum(vals) / len(vals)


def bf_entropy(ex, E):
    out = []
    for l in range(ex.shape[1]):
        c = np.bincount(ex[:, l].ravel(), minlength=E) / ex[:, l].size
        out.append(-sum(p * math.log(p) for p in c if p > 0) / math.log(E))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_analyse_matches_brute_force_definitions(seed):
    rng = np.random.default_rng(seed)
    E, k = 8, 2
    traces = [_trace(random_routing(rng, T, 3, E, k), E) for T in (20, 13)]
    st = analyse(traces, slots=(2, 3, 5, 9), gammas=(0, 1, 3))
    exs = [t.experts for t in traces]
    n_trans = sum(len(x) - 1 for x in exs)
    reuse = np.sum([np.array(bf_reuse(x)) * (len(x) - 1) for x in exs], axis=0) / n_trans
    assert st["reuse_by_layer"] == pytest.approx(reuse.tolist(), abs=1e-12)
    assert st["reuse"] == pytest.approx(reuse.mean(), abs=1e-12)
    pooled = np.concatenate(exs)
    assert st["entropy_by_layer"] == pytest.approx(bf_entropy(pooled, E), abs=1e-12)
    acc = sum(x.size for x in exs)
    for c in (2, 3, 5, 9):
        lru = sum(bf_lru(x[:, l], c, False) for x in exs for l in range(3)) / acc
        bel = sum(bf_belady(x[:, l], c) for x in exs for l in range(3)) / acc
        assert st["lru_hit"][c] == pytest.approx(lru, abs=1e-12)
        assert st["belady_hit"][c] == pytest.approx(bel, abs=1e-12)
    for g in (0, 1, 3):
        n = [(len(x) - g) * 3 for x in exs]
        want = sum(bf_unique(x, g) * m for x, m in zip(exs, n)) / sum(n)
        assert st["unique_per_window"][g] == pytest.approx(want, abs=1e-12)
    assert st["unique_per_window"][0] == k


def test_reuse_and_lru_at_k_agree_and_uniform_routing_is_near_chance():
    ex = random_routing(np.random.default_rng(3), 3000, 4, 16, 4)
    st = analyse(_trace(ex, 16), slots=(4, 8))
    assert st["lru_hit"][4] == pytest.approx(st["reuse"] * 2999 / 3000, abs=1e-12)
    assert st["reuse"] == pytest.approx(4 / 16, abs=0.02)
    assert min(st["entropy_by_layer"]) > 0.99


def test_entropy_of_a_single_expert_is_zero_and_uniform_is_one():
    ex = np.zeros((10, 2, 1), np.int16)
    ex[:, 1, 0] = np.arange(10) % 5
    assert popularity_entropy(ex, 5).tolist() == pytest.approx([0.0, 1.0])


def test_default_slots_and_text_table():
    assert default_slots(128, 8) == (8, 16, 22, 32)
    assert default_slots(8, 2)[:3] == (2, 3, 4)
    assert default_slots(64, 6) == (6, 8, 11, 16)
    assert default_slots(32, 4) == (4, 5, 8, 16)
    st = analyse(_trace(random_routing(np.random.default_rng(0), 50, 2, 8, 2), 8))
    text = format_table(st)
    assert "LRU hit" in text and "Belady hit" in text and "unique experts/win" in text
    assert len(text.splitlines()) == 10 + 2


def test_windows_longer_than_the_trace_are_reported_as_missing():
    st = analyse(_trace(random_routing(np.random.default_rng(0), 5, 2, 8, 2), 8), gammas=(2, 8))
    assert st["unique_per_window"][8] is None and st["unique_per_window"][2] > 2
    assert "       -" in format_table(st)


def test_traces_of_different_models_cannot_be_pooled():
    a = _trace(random_routing(np.random.default_rng(0), 5, 2, 8, 2), 8)
    b = _trace(random_routing(np.random.default_rng(0), 5, 3, 8, 2), 8)
    with pytest.raises(ValueError, match="statistics need one model"):
        analyse([a, b])
