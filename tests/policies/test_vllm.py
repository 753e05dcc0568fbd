"""vLLM --cpu-offload-gb: the last layers resident, every other expert streamed over PCIe."""
import numpy as np

from sim.policies import make_policy
from sim.policies.base import GPU, STREAM, Signals
from tests.policies.conftest import Driver, context, random_counts


def test_resident_layers_are_the_last_and_the_rest_stream():
    pol = make_policy("vllm")
    d = Driver(pol, context(L=4, E=3, slots=7), prefetch_budget=10)
    assert sorted({l for l, _ in zip(*np.nonzero(d.cache.resident))}) == [2, 3]
    row = np.array([1, 0, 1])
    assert list(pol.place(0, row, Signals(), d.cache).where[[0, 2]]) == [STREAM, STREAM]
    assert list(pol.place(3, row, Signals(), d.cache).where[[0, 2]]) == [GPU, GPU]


def test_vllm_is_ar_and_never_moves_experts_into_slots():
    pol = make_policy("vllm")
    assert not pol.speculative
    seq = random_counts(np.random.default_rng(1), S=15, L=4, E=5, k=2)
    d = Driver(pol, context(L=4, E=5, k=2, slots=10), prefetch_budget=10).run(seq)
    assert d.transfers == 0 and d.cpu == 0
    assert d.stream == d.requests - d.hits
