"""Fiddler: static popular experts, misses on the CPU; and the per-layer min-max CPU/GPU split
(:func:`best_split`, which the oracle and AdaSpec use) equals brute force over all 2^k assignments."""

import numpy as np
import pytest

from sim.policies import make_policy
from sim.policies.base import CPU, FETCH, GPU, Signals
from sim.policies.split import best_split, gpu_lane, split_time, two_ended
from tests.policies.conftest import Driver, brute_force, context, costs


def random_case(rng, E=12, max_tokens=1):
    k = int(rng.integers(1, 9))
    counts = np.zeros(E, dtype=int)
    counts[rng.choice(E, size=k, replace=False)] = rng.integers(1, max_tokens + 1, size=k)
    present = rng.random(E) < 0.4
    cost = costs(gpu=float(rng.uniform(1, 60)), cpu=float(rng.uniform(20, 200)),
                 cpu_per_token=float(rng.uniform(0, 120)), transfer=float(rng.uniform(5, 400)))
    return counts, present, cost


def test_gpu_lane_is_the_pipeline():
    # present work 5, then fetches land at 10, 20: the second waits for its transfer
    assert gpu_lane(5.0, [3.0, 3.0], 10.0) == 23.0
    assert gpu_lane(30.0, [3.0, 3.0], 10.0) == 36.0
    assert gpu_lane(5.0, [3.0, 3.0], 10.0, link_wait_s=4.0) == 27.0


@pytest.mark.parametrize("max_tokens", [1, 5])
def test_best_split_equals_brute_force(max_tokens):
    rng = np.random.default_rng(max_tokens)
    for _ in range(60):
        counts, present, cost = random_case(rng, max_tokens=max_tokens)
        limit = None if rng.random() < 0.5 else int(rng.integers(0, 3))
        wait = 0.0 if rng.random() < 0.5 else float(rng.uniform(0, cost.transfer_s))
        on_gpu = best_split(counts, present, cost, max_fetch=limit, link_wait_s=wait)
        assert not on_gpu[counts == 0].any()
        if limit is not None:
            assert int((on_gpu & ~present).sum()) <= limit
        got = split_time(counts, on_gpu, present, cost, wait)
        assert got == pytest.approx(brute_force(counts, present, cost, limit, wait), rel=1e-12)


def test_local_search_fallback_is_valid_and_no_worse_than_greedy():
    rng = np.random.default_rng(9)
    for _ in range(20):
        counts, present, cost = random_case(rng, max_tokens=6)
        on_gpu = best_split(counts, present, cost, cap=1)
        t = split_time(counts, on_gpu, present, cost)
        assert t <= split_time(counts, two_ended(counts, present, cost), present, cost) + 1e-9
        assert t >= brute_force(counts, present, cost) - 1e-9


def test_static_set_is_most_popular_from_profile():
    profile = np.array([[5, 1, 9, 0], [7, 2, 0, 8]], dtype=float)
    pol = make_policy("fiddler")
    pol.reset(context(L=2, E=4, slots=4, profile=profile), None)
    assert sorted(pol.initial_residency()) == [(0, 2), (1, 0), (1, 3)]   # 4 slots - 1 fetch slot


def test_no_profile_order_is_deterministic_from_seed():
    sets = []
    for seed in (0, 0, 1):
        pol = make_policy("fiddler", fetch_slots=0)
        pol.reset(context(L=3, E=8, slots=5, seed=seed), None)
        sets.append(pol.initial_residency())
    assert sets[0] == sets[1] and len(sets[0]) == 5
    assert sets[2] != sets[0]          # another seed, another (random) order


def test_misses_go_to_cpu_when_transfer_is_expensive():
    pol = make_policy("fiddler")
    prof = np.array([[9, 8, 0, 0]], dtype=float)
    d = Driver(pol, context(L=1, E=4, slots=3, profile=prof, cost=costs(cpu=50, transfer=1000)))
    where = pol.place(0, np.array([1, 0, 1, 1]), Signals(), d.cache).where
    assert where[0] == GPU and where[2] == CPU and where[3] == CPU


def test_fetch_when_cpu_is_slow_uses_only_the_spare_slot():
    pol = make_policy("fiddler")
    prof = np.array([[9, 8, 0, 0, 0], [7, 0, 0, 0, 0]], dtype=float)
    ctx = context(L=2, E=5, slots=4, profile=prof, cost=costs(cpu=400, transfer=100))
    seq = np.array([[[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]]] * 3)
    d = Driver(pol, ctx).run(seq)
    assert d.fetches > 0
    static = {(0, 0), (0, 1), (1, 0)}
    assert not static & set(d.evicted)
    assert all(d.cache.resident[l, e] for l, e in static)
    # with two misses and one spare slot, one is fetched, the other computed on the CPU
    assert sorted(np.unique(d.placements[0][2:])) == [CPU, FETCH]
