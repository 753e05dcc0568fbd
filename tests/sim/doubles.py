"""Test doubles: round-number costs and minimal policies for exact-timeline tests."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from sim.machine.specs import DraftSpec, HardwareSpec, ModelSpec
from sim.machine.cost_model import CostModel
from sim.protocol.expert_cache import ExpertCache
from sim.policies.base import CPU, FETCH, GPU, Placement, Policy, PolicyContext
from sim.protocol import build_context
from traces.schema import Trace

US = 1e-6


def tiny_specs(n_layers=2, n_experts=3, top_k=1):
    hw = HardwareSpec(name="toy", gpu="toy", vram_gib=1, gpu_mem_bw_gbs=1, gpu_mem_eff=1, gpu_tflops=1,
                      gpu_flops_eff=1, gpu_kernel_us=0, pcie_h2d_gbs=1, pcie_latency_us=0, cpu="toy",
                      cpu_mem_bw_gbs=1, cpu_mem_eff=1, cpu_tflops=1, cpu_flops_eff=1, cpu_threads=1,
                      cpu_expert_us=0, layer_sync_us=5, step_overhead_us=0, reserved_gib=0,
                      tables={"gpu_expert_us": [0, 10, 20, 30, 40], "cpu_expert_us": [0, 100, 150, 200, 250],
                              "transfer_us": 50})
    m = ModelSpec(name="toy", n_layers=n_layers, n_dense_layers=0, n_experts=n_experts, top_k=top_k,
                  n_shared_experts=0, hidden=8, moe_intermediate=8, expert_params=1000, non_expert_params=0,
                  attn_params_per_layer=0, lm_head_params=0, kv_bytes_per_token=0)
    d = DraftSpec(name="toy_draft", params=0, bytes_per_param=0, n_layers=0, kv_bytes_per_token=0)
    return hw, m, d


# The round-number machine of the exact-timeline tests on the real cost model (PCIe latency 10 us,
# 1 GB/s link, 4 GB/s GPU, 0.4 GB/s CPU); tests vary a field with dataclasses.replace.
ROUND_HW = HardwareSpec(name="round", gpu="toy", vram_gib=1, gpu_mem_bw_gbs=4, gpu_mem_eff=1, gpu_tflops=1,
                        gpu_flops_eff=1, gpu_kernel_us=1, pcie_h2d_gbs=1, pcie_latency_us=10, cpu="toy",
                        cpu_mem_bw_gbs=0.4, cpu_mem_eff=1, cpu_tflops=1, cpu_flops_eff=1, cpu_threads=1,
                        cpu_expert_us=0, layer_sync_us=5, step_overhead_us=4, reserved_gib=0)
ROUND_MODEL = ModelSpec(name="round", n_layers=2, n_dense_layers=0, n_experts=3, top_k=1, n_shared_experts=0,
                        hidden=8, moe_intermediate=8, expert_params=20000, non_expert_params=0,
                        attn_params_per_layer=1976, lm_head_params=2000, kv_bytes_per_token=32)
NO_DRAFT = DraftSpec(name="none", params=0, bytes_per_param=0, n_layers=0, kv_bytes_per_token=0)


@dataclass(frozen=True)
class RoundCosts(CostModel):
    """Fixed round costs: attention 2 us/layer, step fixed 1 us, draft 7 us/token, sync from hw."""

    def layer_fixed_s(self, n_tokens, context):
        return 2 * US

    def step_fixed_s(self, n_tokens):
        return 1 * US

    def draft_token_s(self, context):
        return 7 * US


def toy_trace(experts, n_experts=3) -> Trace:
    ex = np.asarray(experts, dtype=np.int16)
    meta = dict(schema_version=1, model="toy", n_layers=ex.shape[1], n_experts=n_experts,
                top_k=ex.shape[2], source="synthetic")
    return Trace(meta=meta, experts=ex).validate()


def context_for(cost: CostModel, m: ModelSpec, n_slots: int, gamma: int = 0, future=None) -> PolicyContext:
    """The executors' own context builder, for a policy that gets the future when one is given."""
    wants = SimpleNamespace(needs_profile=False, needs_future=future is not None)
    return build_context(wants, cost, n_slots, gamma, 0, 0, None, future)


class StaticGPU(Policy):
    """Experts of ``gpu_set`` resident from the start; everything else on the CPU."""

    name = "static_gpu"

    def __init__(self, gpu_set=(), speculative=False):
        self.gpu_set, self.speculative = list(gpu_set), speculative

    def initial_residency(self):
        return self.gpu_set

    def place(self, layer, counts, signals, cache):
        return Placement(np.where(cache.resident[layer], GPU, CPU).astype(np.int8))


class FetchFIFO(Policy):
    """Fetch every miss, evict the oldest arrival; optional prefetch list at each step start."""

    name = "fetch_fifo"

    def __init__(self, prefetch=(), overlap=True):
        self.prefetch, self.overlap = list(prefetch), overlap

    def reset(self, ctx, cache):
        self.ctx, self.order, self.queue = ctx, deque(), deque()

    def on_step_start(self, step, signals, cache):
        self.queue.extend(self.prefetch)

    def place(self, layer, counts, signals, cache):
        return Placement(np.where(cache.resident[layer], GPU, FETCH).astype(np.int8))

    def next_transfer(self, cache):
        return self.queue.popleft() if self.queue else None

    def victim(self, layer, expert, cache, demand):
        for v in list(self.order):
            if cache.resident[v] and not cache.pinned[v[0]]:
                self.order.remove(v)
                return v
        return None

    def on_transfer_done(self, layer, expert, cache):
        self.order.append((layer, expert))


def make_cache(m: ModelSpec, n_slots: int) -> ExpertCache:
    return ExpertCache(m.n_layers, m.n_experts, n_slots)
