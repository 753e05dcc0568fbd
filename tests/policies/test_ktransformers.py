"""kTransformers: a static GPU mask by frequency, other routed experts on its faster CPU kernels."""
import numpy as np

from sim.policies import make_policy
from sim.policies.base import CPU, GPU
from tests.policies.conftest import Driver, context, random_counts


def test_mask_is_global_top_by_frequency():
    profile = np.array([[1, 9, 3], [8, 0, 2], [7, 6, 5]], dtype=float)
    pol = make_policy("ktransformers")
    pol.reset(context(L=3, E=3, slots=4, profile=profile), None)
    assert sorted(pol.initial_residency()) == [(0, 1), (1, 0), (2, 0), (2, 1)]


def test_cpu_speedup_is_exposed_to_the_cost_model():
    assert make_policy("ktransformers").cpu_efficiency_scale == 1.25
    assert make_policy("ktransformers", cpu_speedup=2.0).cpu_efficiency_scale == 2.0


def test_routed_misses_run_on_cpu_without_transfers():
    rng = np.random.default_rng(0)
    profile = rng.random((3, 6))
    seq = random_counts(rng, S=20, L=3, E=6, k=2)
    pol = make_policy("ktransformers")
    d = Driver(pol, context(L=3, E=6, k=2, slots=5, profile=profile), prefetch_budget=10).run(seq)
    assert d.transfers == 0 and not pol.speculative
    assert d.cpu == d.requests - d.hits
    for i, where in enumerate(d.placements):
        req = seq[i // 3, i % 3] > 0
        assert np.array_equal(where[req] == GPU, d.cache.resident[i % 3][req])
        assert set(np.unique(where)) <= {GPU, CPU}
