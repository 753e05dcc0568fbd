"""llama.cpp presets: whole layers static on the GPU, compute where the weights live, no transfers."""
import numpy as np
import pytest

from sim.policies import make_policy
from sim.policies.base import CPU, GPU, Signals
from tests.policies.conftest import Driver, context, random_counts


def test_last_layers_whole_on_gpu():
    pol = make_policy("llamacpp")
    ctx = context(L=4, E=3, slots=8)           # 8 // 3 = 2 whole layers, 2 slots unused
    pol.reset(ctx, None)
    assert sorted(pol.initial_residency()) == [(l, e) for l in (2, 3) for e in range(3)]
    first = make_policy("llamacpp", gpu_layers="first")
    first.reset(ctx, None)
    assert {l for l, _ in first.initial_residency()} == {0, 1}


@pytest.mark.parametrize("name, window", [("llamacpp", 1), ("llamacpp_sd", 4)])
def test_never_transfers_at_decode(name, window):
    rng = np.random.default_rng(3)
    seq = random_counts(rng, S=20, L=4, E=6, k=2, window=window)
    pol = make_policy(name)
    d = Driver(pol, context(L=4, E=6, k=2, slots=13), prefetch_budget=100).run(seq)
    assert d.transfers == 0 and d.evicted == []
    resident = d.cache.resident.copy()
    for i, where in enumerate(d.placements):
        layer = i % 4
        assert set(np.unique(where)) <= {GPU, CPU}
        assert np.array_equal(where == GPU, resident[layer])
    assert d.cpu == d.requests - d.hits


def test_place_follows_residency():
    pol = make_policy("llamacpp")
    d = Driver(pol, context(L=2, E=3, slots=3))
    row = np.array([1, 1, 0])
    assert list(pol.place(0, row, Signals(), d.cache).where[:2]) == [CPU, CPU]
    assert list(pol.place(1, row, Signals(), d.cache).where[:2]) == [GPU, GPU]
