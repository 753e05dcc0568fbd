"""The second round of fidelity physics, each on a tiny case with a hand-computed time: host DRAM
shared by CPU experts and DMA (engine timeline, fast evaluator, closed form), the per-format and
per-ISA CPU dequant compute bound, CUDA graphs only for GPU-only forwards, per-core bandwidth by
Little's law from the host's latency, pinned vs pageable and per-tensor copies, and the draft's own
per-forward overhead."""
from dataclasses import replace

import numpy as np
import pytest

from sim.machine import specs as config
from sim.machine.cost_model import CostModel, dram_cpu_time
from sim.engine.decode import Engine
from tests.sim.fast_eval import fast_decode_time
from sim.policies.base import CPU, FETCH, GPU, Placement, Policy
from sim.protocol import policy_cost_model
from sim.machine.compose import core_bandwidth, load_yaml, runtime_spec, _part, HostSpec
from tests.sim.doubles import RoundCosts, context_for, make_cache, tiny_specs, toy_trace
from traces.windows import build_schedule
from sim.engine.decode import EngineOptions

US = 1e-6


class CpuZeroFetchRest(Policy):
    """Expert 0 on the CPU, every other requested expert fetched (one slot, no prefetch)."""

    name = "cpu0_fetch"

    def place(self, layer, counts, signals, cache):
        where = np.where(cache.resident[layer], GPU, FETCH).astype(np.int8)
        where[0] = CPU
        return Placement(where)

    def victim(self, layer, expert, cache, demand):
        return None


class CpuZeroFetchRestPrefetching(CpuZeroFetchRest):
    """The same, declaring a (never used) prefetch: the engine re-measures the CPU against the link."""

    def next_transfer(self, cache):
        return None


def _contended(host_dram_gbs):
    hw, m, d = tiny_specs(n_layers=1, n_experts=3, top_k=2)
    # expert 1000 x 2 B = 2000 B in 100 us: the CPU needs 0.02 GB/s; DRAM 1.01 GB/s - DMA 1 GB/s
    # leaves 0.01 GB/s while the copy runs, so k = 0.5
    hw = replace(hw, host_dram_gbs=host_dram_gbs)
    return RoundCosts(hw, m, d), m


def _run(cost, m, fast=False, policy=CpuZeroFetchRest):
    pol = policy()
    cache = make_cache(m, 1)
    sched = build_schedule(toy_trace([[[0, 1]]]), 0, 1, 1.0)
    ctx = context_for(cost, m, 1)
    pol.reset(ctx, cache)
    if fast:
        return fast_decode_time(cost, pol, cache, sched, context0=0), None
    eng = Engine(cost, pol, cache, sched, ctx, EngineOptions(context0=0, timeline=True))
    return eng.run(), eng


def test_cpu_experts_slow_while_the_dma_reads_the_same_dram():
    cost, m = _contended(1.01)
    assert cost.dram_share(2000, 100 * US) == pytest.approx(0.5)
    c, eng = _run(cost, m)
    cpu = [(lbl, round(a / US, 6), round(b / US, 6)) for ln, lbl, a, b in eng.events if ln == "CPU"]
    # step 1 us, attention 2 us; t1 = 3: the copy of expert 1 holds the link 3..53 (CPU at half
    # speed: 25 us of its 100 us done), the remaining 75 us at full speed: CPU 3..128; join 5 us
    assert cpu == [("L0 experts", 3, 128)]
    assert c.decode_s == pytest.approx(133 * US)
    assert c.cpu_busy_s == pytest.approx(125 * US)
    fast, _ = _run(cost, m, fast=True)                  # the event-free evaluator: same time
    assert fast.decode_s == pytest.approx(133 * US)
    rounds, _ = _run(cost, m, policy=CpuZeroFetchRestPrefetching)   # measured in rounds: same time
    assert rounds.decode_s == pytest.approx(133 * US)


def test_without_contention_the_cpu_keeps_its_speed():
    cost, m = _contended(0.0)                           # host DRAM not modelled
    c, _ = _run(cost, m)
    assert c.decode_s == pytest.approx(108 * US)        # CPU 3..103, join 5
    cost, m = _contended(1.03)                          # 0.03 GB/s left covers the 0.02 needed
    assert cost.dram_share(2000, 100 * US) == 1.0
    assert _run(cost, m)[0].decode_s == pytest.approx(108 * US)


def test_dram_cpu_time_closed_form():
    assert dram_cpu_time(20 * US, 0.5, 50 * US) == pytest.approx(40 * US)     # ends inside the DMA: W / k
    assert dram_cpu_time(100 * US, 0.5, 50 * US) == pytest.approx(125 * US)   # W + B (1 - k)
    assert dram_cpu_time(100 * US, 1.0, 50 * US) == 100 * US


