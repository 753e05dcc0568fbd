"""What one prefill micro-batch costs, layer by layer: attention, experts on either device, copies.

Built on :class:`sim.machine.cost_model.CostModel` (the only place that turns bytes and FLOPs into seconds):
per-expert GPU and CPU times are its rooflines tabulated up to the micro-batch size (weights read
once per expert, FLOPs proportional to the expert's tokens; with measured tables, linear
extrapolation past their end), a copy is its ``transfer_s`` per expert (llama.cpp copies only the
experts a micro-batch uses, github.com/ggml-org/llama.cpp PR #15346, one copy each). Attention,
router and shared experts are :meth:`CostModel.layer_fixed_s` for the micro-batch's ``n`` tokens
after ``c`` cached ones: it includes the score and value products over the causal context
(:mod:`sim.machine.attention`, the same function decode uses).
Each micro-batch pays the host overhead of one forward; the lm_head runs for the last prompt token
only (llama.cpp computes logits of the last position by default).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from sim.machine.cost_model import GB, CostModel
from sim.machine.cost_table import CostTable



@dataclass(frozen=True)
class PrefillCosts:
    """Seconds for the parts of one prefill micro-batch of up to ``ubatch`` tokens on one machine."""

    cost: CostModel
    ubatch: int
    gpu_tab: np.ndarray       # GPU seconds of one expert by token count 0..ubatch
    cpu_tab: np.ndarray       # CPU seconds of one expert by token count 0..ubatch

    @classmethod
    def build(cls, cost: CostModel, ubatch: int) -> PrefillCosts:
        """Costs whose expert tables cover ``ubatch`` tokens per expert."""
        cost = dataclasses.replace(cost, n_max=max(cost.n_max, int(ubatch)))
        return cls(cost, int(ubatch), cost.gpu_expert_table(), cost.cpu_expert_table())

    @property
    def transfer_s(self) -> float:
        return self.cost.transfer_s()

    def gpu_experts_s(self, n: np.ndarray) -> float:
        """GPU seconds for experts with ``n`` tokens each (one kernel per expert)."""
        return float(np.sum(CostTable._lookup(self.gpu_tab, n)))

    def cpu_experts_s(self, n: np.ndarray) -> float:
        """CPU seconds for experts with ``n`` tokens each (weights streamed from host DRAM)."""
        return float(np.sum(CostTable._lookup(self.cpu_tab, n)))

    def attention_s(self, n: int, cached: int) -> float:
        """Attention, router and shared experts of one MoE layer for ``n`` new tokens after ``cached``."""
        return self.cost.layer_fixed_s(n, cached + n)

    def head_s(self, n: int, last: bool) -> float:
        """Embeddings, dense layers for the ``n`` tokens and the host overhead of one forward; the
        lm_head and sampling of the last position when ``last`` (one roofline with the dense
        weights: :meth:`CostModel.step_fixed_s`)."""
        c, hw, m = self.cost, self.cost.hw, self.cost.model
        if last:
            return c.step_fixed_s(1, dense_tokens=n)
        dense = m.n_dense_layers * (m.attn_params_per_layer + 3 * m.hidden * m.dense_intermediate)
        bw, rate = hw.gpu_mem_bw_gbs * GB * hw.gpu_mem_eff, hw.gpu_tflops * 1e12 * hw.gpu_flops_eff
        dense_s = max(dense * m.bytes_per_param / bw, 2.0 * n * dense / rate) if dense else 0.0
        return dense_s + hw.step_overhead_us * 1e-6

    def sync_s(self) -> float:
        """Joining CPU and GPU partial results of a layer."""
        return self.cost.layer_sync_s()


    def copy_choice_s(self, host_n: np.ndarray, resident_n: np.ndarray) -> tuple[float, float]:
        """(PCIe, GPU) seconds when the layer's touched host experts are copied and every touched
        expert runs on the GPU (the copies and the GPU kernels are serial on one stream)."""
        return len(host_n) * self.transfer_s, self.gpu_experts_s(np.concatenate([resident_n, host_n]))

    def cpu_choice_s(self, host_n: np.ndarray, resident_n: np.ndarray) -> tuple[float, float]:
        """(GPU, CPU) seconds when resident experts run on the GPU and host experts on the CPU, in parallel."""
        return self.gpu_experts_s(resident_n), self.cpu_experts_s(host_n)

    def layer_s(self, copy: bool, host_n: np.ndarray, resident_n: np.ndarray) -> float:
        """The experts' part of one layer's time under either choice (join included when the CPU works)."""
        if copy or len(host_n) == 0:
            link, gpu = self.copy_choice_s(host_n, resident_n)
            return link + gpu
        gpu, cpu = self.cpu_choice_s(host_n, resident_n)
        return max(gpu, cpu) + self.sync_s()
