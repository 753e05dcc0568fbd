"""HybriMoE: Minus-Recent-Score cache, two-ended CPU/GPU queue, next-layer prefetch by score."""
import numpy as np
import pytest

from sim.protocol.expert_cache import ExpertCache
from sim.policies import make_policy
from sim.policies.base import CPU, FETCH, GPU, Signals
from sim.policies.split import two_ended
from tests.policies.conftest import Driver, context, costs, onehot, random_counts


def _policy(L=2, E=4, slots=4, **kw):
    pol = make_policy("hybrimoe", **kw)
    cache = ExpertCache(L, E, slots)
    pol.reset(context(L=L, E=E, slots=slots, k=2), cache)
    return pol, cache


def test_score_update_with_router_scores_top_p_and_count_fallback():
    pol, _ = _policy(top_p=2)
    pol.update_scores(0, None, np.array([0.5, 0.3, 0.2, 0.0]))     # only the top 2 enter
    assert pol.score[0] == pytest.approx([0.25, 0.15, 0.0, 0.0])
    pol.update_scores(0, np.array([0, 1, 0, 3]), None)             # shares 1/4, 3/4
    assert pol.score[0] == pytest.approx([0.125, 0.075 + 0.125, 0.0, 0.375])


@pytest.mark.parametrize("cpu, gpu_side", [(100, {0, 1}), (300, {0, 1, 2})])
def test_two_ended_queue_hand_example(cpu, gpu_side):
    counts = np.array([3, 1, 2, 1])
    present = np.array([True, True, False, False])
    on_gpu = two_ended(counts, present, costs(gpu=10, cpu=cpu, cpu_per_token=50, transfer=250))
    assert set(np.flatnonzero(on_gpu)) == gpu_side


def test_place_uses_the_greedy_split():
    pol, cache = _policy(L=2, E=4, slots=4)
    for l, e in pol.initial_residency():
        cache.load(l, e)
    cache.pinned[0] = True
    pol.on_layer_start(0, cache)
    where = pol.place(0, np.array([1, 0, 1, 1]), Signals(), cache).where   # (0,0), (0,1) resident
    assert where[0] == GPU and where[2] == CPU and where[3] == CPU


def test_prefetch_top_scores_of_next_layer_and_score_eviction():
    pol, cache = _policy(L=2, E=4, slots=4, prefetch_size=1)
    for l, e in pol.initial_residency():
        cache.load(l, e)                                   # (l, 0), (l, 1) per layer
    pol.score[1] = [0.1, 0.05, 0.0, 0.4]
    cache.pinned[0] = True
    pol.on_layer_start(0, cache)
    pol.place(0, onehot(4, 0), Signals(), cache)
    assert pol.next_transfer(cache) == (1, 3)
    assert pol.victim(1, 3, cache, False) == (1, 1)               # lowest score of layer 1, scores below 0.4
    pol.score[1] = [0.5, 0.6, 0.0, 0.4]
    assert pol.victim(1, 3, cache, False) is None                 # a prefetch never pushes out a higher score


def test_run_mixes_cpu_and_gpu_and_keeps_quotas():
    seq = random_counts(np.random.default_rng(7), S=30, L=3, E=8, k=3)
    d = Driver(make_policy("hybrimoe"), context(L=3, E=8, k=3, slots=9, cost=costs(cpu=120, transfer=200)),
               prefetch_budget=2).run(seq)
    c = d.core.c
    assert d.cpu > 0 and d.hits > 0
    # every request ran once, on the GPU (resident or fetched) or on the CPU
    assert c.gpu_execs + c.cpu_execs == c.requests and c.gpu_execs == c.hits + c.demand_fetches
    # per-layer quotas of 9 slots / 3 layers: the cache ends full and no layer holds more than 3 + 2
    assert d.cache.n_used == 9 and (d.cache.resident.sum(axis=1) <= 5).all()
    assert all(set(np.unique(w)) <= {GPU, CPU, FETCH} for w in d.placements)