def test_quantized_cpu_experts_are_compute_bound_by_their_dequant_ops_and_isa():
    hw, m, d = tiny_specs()
    hw = replace(hw, tables=None, cpu_mem_bw_gbs=1.0, cpu_tflops=7.2e-6, cpu_flops_eff=1.0, cpu_expert_us=0,
                 cpu_dequant_ops={"q4_0": 4.5}, cpu_isa_ops_scale={"avx2": 1.6}, cpu_isa="avx2")
    m = replace(m, quant="q4_0")
    cost = CostModel(hw, m, d, n_max=4)
    # 1000 weights x 4.5 x 1.6 = 7200 ops per token at 7.2 MFLOP/s = 1 ms per token; the 562.5 B
    # at 1 GB/s (0.5625 us) never bind
    assert cost.cpu_expert_table()[[1, 3]] == pytest.approx([1e-3, 3e-3])
    avx512 = CostModel(replace(hw, cpu_isa="avx512"), m, d, n_max=4)
    assert avx512.cpu_expert_table()[1] == pytest.approx(4500 / 7.2e6)
    f16 = CostModel(hw, replace(m, quant="f16"), d, n_max=4)           # no entry: one FMA, 2 ops
    assert f16.cpu_expert_table()[1] == pytest.approx(2000 / 7.2e6)


def test_cuda_graph_kernel_cost_only_when_the_forward_has_no_cpu_split():
    hw, m, d = tiny_specs()
    hw = replace(hw, tables=None, gpu_kernel_us=5.0, gpu_graph_kernel_us=1.0, gpu_mem_bw_gbs=1000.0)
    # expert 2000 B at 1000 GB/s = 0.002 us + one kernel
    assert CostModel(hw, m, d, n_max=1).gpu_expert_table()[1] == pytest.approx(5.002 * US)
    assert CostModel(hw, m, d, n_max=1, graphs=True).gpu_expert_table()[1] == pytest.approx(1.002 * US)
    assert CostModel(replace(hw, gpu_graph_kernel_us=0.0), m, d, graphs=True).kernel_us == 5.0

    full = m.n_layers * m.n_experts
    assert policy_cost_model(CpuZeroFetchRest(), hw, m, d, 0, n_slots=full).graphs
    assert not policy_cost_model(CpuZeroFetchRest(), hw, m, d, 0, n_slots=full - 1).graphs   # CPU or copies


def test_core_bandwidth_follows_littles_law_with_the_hosts_latency():
    host = _part(HostSpec, "host", "epyc_16c_ddr5", "test")
    rt = replace(runtime_spec("llama_cpp"), cpu_core_lines=10.0, cpu_core_gbs=99.0)
    assert core_bandwidth(rt, host) == pytest.approx(10 * 64 / host.mem_latency_ns)   # 640 B / 115 ns
    desk = _part(HostSpec, "host", "desktop_ddr5_2ch", "test")
    assert core_bandwidth(rt, desk) > core_bandwidth(rt, host)       # lower latency: more per core
    assert core_bandwidth(replace(rt, cpu_core_lines=0.0), host) == 99.0


def test_pageable_and_per_tensor_copies():
    comp = {"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}
    link = load_yaml("link", "pcie4_x16")
    pinned = config.hardware(comp, runtime={"name": "custom_cuda", "copy": "pinned"})
    pageable = config.hardware(comp, runtime={"name": "custom_cuda", "copy": "pageable"})
    assert (pinned.pcie_h2d_gbs, pageable.pcie_h2d_gbs) == (link["h2d_gbs"], link["pageable_gbs"])
    hw, m, d = tiny_specs()
    hw = replace(hw, tables=None, pcie_h2d_gbs=2.0, pcie_latency_us=10.0, copies_per_expert=3)
    # three tensors, one latency each: 3 x 10 us + 2000 B / 2 GB/s = 31 us
    assert CostModel(hw, m, d).transfer_s() == pytest.approx(31 * US)


def test_host_dram_ceiling_is_the_sustained_share_of_the_nodes_peak():
    hw = config.hardware({"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}, runtime="custom_cuda")
    assert hw.host_dram_gbs == pytest.approx(89.6 * 0.8)


def test_draft_forward_has_its_own_overhead():
    hw, m, d = tiny_specs()
    d = replace(d, params=1000, bytes_per_param=1.0, n_layers=2)
    hw = replace(hw, gpu_mem_bw_gbs=1.0, gpu_kernel_us=1.0, kernels_per_draft_layer=3, draft_overhead_us=7.0,
                 step_overhead_us=1000.0, gpu_graph_kernel_us=0.0)
    # 1000 B at 1 GB/s = 1 us, 2 layers x 3 kernels x 1 us = 6 us, its own 7 us (not the target's 1000)
    assert CostModel(hw, m, d).draft_token_s(0) == pytest.approx(14 * US)
