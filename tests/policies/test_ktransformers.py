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


def test_cpu_speedup_divides_the_run_cost_models_cpu_times():
    """The run's cost model (one function for both executors) applies the policy's speed-up to the
    CPU's sustained rates (the roofline part of every CPU expert time, not its fixed overhead) and
    to nothing on the GPU."""
    from sim.machine import specs as config
    from sim.protocol import policy_cost_model
    hw, m, d = config.hardware("rtx4090_pcie4"), config.model("qwen3_30b_a3b"), config.draft("none")
    base = policy_cost_model(make_policy("llamacpp"), hw, m, d, 0)
    fast = policy_cost_model(make_policy("ktransformers", cpu_speedup=2.0), hw, m, d, 0)
    over = hw.cpu_expert_us * 1e-6
    np.testing.assert_allclose((fast.cpu_expert_table()[1:] - over) * 2.0, base.cpu_expert_table()[1:] - over,
                               rtol=1e-12)
    np.testing.assert_array_equal(fast.gpu_expert_table(), base.gpu_expert_table())


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
