"""Exact timelines on the real cost model (roofline, PCIe latency 10 us, attention, lm_head and
host overhead charged by :class:`sim.machine.cost_model.CostModel` itself, no overrides).

Machine (round numbers so every time is a hand sum): GPU 4 GB/s, 1 TFLOP/s, 1 us per kernel;
PCIe 1 GB/s + 10 us latency; CPU 0.4 GB/s; join 5 us; host overhead 4 us per forward. Model: 2 MoE
layers x 3 experts of 40 kB (f16 20k params), attention 1976 params/layer, lm_head 2000 params,
KV 32 B/token, prompt 250 tokens. Hence, for one token:

* expert on the GPU 40 kB / 4 GB/s + 1 kernel = 11 us; on the CPU 40 kB / 0.4 GB/s = 100 us;
* one transfer 10 + 40 = 50 us; a block of n: 10 + 40 n us;
* a layer's attention ((1976 + 8 x 3) x 2 B + 250 x 32 / 2 B) / 4 GB/s + 8 kernels = 2 + 8 = 10 us;
* embeddings + lm_head 2000 x 2 B / 4 GB/s + 4 us overhead = 5 us.
"""
import pytest

from sim.machine.cost_model import CostModel
from sim.engine.decode import Engine
from sim.policies import make_policy
from tests.sim.doubles import NO_DRAFT, ROUND_HW, ROUND_MODEL, FetchFIFO, context_for, make_cache, toy_trace
from traces.windows import build_schedule
from sim.engine.decode import EngineOptions

US = 1e-6
HW, MODEL = ROUND_HW, ROUND_MODEL


def simulate(policy, experts, n_slots):
    cost = CostModel(HW, MODEL, NO_DRAFT)
    sched = build_schedule(toy_trace(experts), 0, len(experts), 1.0)
    cache = make_cache(MODEL, n_slots)
    ctx = context_for(cost, MODEL, n_slots)
    policy.reset(ctx, cache)
    eng = Engine(cost, policy, cache, sched, ctx, EngineOptions(context0=250, timeline=True))
    return eng, eng.run()


def spans(eng, lane):
    return [(label, round(a / US, 6), round(b / US, 6)) for ln, label, a, b in eng.events if ln == lane]


def test_the_round_machine_costs_what_the_docstring_says():
    cost = CostModel(HW, MODEL, NO_DRAFT)
    assert cost.gpu_expert_table()[1] == pytest.approx(11 * US) and cost.cpu_expert_table()[1] == pytest.approx(100 * US)
    assert cost.transfer_s() == pytest.approx(50 * US) and cost.bulk_transfer_s(3) == pytest.approx(130 * US)
    assert cost.layer_fixed_s(1, 250) == pytest.approx(10 * US, rel=1e-12)   # memory-bound: FLOPs do not add
    assert cost.step_fixed_s(1) == pytest.approx(5 * US, rel=1e-12)


def test_a_demand_fetch_goes_before_a_queued_prefetch():
    """Prefetches (1, 2) then (1, 1) are queued at step start; layer 0's demand fetch of (0, 0),
    asked at 15 us while (1, 2) is on the link, is served next, before (1, 1)."""
    eng, c = simulate(FetchFIFO(prefetch=[(1, 2), (1, 1)]), [[[0], [1]]], n_slots=3)
    assert spans(eng, "PCIe") == [("prefetch L1E2", 0, 50), ("fetch L0E0", 50, 100), ("prefetch L1E1", 100, 150)]
    gpu = spans(eng, "GPU")
    # embed 0-5, L0 attention 5-15, (0, 0) computed once landed: 100-111; L1 attention 111-121;
    # (1, 1) has landed at 150 (prefetch in flight: the layer waits for it), computed 150-161
    assert [(lbl, round(a, 3), round(b, 3)) for lbl, a, b in gpu] == [
        ("embed+lm_head", 0, 5), ("L0 attn", 5, 15), ("L0 experts", 15, 111),
        ("L1 attn", 111, 121), ("L1 experts", 121, 161)]
    assert c.decode_s == pytest.approx(161 * US, rel=1e-6)
    assert (c.demand_fetches, c.prefetches, c.hits, c.prefetch_useful) == (1, 2, 0, 0)


