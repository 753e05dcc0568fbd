"""The fast evaluator runs the engine's protocol core by recurrence: on every registered policy it
either returns the engine's decode time and decision counts (to 1e-9, in fact bit for bit) or
refuses the policy with :class:`tests.sim.fast_eval.PrefetchingPolicyError`."""
import dataclasses

import numpy as np
import pytest

from sim.machine import specs as config
from sim.engine.decode import Engine
from sim.protocol.expert_cache import ExpertCache
from tests.sim.fast_eval import PrefetchingPolicyError, fast_decode_time
from sim.policies import make_policy, policy_names
from sim.protocol import build_context, policy_cost_model, routing_counts
from sim.speculation.schedule import speculative_schedule
from tests.sim.doubles import FetchFIFO, toy_trace
from traces.windows import build_schedule

HW, MODEL = config.hardware("rtx4090_pcie4"), config.model("qwen3_30b_a3b")
COUNTS = ("requests", "hits", "gpu_execs", "cpu_execs", "demand_fetches", "prefetches", "streams",
          "evictions", "fallbacks", "tokens", "steps", "pcie_bytes")
ACCEPTED = {"accelerate", "fiddler", "ktransformers", "llamacpp", "llamacpp_sd", "ondemand_lru", "vllm"}


def _trace(seed=0, T=40, L=6, E=16, k=4):
    rng = np.random.default_rng(seed)
    ex = np.stack([np.stack([rng.choice(E, k, replace=False) for _ in range(L)]) for _ in range(T)])
    return toy_trace(ex, n_experts=E)


def _setup(policy, trace, n_slots=48, gamma=3):
    g = gamma if policy.speculative else 0
    m = dataclasses.replace(MODEL, n_layers=trace.n_layers, n_experts=trace.n_experts, top_k=trace.top_k)
    d = config.draft("qwen3_0_6b" if g else "none")
    cost = policy_cost_model(policy, HW, m, d, g)
    sched = speculative_schedule(trace, policy.adaptive_gamma, g, trace.n_tokens - g - 1, 0.7, 0, d, None) \
        or build_schedule(trace, g, trace.n_tokens - g - 1, 0.7, 0)   # per-step gamma: built online
    ctx = build_context(policy, cost, n_slots, g, 256, 0, routing_counts(trace.experts, m.n_layers, m.n_experts),
                        sched.counts)
    cache = ExpertCache(m.n_layers, m.n_experts, n_slots)
    policy.reset(ctx, cache)
    return cost, sched, cache, ctx


@pytest.mark.parametrize("name", policy_names())
def test_fast_evaluator_equals_the_engine_or_refuses(name):
    trace = _trace()
    pol = make_policy(name)
    cost, sched, cache, ctx = _setup(pol, trace)
    want = Engine(cost, pol, cache, sched, ctx).run()
    pol2 = make_policy(name)
    cost2, sched2, cache2, _ = _setup(pol2, trace)
    if name not in ACCEPTED:
        with pytest.raises(PrefetchingPolicyError, match=name):
            fast_decode_time(cost2, pol2, cache2, sched2)
        return
    got = fast_decode_time(cost2, pol2, cache2, sched2)
    assert got.decode_s == pytest.approx(want.decode_s, rel=1e-9, abs=0)
    assert {k: getattr(got, k) for k in COUNTS} == {k: getattr(want, k) for k in COUNTS}
    cache2.check()


def test_block_copies_are_exact_in_the_fast_evaluator():
    """Accelerate on the review's case (6 layers x 16 experts, 48 slots): one block per layer."""
    trace = _trace()
    pol = make_policy("accelerate")
    cost, sched, cache, ctx = _setup(pol, trace)
    want = Engine(cost, pol, cache, sched, ctx).run()
    pol2 = make_policy("accelerate")
    cost2, sched2, cache2, _ = _setup(pol2, trace)
    got = fast_decode_time(cost2, pol2, cache2, sched2)
    assert want.demand_fetches > 1000 and got.decode_s == want.decode_s


def test_fast_evaluator_refuses_a_prefetching_test_policy():
    pol = FetchFIFO(prefetch=[(0, 1)])
    cost, sched, cache, _ = _setup(pol, _trace(), n_slots=8)
    with pytest.raises(PrefetchingPolicyError, match="fetch_fifo"):
        fast_decode_time(cost, pol, cache, sched)


@pytest.mark.parametrize("gpu_layers", [0, 3, 6])
def test_whole_layer_cpu_offload_is_exact_in_the_fast_evaluator(gpu_layers):
    """llama.cpp ``-ngl``: CPU attention and (at -ngl 0..5) a CPU output layer, as in the engine."""
    trace = _trace(seed=1)
    pol = make_policy("llamacpp", gpu_layers=gpu_layers)
    cost, sched, cache, ctx = _setup(pol, trace)
    want = Engine(cost, pol, cache, sched, ctx).run()
    pol2 = make_policy("llamacpp", gpu_layers=gpu_layers)
    cost2, sched2, cache2, _ = _setup(pol2, trace)
    got = fast_decode_time(cost2, pol2, cache2, sched2)
    assert len(pol.cpu_layers) == 6 - min(gpu_layers, 6) and got.decode_s == want.decode_s
    assert {k: getattr(got, k) for k in COUNTS} == {k: getattr(want, k) for k in COUNTS}
