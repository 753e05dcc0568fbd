"""The physics added for fidelity, each on a tiny case with a hand-computed time: per-core CPU
bandwidth, layers computed whole on the CPU (llama.cpp -ngl: attention, KV, per-op cost, output
layer), their memory plan, and per-position sampling."""
from dataclasses import replace

import pytest

from sim.machine import specs as config
from sim.machine.cost_model import CostModel
from sim.engine.decode import Engine
from sim.machine.memory_plan import PlanOptions, plan_memory
from sim.policies.static import LlamaCppStatic
from sim.machine.compose import thread_bandwidth
from tests.sim.doubles import context_for, make_cache, tiny_specs, toy_trace
from traces.windows import build_schedule
from sim.engine.decode import EngineOptions

US = 1e-6


def test_a_few_threads_of_a_many_channel_server_do_not_get_the_whole_socket():
    # achieved = min(460.8 x 0.5, 16 cores x 8 GB/s) = 128 GB/s, stated as 128 / 0.5 = 256 GB/s
    assert thread_bandwidth(460.8, 16, 8.0, 0.5) == pytest.approx(256.0)
    assert thread_bandwidth(460.8, 64, 8.0, 0.5) == pytest.approx(460.8)    # enough cores: the channels bound
    assert thread_bandwidth(460.8, 16, 0.0, 0.5) == 460.8                   # no per-core limit
    hw = config.hardware({"gpu": "rtx5090", "host": "epyc_ddr5_12ch", "link": "pcie5_x16", "cpu_threads": 16},
                         runtime={"name": "llama_cpp", "cpu_core_gbs": 8.0, "cpu_core_lines": 0.0, "cpu_mem_eff": 0.5,
                                  "by_kind": {}})
    assert (hw.cpu_mem_bw_gbs * hw.cpu_mem_eff, hw.cpu_threads) == (pytest.approx(128.0), 16)
    assert hw.cpu_tflops == pytest.approx(5.376 * 16 / 48)              # FLOP/s follow the cores used


def _ngl_specs():
    hw, m, d = tiny_specs()
    hw = replace(hw, cpu_mem_bw_gbs=0.5, step_overhead_us=4, cpu_op_us=3.0, cpu_ops_per_layer=10, cpu_kv_eff=0.5)
    m = replace(m, attn_params_per_layer=976, lm_head_params=500, kv_bytes_per_token=100)  # +24 router = 1000
    return hw, m, d


def test_cpu_layer_time_is_weights_plus_kv_over_host_dram_plus_ops():
    hw, m, d = _ngl_specs()
    cost = CostModel(hw, m, d)
    # weights 1000 x 2 B / 0.5 GB/s = 4 us; KV 10 tokens x 100 B / 2 layers = 500 B / (0.5 GB/s x 0.5) = 2 us;
    # 10 ops x 3 us = 30 us
    assert cost.cpu_layer_fixed_s(1, 10) == pytest.approx(36 * US)
    # output layer on the CPU: 500 x 2 B / 0.5 GB/s = 2 us + 4 us overhead; on the GPU 1 us + 4 us
    assert cost.cpu_step_fixed_s(1) == pytest.approx(6 * US)
    assert cost.step_fixed_s(1) == pytest.approx(5 * US)


def test_sampling_costs_each_verified_position():
    hw, m, d = _ngl_specs()
    cost = CostModel(replace(hw, sample_us=20.0), m, d)
    assert cost.step_fixed_s(9) - cost.step_fixed_s(1) == pytest.approx(8 * 20 * US)


def test_ngl_timeline_runs_the_offloaded_layer_whole_on_the_cpu():
    hw, m, d = _ngl_specs()
    m = replace(m, kv_bytes_per_token=0)
    cost = CostModel(hw, m, d)
    pol = LlamaCppStatic(gpu_layers=1)             # -ngl 1 of 2: layer 1 on the GPU, layer 0 and the output on the CPU
    n_slots = pol.slot_request(m.n_layers, m.n_experts)
    cache = make_cache(m, n_slots)
    sched = build_schedule(toy_trace([[[0], [2]]]), 0, 1, 1.0)
    pol.reset(context_for(cost, m, n_slots), cache)
    eng = Engine(cost, pol, cache, sched, context_for(cost, m, n_slots), EngineOptions(context0=0, timeline=True))
    c = eng.run()
    lanes = {lane: [(lbl, round(a / US, 6), round(b / US, 6)) for ln, lbl, a, b in eng.events if ln == lane]
             for lane in ("CPU", "GPU")}
    # head on the CPU 6 us; L0 attention on the CPU 4 + 30 = 34 us; its expert 100 us; join 5 us;
    # L1 attention on the GPU 1000 x 2 B / 1 GB/s = 2 us; its resident expert 10 us
    assert lanes["CPU"] == [("embed+lm_head", 0, 6), ("L0 attn", 6, 40), ("L0 experts", 40, 140)]
    assert lanes["GPU"] == [("L1 attn", 145, 147), ("L1 experts", 147, 157)]
    assert c.decode_s == pytest.approx(157 * US)
    assert c.cpu_busy_s == pytest.approx(140 * US) and c.gpu_busy_s == pytest.approx(12 * US)


def test_ngl_keeps_the_cpu_layers_weights_and_kv_out_of_vram():
    hw, m, d = _ngl_specs()
    m = replace(m, non_expert_params=5000)
    hw = replace(hw, workspace_gib=0.0)
    full, part = plan_memory(hw, m, d, 0.0, context=10), plan_memory(hw, m, d, 0.0, 10, opts=PlanOptions(cpu_layers=1))
    assert full.non_expert - part.non_expert == pytest.approx(1000 * 2)     # one layer's 1000 weights, 2 B each
    assert full.kv - part.kv == pytest.approx(10 * 100 / 2)


def test_ngl_placement_and_its_errors():
    pol = LlamaCppStatic(gpu_layers=20)
    assert pol.slot_request(48, 128) == 20 * 128 and pol.cpu_layer_count(48) == 28
    assert LlamaCppStatic(gpu_layers=49).cpu_layer_count(48) == 0
    for bad in ("middle", -1, True, 2.5):
        with pytest.raises(ValueError, match="policy.gpu_layers"):
            LlamaCppStatic(gpu_layers=bad)
    with pytest.raises(ValueError, match="cannot both"):
        LlamaCppStatic(gpu_layers=4, n_cpu_moe=2)