def test_a_stream_holds_the_link_then_the_gpu_computes():
    """vLLM's UVA offload (STREAM): the last layer is resident (3 slots), layer 0's expert is copied
    into a staging buffer over PCIe (10 + 40 us) and then computed (11 us); no slot is used."""
    eng, c = simulate(make_policy("vllm"), [[[0], [2]]], n_slots=3)
    assert spans(eng, "PCIe") == [("stream L0E0", 15, 65)]
    assert spans(eng, "GPU")[2:] == [("L0 experts", 15, 76), ("L1 attn", 76, 86), ("L1 experts", 86, 97)]
    assert c.decode_s == pytest.approx((5 + 10 + 50 + 11 + 10 + 11) * US, rel=1e-12)
    assert (c.streams, c.demand_fetches, c.gpu_execs, c.cpu_execs) == (1, 0, 2, 0)
    assert not eng.cache.resident[0].any() and eng.cache.n_used == 3


def test_a_block_copy_pays_one_latency_and_the_layer_computes_after_it():
    """Accelerate, 3 slots = one staging layer (no static layer): layer 0 copies its 3 experts as
    one block (10 + 3 x 40 = 130 us), then computes the routed one; layer 1 evicts all three
    (``victims``) and copies its own block."""
    eng, c = simulate(make_policy("accelerate"), [[[1], [2]]], n_slots=3)
    pcie = [(lbl, round(a, 3), round(b, 3)) for lbl, a, b in spans(eng, "PCIe")]
    assert pcie == [("block L0 x3", 15, 145), ("block L1 x3", 166, 296)]
    assert c.decode_s == pytest.approx((5 + 10 + 130 + 11 + 10 + 130 + 11) * US, rel=1e-12)
    assert (c.demand_fetches, c.evictions, c.pcie_busy_s) == (6, 3, pytest.approx(260 * US))


def test_a_copy_nobody_computes_lands_before_the_layer_ends():
    """``extra_fetch`` with no GPU work after it: the layer ends when the copy lands, and the
    landing is seen by the policy before ``on_layer_end`` (the cache shows it resident)."""
    import numpy as np

    from sim.policies.base import CPU, Placement, Policy

    class ExtraOnly(Policy):
        name = "extra_only"

        def reset(self, ctx, cache):
            self.ctx, self.seen = ctx, []

        def place(self, layer, counts, signals, cache):
            return Placement(np.full(3, CPU, dtype=np.int8), extra_fetch=[2] if layer == 0 else [])

        def on_layer_end(self, layer, counts, cache):
            self.seen.append(bool(cache.resident[0, 2]))

    pol = ExtraOnly()
    eng, c = simulate(pol, [[[0], [0]]], n_slots=1)
    assert spans(eng, "PCIe") == [("fetch L0E2", pytest.approx(15), pytest.approx(65))]
    # layer 0: CPU 100 us from 15 (the copy lands at 65, inside it), + 5 us join
    assert pol.seen == [True, True]
    assert c.layer_s[0] == pytest.approx((10 + 100 + 5) * US, rel=1e-12)


def test_no_victim_means_the_demand_fetch_runs_on_the_cpu():
    """One slot, two experts per layer: the first demand fetch takes the slot, the second finds no
    victim (nothing has landed yet) and runs on the CPU, concurrently; layer 1 evicts (0, 0)."""
    eng, c = simulate(FetchFIFO(), [[[0, 1], [0, 1]]], n_slots=1)
    assert spans(eng, "PCIe") == [("fetch L0E0", 15, 65), ("fetch L1E0", 130, 180)]
    assert spans(eng, "CPU") == [("L0 experts", 15, 115), ("L1 experts", 130, 230)]
    assert spans(eng, "GPU")[2:] == [("L0 experts", 15, 76), ("L1 attn", 120, 130), ("L1 experts", 130, 191)]
    assert c.decode_s == pytest.approx(235 * US, rel=1e-12)
    assert (c.fallbacks, c.demand_fetches, c.evictions, c.cpu_execs, c.gpu_execs) == (2, 2, 1, 2, 2)
