"""Exact event timelines of the SimPy engine on hand-made cases (2 layers, 3 experts, one link),
with round measured-table costs (transfer 50 us, no latency); the cases on the roofline cost model
with PCIe latency (priority, streams, block copies) are in ``test_engine_link_timeline.py``."""
import pytest

from sim.engine.decode import Engine
from tests.sim.doubles import FetchFIFO, RoundCosts, StaticGPU, context_for, make_cache, tiny_specs, toy_trace
from traces.windows import build_schedule
from sim.engine.decode import EngineOptions

US = 1e-6


def simulate(policy, experts, n_slots, gamma=0, acceptance=1.0, gen=None):
    hw, m, d = tiny_specs()
    cost = RoundCosts(hw, m, d)
    trace = toy_trace(experts)
    sched = build_schedule(trace, gamma, gen or trace.n_tokens, acceptance)
    cache = make_cache(m, n_slots)
    ctx = context_for(cost, m, n_slots, gamma)
    policy.reset(ctx, cache)
    eng = Engine(cost, policy, cache, sched, ctx, EngineOptions(timeline=True))
    counters = eng.run()
    return eng, counters


def spans(eng, lane):
    return [(label, round(a / US, 6), round(b / US, 6)) for ln, label, a, b in eng.events if ln == lane]


def test_static_placement_runs_gpu_and_cpu_concurrently():
    # one token; layer 0 wants expert 0 (resident), layer 1 wants expert 2 (on the CPU)
    eng, c = simulate(StaticGPU([(0, 0)]), [[[0], [2]]], n_slots=1)
    assert spans(eng, "GPU") == [("embed+lm_head", 0, 1), ("L0 attn", 1, 3), ("L0 experts", 3, 13),
                                 ("L1 attn", 13, 15)]
    assert spans(eng, "CPU") == [("L1 experts", 15, 115)]
    assert c.decode_s == pytest.approx(120 * US)  # 115 + 5 us join
    assert spans(eng, "PCIe") == []
    assert (c.hits, c.requests, c.gpu_execs, c.cpu_execs) == (1, 2, 1, 1)
    assert c.bubble_s == pytest.approx(100 * US)  # GPU had no expert work in layer 1: waited 100 us


def test_demand_fetch_then_eviction_of_oldest():
    # 1 slot; token 0: L0 e1, L1 e2 ; token 1: L0 e1 again (evicted by then)
    eng, c = simulate(FetchFIFO(), [[[1], [2]], [[1], [2]]], n_slots=1)
    assert spans(eng, "PCIe") == [("fetch L0E1", 3, 53), ("fetch L1E2", 65, 115),
                                  ("fetch L0E1", 128, 178), ("fetch L1E2", 190, 240)]
    gpu = spans(eng, "GPU")
    assert gpu[:4] == [("embed+lm_head", 0, 1), ("L0 attn", 1, 3), ("L0 experts", 3, 63), ("L1 attn", 63, 65)]
    assert c.decode_s == pytest.approx(250 * US)
    assert (c.demand_fetches, c.evictions, c.hits) == (4, 3, 0)
    assert c.pcie_busy_s == pytest.approx(200 * US)


def test_prefetch_during_draft_phase_hides_transfer():
    # SD, gamma=1, acceptance 1: one step verifies tokens 0 and 1. Expert (1, 2) is prefetched at step
    # start and lands during the draft phase + layer 0, so layer 1 hits.
    experts = [[[0], [2]], [[0], [2]], [[0], [2]]]
    pol = FetchFIFO(prefetch=[(1, 2)])
    pol.speculative = True
    eng, c = simulate(pol, experts, n_slots=2, gamma=1, gen=2)
    # the demand fetch asked at 10 us waits for the prefetch already on the link (no preemption)
    assert spans(eng, "PCIe") == [("prefetch L1E2", 0, 50), ("fetch L0E0", 50, 100)]
    assert spans(eng, "GPU")[:3] == [("draft", 0, 7), ("embed+lm_head", 7, 8), ("L0 attn", 8, 10)]
    # layer 0 waits for its demand fetch, then computes 2 tokens (20 us); layer 1 hits
    assert ("L0 experts", 10, 120) in spans(eng, "GPU")
    assert ("L1 experts", 122, 142) in spans(eng, "GPU")
    assert c.decode_s == pytest.approx(142 * US)
    assert (c.prefetches, c.prefetch_useful, c.hits) == (1, 1, 1)


def test_blocking_prefetch_serialises_with_the_step():
    experts = [[[0], [2]], [[0], [2]]]
    pol = FetchFIFO(prefetch=[(1, 2)], overlap=False)
    eng, c = simulate(pol, experts, n_slots=2, gen=1)
    # the step waits for the prefetch (0-50); layer 0 fetches (0, 0) on demand; layer 1 hits
    assert spans(eng, "PCIe") == [("prefetch L1E2", 0, 50), ("fetch L0E0", 53, 103)]
    assert spans(eng, "GPU") == [("embed+lm_head", 50, 51), ("L0 attn", 51, 53), ("L0 experts", 53, 113),
                                 ("L1 attn", 113, 115), ("L1 experts", 115, 125)]
    assert c.decode_s == pytest.approx(125 * US)
    assert (c.prefetches, c.prefetch_useful, c.demand_fetches, c.hits) == (1, 1, 1, 1)
