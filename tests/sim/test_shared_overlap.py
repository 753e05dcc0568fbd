"""Shared experts beside the CPU experts (kTransformers' one-token decode): the layer's serial part
loses them, its GPU lane gains them, exactly; a forward of more tokens runs them in turn."""
from dataclasses import replace

import pytest

from sim.engine.decode import Engine, EngineOptions
from sim.machine.compose import runtime_spec
from sim.machine.cost_model import CostModel
from sim.plan.evaluate import Setting, StaticTable
from sim.run.runner import run_one
from sim.run.spec import RunSpec
from tests.sim.doubles import NO_DRAFT, ROUND_HW, ROUND_MODEL, StaticGPU, context_for, make_cache, toy_trace
from traces.windows import build_schedule

US = 1e-6
# one shared expert of 3 x 8 x 1000 = 24000 params x 2 B = 48 kB: 12 us at 4 GB/s, + 3 launches of 1 us
SHARED = replace(ROUND_MODEL, n_shared_experts=1, shared_intermediate=1000)
OVERLAP = replace(ROUND_HW, shared_overlap=True)


def test_one_token_moves_the_shared_experts_to_the_gpu_lane():
    serial, beside = CostModel(ROUND_HW, SHARED, NO_DRAFT), CostModel(OVERLAP, SHARED, NO_DRAFT)
    plain = CostModel(ROUND_HW, ROUND_MODEL, NO_DRAFT)
    assert beside.gpu_beside_s(1) == pytest.approx(15 * US)
    assert serial.layer_fixed_s(1, 0) - beside.layer_fixed_s(1, 0) == pytest.approx(15 * US)
    assert beside.layer_fixed_s(1, 0) == pytest.approx(plain.layer_fixed_s(1, 0))
    # a verify of two tokens (or a prefill chunk) runs them in turn, as the runtime does
    assert beside.gpu_beside_s(2) == 0.0 and beside.layer_fixed_s(2, 0) == serial.layer_fixed_s(2, 0)
    # without shared experts, or without the runtime's overlap, nothing moves
    assert CostModel(OVERLAP, ROUND_MODEL, NO_DRAFT).gpu_beside_s(1) == 0.0 and serial.gpu_beside_s(1) == 0.0


def decode_s(hw, gpu_set) -> float:
    cost = CostModel(hw, SHARED, NO_DRAFT)
    sched = build_schedule(toy_trace([[[0], [2]]]), 0, 1, 1.0)
    cache = make_cache(SHARED, 3)
    ctx = context_for(cost, SHARED, 3)
    pol = StaticGPU(gpu_set)
    pol.reset(ctx, cache)
    return Engine(cost, pol, cache, sched, ctx, EngineOptions()).run().decode_s


def test_engine_hides_the_shared_experts_behind_the_cpu_experts():
    # both layers' experts on the CPU (40 kB at 0.4 GB/s = 100 us): the 15 us of shared experts run
    # beside them, so each layer ends 15 us sooner
    assert decode_s(ROUND_HW, []) - decode_s(OVERLAP, []) == pytest.approx(2 * 15 * US)
    # both on the GPU: the shared experts only change lanes on the same GPU, the time is the same
    both = [(0, 0), (1, 2)]
    assert decode_s(OVERLAP, both) == pytest.approx(decode_s(ROUND_HW, both))


def test_ktransformers_overlaps_and_its_planner_prices_it_as_the_engine():
    assert runtime_spec("ktransformers").shared_overlap and not runtime_spec("custom_cuda").shared_overlap
    hw = {"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}
    s = Setting(model="deepseek_v2_lite", hardware=hw, quant="q4_k_m", gen_tokens=16)
    table = StaticTable(s, "ktransformers")
    assert table.cost.gpu_beside_s(1) > 0
    slots = 10 * 64
    ours = table.tps(table.decode_s(table.policy_mask(slots)))
    row = run_one(RunSpec.of(policy="ktransformers", hardware={**hw, "vram_gib": 24.0}, model="deepseek_v2_lite",
                             quant="q4_k_m", gen_tokens=16, cache_ratio=slots / (26 * 64))).row
    assert ours == pytest.approx(row["tps"], rel=1e-9)
