"""MixtralOffload: per-layer LRU with an even slot split, fetch on miss, next-layer speculation."""
import numpy as np

from sim.policies import make_policy
from sim.policies.base import FETCH, GPU, Signals
from sim.policies.quota import even_quotas
from tests.policies.conftest import Driver, context, onehot, random_counts


def test_even_quotas_and_initial_fill():
    assert list(even_quotas(3, 6, 7)) == [3, 2, 2]
    assert list(even_quotas(2, 3, 10)) == [3, 3]
    pol = make_policy("mixtral_offload")
    pol.reset(context(L=3, E=6, slots=6), None)
    assert sorted(pol.initial_residency()) == [(l, e) for l in range(3) for e in (4, 5)]


def test_per_layer_lru_and_speculative_loading():
    E = 6
    seq = np.array([[onehot(E, 2), onehot(E, 3), onehot(E, 0)]])
    pred = np.array([[np.zeros(E), onehot(E, 3, 3, 5), np.zeros(E)]])
    d = Driver(make_policy("mixtral_offload"), context(L=3, E=E, slots=6), prefetch_budget=1)
    d.run(seq, next_pred_seq=pred)
    # each layer starts with experts 4, 5. (0,2) misses in pinned layer 0: it borrows from layer 2,
    # the layer that ran last (LRU (2,4)); the guess {3, 5} for layer 1 marks (1,5) used and
    # prefetches (1,3) over layer 1's LRU (1,4); (2,0) then misses and takes back the slot from
    # layer 0, over quota (LRU (0,4)).
    assert d.evicted == [(2, 4), (1, 4), (0, 4)]
    assert d.hits == 1 and d.prefetches == 1 and d.cpu == 0
    usage = d.cache.resident.sum(axis=1)
    assert list(usage) == [2, 2, 2]


def test_stale_guesses_are_dropped_when_the_layer_starts():
    pol = make_policy("mixtral_offload")
    d = Driver(pol, context(L=3, E=6, slots=6))
    pol.on_step_start(0, Signals(), d.cache)
    d.cache.pinned[0] = True
    pol.on_layer_start(0, d.cache)
    where = pol.place(0, onehot(6, 1), Signals(next_pred=onehot(6, 2)), d.cache).where
    assert where[1] == FETCH
    pol.on_layer_start(1, d.cache)
    assert pol.next_transfer(d.cache) is None


def test_without_prediction_no_prefetch_and_all_gpu():
    seq = random_counts(np.random.default_rng(2), S=20, L=3, E=6, k=2)
    d = Driver(make_policy("mixtral_offload"), context(L=3, E=6, k=2, slots=9), prefetch_budget=5).run(seq)
    assert d.prefetches == 0 and d.cpu == 0 and d.fallbacks == 0
    assert all(set(np.unique(w[seq[i // 3, i % 3] > 0])) <= {GPU, FETCH} for i, w in enumerate(d.placements))
    assert (np.abs(d.cache.resident.sum(axis=1) - 3) <= 2).all()
