"""MoE-Infinity: the request's activation matrix drives prefetch order and cache priority."""
import numpy as np

from sim.protocol.expert_cache import ExpertCache
from sim.policies import make_policy
from tests.policies.conftest import Driver, context, onehot, random_counts


def _policy(L=3, E=4, slots=4, **kw):
    pol = make_policy("moe_infinity", **kw)
    cache = ExpertCache(L, E, slots)
    pol.reset(context(L=L, E=E, slots=slots), cache)
    return pol, cache


def test_eam_accumulates_and_no_history_means_no_prefetch():
    pol, cache = _policy()
    pol.on_layer_start(0, cache)
    assert pol.next_transfer(cache) is None
    pol.on_layer_end(1, onehot(4, 2, n=3), cache)
    pol.on_layer_end(1, onehot(4, 2, 0), cache)
    assert list(pol.eam[1]) == [1, 0, 4, 0]


def test_prefetch_order_follows_eam_weighted_by_layer_distance():
    pol, cache = _policy()
    pol.on_layer_end(2, onehot(4, 1, n=5), cache)      # layer 2: expert 1 only
    pol.on_layer_end(1, onehot(4, 2, 3), cache)        # layer 1: experts 2 and 3 (half each)
    pol.on_layer_start(0, cache)
    order = []
    while (item := pol.next_transfer(cache)) is not None:
        order.append(item)
        cache.begin(*item)
        cache.land(*item)
    # priority = row share x (1 - distance/(L+1)): (2,1) 1*0.5, (1,2) and (1,3) 0.5*0.75
    assert order == [(2, 1), (1, 2), (1, 3)]
    pol, cache = _policy()
    pol.on_layer_end(2, onehot(4, 1), cache)
    pol.on_layer_end(1, onehot(4, 2), cache)
    pol.on_layer_start(0, cache)
    assert pol.next_transfer(cache) == (1, 2)           # equal shares: the nearer layer first
    pol.on_layer_start(1, cache)
    assert pol.next_transfer(cache) == (2, 1)           # past layers are never prefetched


def test_eviction_takes_the_lowest_priority_and_prefetch_never_evicts_higher():
    pol, cache = _policy(slots=2)
    pol.on_layer_end(0, onehot(4, 0), cache)
    pol.on_layer_end(1, onehot(4, 1), cache)
    pol.on_layer_end(2, onehot(4, 2), cache)
    for item in [(0, 0), (1, 1)]:
        cache.load(*item)
    cache.pinned[1] = True
    pol.on_layer_start(1, cache)                         # layer 0 ran last: lowest topology score
    assert pol.victim(2, 2, cache, False) == (0, 0)             # prefetch of (2,2): (0,0) ranks lower
    cache.evict(0, 0)
    cache.load(2, 2)
    pol.on_transfer_done(2, 2, cache)                    # a landing (the protocol tells the policy)
    # a prefetch for a layer-0 expert (next token) may not push out the layer-2 expert
    assert pol.victim(0, 3, cache, False) is None
    assert pol.victim(0, 0, cache, True) == (2, 2)             # a demand fetch always gets a slot


def test_all_compute_on_gpu_in_a_run():
    seq = random_counts(np.random.default_rng(4), S=25, L=3, E=6, k=2)
    d = Driver(make_policy("moe_infinity"), context(L=3, E=6, k=2, slots=8), prefetch_budget=2).run(seq)
    assert d.cpu == 0 and d.fallbacks == 0 and d.prefetches > 0
    # every request is a hit or a demand fetch (nothing runs on the CPU, nothing is dropped), and a
    # hit on a prefetched expert is what makes a prefetch useful
    c = d.core.c
    assert c.hits + c.demand_fetches == c.requests and c.gpu_execs == c.requests
    assert 0 < c.prefetch_useful <= c.prefetches
