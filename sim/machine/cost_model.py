"""The cost model: the only place that turns bytes and FLOPs into seconds.

Every time is a roofline, ``max(bytes / (bandwidth * eff), flops / (rate * eff)) + overhead``, with
the datasheet rates (``conf/gpu``, ``conf/host``, ``conf/link``) and the runtime's efficiencies and
overheads (``conf/runtime``), resolved into :class:`sim.machine.specs.HardwareSpec`. Expert bytes follow
the experts' quant format; the runtime may scale the achieved bandwidth per format
(``gpu_quant_eff`` / ``cpu_quant_eff``). Tables measured by ``python -m real profile`` (``hardware.tables``) override the
roofline for expert times and transfers: ``gpu_expert_us[n]`` / ``cpu_expert_us[n]`` by tokens
``n = 0..N`` and ``transfer_us`` for one expert.

Three mechanisms beyond the roofline (docs/fidelity.md): a CPU kernel on a quantized format
computes ``cpu_dequant_ops`` FLOP-equivalent vector ops per weight and token (unpack, scale, dot;
2 for a plain FMA), scaled by the host ISA (``cpu_isa_ops_scale``: AVX2 has no VNNI int8 dot); a
forward that runs wholly on the GPU replays one CUDA graph (``gpu_graph_kernel_us`` per kernel
instead of ``gpu_kernel_us``, ``graphs=True``); and host DRAM is shared by the CPU's experts and the
DMA of host-to-device copies (:meth:`CostModel.dram_share`, :func:`dram_cpu_time`).

A ``STREAM`` placement (vLLM's UVA offload) is charged as one expert's ``transfer_s`` on the link
followed by its GPU time from the table: the executors copy the weights into a staging buffer and
then compute, so the simulator models what the real executor does (a zero-copy kernel that reads
host memory while computing, overlapping the two, is not modelled).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.machine.attention import attention_kernel_s, layer_attention_work
from sim.machine.specs import DraftSpec, HardwareSpec, ModelSpec
from sim.machine.cost_table import CostTable

GB, US, GIB = 1e9, 1e-6, 2 ** 30

TABLE_MIN_TOKENS = 64   # expert tables cover at least 0..64 tokens (beyond: linear extrapolation)


def dram_cpu_time(work_s: float, k: float, busy_s: float) -> float:
    """Seconds the CPU needs for ``work_s`` seconds of expert work (at full speed) when a DMA reads
    host DRAM for the first ``busy_s`` of them and the CPU runs at ``k`` of its speed meanwhile:
    in ``T`` seconds it does ``T - min(T, busy_s) (1 - k)``, so ``T = work_s / k`` if the work ends
    within the DMA, else ``work_s + busy_s (1 - k)``."""
    if k >= 1.0 or busy_s <= 0.0 or work_s <= 0.0:
        return work_s
    return work_s / k if work_s <= busy_s * k else work_s + busy_s * (1.0 - k)


def dram_speed(cpu_bytes: float, cpu_s: float, left_bps: float) -> float:
    """The speed factor k <= 1 of CPU experts reading ``cpu_bytes`` in ``cpu_s`` when ``left_bps``
    of host DRAM bandwidth is left to them (:meth:`CostModel.dram_share`)."""
    if cpu_s <= 0 or cpu_bytes <= 0:
        return 1.0
    need = cpu_bytes / cpu_s
    return 1.0 if need <= left_bps else max(left_bps, 0.05 * need) / need


def host_op_us(op_us: float, ref_ghz: float, host_ghz: float) -> float:
    """Microseconds of one eager op's host cost (Python dispatch + kernel launch, single-threaded) on
    a host of single-thread speed ``host_ghz``, when it costs ``op_us`` on the host of ``ref_ghz`` it
    was fitted on: the work is a fixed count of host instructions, so its time goes as
    ``1 / single-thread speed`` (``op_us x ref_ghz / host_ghz``). Unscaled when either speed is 0
    (a runtime whose launches are not host-bound, or a host whose CPU is unknown). Boost clock is
    the proxy for single-thread speed: IPC differences between core generations are not modelled."""
    if ref_ghz <= 0 or host_ghz <= 0:
        return op_us
    return op_us * ref_ghz / host_ghz


def table_tokens(gamma: int) -> int:
    """The largest per-expert token count a run's tables cover (a verify window is gamma+1)."""
    return max(TABLE_MIN_TOKENS, gamma + 1)


@dataclass(frozen=True)
class CostModel:
    """Seconds for every operation of an offloaded MoE decode step on one machine.

    ``cpu_scale`` multiplies the CPU's sustained rates (kTransformers' optimised CPU kernels);
    ``n_max`` is the largest per-expert token count tabulated (beyond it, linear extrapolation);
    ``graphs`` says the run's target forward has no CPU split, so the runtime's CUDA-graph kernel
    cost applies (llama.cpp captures a graph only when the whole forward runs on the GPU).
    """

    hw: HardwareSpec
    model: ModelSpec
    draft: DraftSpec
    cpu_scale: float = 1.0
    n_max: int = TABLE_MIN_TOKENS
    graphs: bool = False

    @property
    def kernel_us(self) -> float:
        """Microseconds per GPU kernel of the target forward: inside a CUDA graph when ``graphs``
        and the runtime uses graphs, else one launch each (graph replay removes the per-launch
        host cost; NVIDIA "Getting Started with CUDA Graphs")."""
        return self.forward_kernel_us(self.graphs)

    def forward_kernel_us(self, graphs: bool) -> float:
        """Microseconds per GPU kernel of a forward run as one CUDA graph (``graphs``, when the
        runtime uses graphs) or kernel by kernel; an eager launch's host cost scaled by the host's
        single-thread speed (:func:`host_op_us`)."""
        hw = self.hw
        if graphs and hw.gpu_graph_kernel_us > 0:
            return hw.gpu_graph_kernel_us
        return host_op_us(hw.gpu_kernel_us, hw.eager_ref_ghz, hw.host_single_thread_ghz)

    def cpu_ops_per_weight(self, fmt: str) -> float:
        """FLOP-equivalent CPU vector ops per weight per token of format ``fmt``'s kernel: the
        runtime's ``cpu_dequant_ops`` times its ISA multiplier, or 2 (one FMA) when it names none."""
        hw = self.hw
        ops = hw.cpu_dequant_ops or {}
        if fmt not in ops:
            return 2.0
        return float(ops[fmt]) * float((hw.cpu_isa_ops_scale or {}).get(hw.cpu_isa, 1.0))

    # --- experts -------------------------------------------------------------------------
    @property
    def expert_bytes(self) -> int:
        return self.model.expert_bytes

    def _expert_flops(self, n):
        return 2.0 * self.model.expert_params * np.asarray(n, dtype=float)

    def gpu_expert_table(self) -> np.ndarray:
        """GPU seconds for one expert with n = 0..n_max tokens (weights read from VRAM), plus
        ``gpu_ops_per_expert`` launches at the forward's per-kernel cost: 1 for a runtime that runs an
        expert as one fused launch, more for one that calls an expert op by op from Python."""
        t = self.hw.tables or {}
        if "gpu_expert_us" in t:
            return np.asarray(t["gpu_expert_us"], dtype=float)[: self.n_max + 1] * US
        hw, n = self.hw, np.arange(self.n_max + 1)
        mem = self.expert_bytes / (hw.gpu_mem_bw_gbs * GB * hw.gpu_mem_eff * self._quant_eff(hw.gpu_quant_eff))
        fl = self._expert_flops(n) / (hw.gpu_tflops * 1e12 * hw.gpu_flops_eff)
        ops = hw.gpu_ops_per_expert + 3 * self.quant_ops(self.model.expert_quant)   # gate, up, down
        return np.where(n > 0, np.maximum(mem, fl) + ops * self.kernel_us * US, 0.0)

    def quant_ops(self, fmt: str) -> int:
        """Extra eager ops the runtime launches per GPU linear of format ``fmt`` (HQQ layers
        dequantize their quantized scale and zero with PyTorch ops before the Triton GEMM); 0 if
        it names none."""
        return int((self.hw.gpu_quant_ops or {}).get(fmt, 0))

    def cpu_expert_table(self) -> np.ndarray:
        """CPU seconds for one expert with n = 0..n_max tokens (weights read from host DRAM)."""
        t = self.hw.tables or {}
        if "cpu_expert_us" in t:
            return np.asarray(t["cpu_expert_us"], dtype=float)[: self.n_max + 1] * US / self.cpu_scale
        hw, n = self.hw, np.arange(self.n_max + 1)
        mem = self.expert_bytes / (hw.cpu_mem_bw_gbs * GB * hw.cpu_mem_eff * self.cpu_scale
                                   * self._quant_eff(hw.cpu_quant_eff))
        ops = self.cpu_ops_per_weight(self.model.expert_quant) / 2.0     # _expert_flops counts 2 per weight
        fl = ops * self._expert_flops(n) / (hw.cpu_tflops * 1e12 * hw.cpu_flops_eff * self.cpu_scale)
        return np.where(n > 0, np.maximum(mem, fl) + hw.cpu_expert_us * US, 0.0)

    def _quant_eff(self, table: dict | None) -> float:
        """The runtime's bandwidth multiplier for the experts' format (1 when it names none)."""
        return float((table or {}).get(self.model.expert_quant, 1.0))

    def transfer_s(self) -> float:
        """One expert host->device over PCIe (pinned), plus its share of the layer's dense weights
        when the runtime streams whole layers (:meth:`stream_dense_bytes`)."""
        t = self.hw.tables or {}
        if "transfer_us" in t:
            return float(t["transfer_us"]) * US
        return (self.hw.copies_per_expert * self.hw.pcie_latency_us * US
                + (self.expert_bytes + self.stream_dense_bytes()) / (self.hw.pcie_h2d_gbs * GB))

    def stream_dense_bytes(self) -> float:
        """Bytes of a streamed layer's dense weights (attention, router, shared experts) charged to
        each of its ``top_k`` streamed experts, 0 unless the runtime offloads whole layers
        (``stream_dense``). vLLM's UVA offload takes parameters in declaration order, dense ones
        included (vllm ``maybe_offload_to_cpu``; vllm issue #54593: "UvaOffloader walks
        named_parameters() ... Declaration order", dense weights read on every forward), so each
        forward of an offloaded layer reads them over PCIe besides its ``top_k`` routed experts.
        Exact for one token per forward, when a layer streams exactly ``top_k`` experts."""
        if not self.hw.stream_dense:
            return 0.0
        m = self.model
        return (m.attn_params_per_layer + m.hidden * m.n_experts + m.shared_params) * m.bytes_per_param / m.top_k

    def bulk_transfer_s(self, n_experts: int) -> float:
        """``n_experts`` experts of one layer copied as one block: one latency, then all the bytes."""
        t = self.hw.tables or {}
        if "transfer_us" in t:
            return n_experts * float(t["transfer_us"]) * US
        return self.hw.pcie_latency_us * US + n_experts * self.expert_bytes / (self.hw.pcie_h2d_gbs * GB)

    # --- non-expert parts -------------------------------------------------------------------
    def layer_fixed_s(self, n_tokens: int, context: int) -> float:
        """Attention, router and shared experts of one MoE layer on the GPU for ``n_tokens`` tokens:
        the weight kernels (a roofline on the weights and their FLOPs), then the attention kernel over
        the ``context`` tokens in the cache (KV read and score/value FLOPs at ``gpu_attn_eff``
        overlapped, :func:`sim.machine.attention.attention_kernel_s`), then the launches. The shared
        experts are left out where they run beside the CPU experts (:meth:`gpu_beside_s`)."""
        hw, m = self.hw, self.model
        shared = 0 if self.shared_beside(n_tokens) else m.shared_params
        weight_bytes = (m.attn_params_per_layer + m.hidden * m.n_experts + shared) * m.bytes_per_param
        kernels = (hw.kernels_per_layer + (hw.kernels_per_shared_expert if shared else 0)
                   + 4 * self.quant_ops(m.dense_quant))            # q, k, v, o projections
        attn = attention_kernel_s(*layer_attention_work(m, n_tokens, context), self._gpu_bw(),
                                  hw.gpu_tflops * 1e12 * hw.gpu_attn_eff)
        weights = self._gpu_weights_s(weight_bytes, 2.0 * n_tokens * (m.attn_params_per_layer + shared))
        return weights + attn + kernels * self.kernel_us * US

    def _gpu_bw(self) -> float:
        """Bytes per second a GPU weight kernel reads (peak x ``gpu_mem_eff``)."""
        return self.hw.gpu_mem_bw_gbs * GB * self.hw.gpu_mem_eff

    def _gpu_weights_s(self, weight_bytes: float, flops: float) -> float:
        """A GPU weight kernel's roofline: its weights read at :meth:`_gpu_bw` or its FLOPs at
        ``gpu_flops_eff`` of peak, whichever takes longer."""
        hw = self.hw
        return max(weight_bytes / self._gpu_bw(), flops / (hw.gpu_tflops * 1e12 * hw.gpu_flops_eff))

    def shared_beside(self, n_tokens: int) -> bool:
        """Whether a forward of ``n_tokens`` computes the shared experts on the GPU while the CPU
        computes the routed experts: the runtime's ``shared_overlap``, for one-token forwards only
        (kTransformers' MoE blocks, ``operators/experts.py``: ``if sequence_length == 1``, submit the
        CPU experts, run ``self.shared_expert(...)`` on the GPU, then ``sync_for_one_decode()``; a
        longer forward runs them one after the other)."""
        return bool(self.hw.shared_overlap and n_tokens == 1 and self.model.shared_params)

    def gpu_beside_s(self, n_tokens: int) -> float:
        """GPU seconds of one MoE layer that run beside its CPU experts (0 unless :meth:`shared_beside`):
        the shared experts' weights and FLOPs (a roofline) and their launches. The engine adds them to
        the layer's GPU lane, which the CPU's experts run in parallel with."""
        if not self.shared_beside(n_tokens):
            return 0.0
        hw, m = self.hw, self.model
        weights = self._gpu_weights_s(m.shared_params * m.bytes_per_param, 2.0 * n_tokens * m.shared_params)
        return weights + hw.kernels_per_shared_expert * self.kernel_us * US

    def cpu_layer_fixed_s(self, n_tokens: int, context: int) -> float:
        """Attention, router and shared experts of one MoE layer computed on the CPU (a layer
        offloaded whole, llama.cpp ``-ngl``): weights read from host DRAM, then attention over the
        layer's KV cache (read at ``cpu_kv_eff`` of the bandwidth, score/value FLOPs at the CPU's
        achieved rate, overlapped), plus the runtime's per-op thread-pool cost (``cpu_ops_per_layer x cpu_op_us``)."""
        hw, m = self.hw, self.model
        bw = hw.cpu_mem_bw_gbs * GB * hw.cpu_mem_eff
        weight_bytes = (m.attn_params_per_layer + m.hidden * m.n_experts + m.shared_params) * m.bytes_per_param
        flops = self.cpu_ops_per_weight(m.dense_quant) * n_tokens * (m.attn_params_per_layer + m.shared_params)
        rate = hw.cpu_tflops * 1e12 * hw.cpu_flops_eff
        attn = attention_kernel_s(*layer_attention_work(m, n_tokens, context), bw * hw.cpu_kv_eff, rate)
        return max(weight_bytes / bw, flops / rate) + attn + hw.cpu_ops_per_layer * hw.cpu_op_us * US

    def step_fixed_s(self, n_tokens: int, dense_tokens: int | None = None) -> float:
        """Per target forward: embeddings, dense layers, final norm, lm_head, host overhead, and
        sampling at each of the ``n_tokens`` verified positions (``sample_us`` each). The dense
        layers see ``dense_tokens`` (default ``n_tokens``): a prefill micro-batch runs them for all
        its tokens but the lm_head for the last position only."""
        hw = self.hw
        return self._head_s(n_tokens, hw.gpu_mem_bw_gbs * GB * hw.gpu_mem_eff, hw.gpu_tflops * 1e12 * hw.gpu_flops_eff,
                            dense_tokens=dense_tokens)

    def cpu_step_fixed_s(self, n_tokens: int) -> float:
        """:meth:`step_fixed_s` with the output layer and dense layers on the CPU (llama.cpp ``-ngl``
        at most the layer count): their weights read from host DRAM at the CPU's rates."""
        hw = self.hw
        return self._head_s(n_tokens, hw.cpu_mem_bw_gbs * GB * hw.cpu_mem_eff, hw.cpu_tflops * 1e12 * hw.cpu_flops_eff,
                            self.cpu_ops_per_weight(self.model.dense_quant))

    def _head_s(self, n_tokens: int, bw: float, rate: float, ops: float = 2.0, dense_tokens: int | None = None) -> float:
        hw, m = self.hw, self.model
        dense = m.n_dense_layers * (m.attn_params_per_layer + 3 * m.hidden * m.dense_intermediate)
        lm = (m.lm_head_params + dense) * m.bytes_per_param
        flops = ops * (n_tokens * m.lm_head_params + (n_tokens if dense_tokens is None else dense_tokens) * dense)
        return max(lm / bw, flops / rate) + hw.step_overhead_us * US + n_tokens * hw.sample_us * US

    def draft_step_s(self, forwards: int, extra_decodes: int, context: int) -> float:
        """A step's draft phase: its ``forwards`` draft decodes (the schedule's
        :meth:`traces.windows.Schedule.draft_decodes`: gamma, or fewer when drafting stopped early)
        plus the policy's ``draft_extra_decodes``; nothing for an autoregressive step. The engine and
        the planner both price a step's draft here."""
        return (forwards + extra_decodes) * self.draft_token_s(context) if forwards > 0 else 0.0

    def draft_token_s(self, context: int) -> float:
        """One draft forward of one token (GEMV over all draft weights, plus its KV cache)."""
        d, hw = self.draft, self.hw
        if d.params <= 0:
            return d.host_us_per_token * US
        bw = hw.gpu_mem_bw_gbs * GB * hw.gpu_mem_eff
        byts = d.weight_bytes + context * d.kv_bytes_per_token
        kernel = self.forward_kernel_us(True)   # the draft runs all on the GPU
        return byts / bw + d.n_layers * hw.kernels_per_draft_layer * kernel * US + hw.draft_overhead_us * US

    def dram_share(self, cpu_bytes: float, cpu_s: float) -> float:
        """The speed factor k <= 1 of a layer's CPU experts (``cpu_bytes`` read in ``cpu_s``) while a
        host-to-device DMA runs: both read the same host DRAM, whose sustained rate
        (``host_dram_gbs``, STREAM-like share of the theoretical peak) bounds their sum, so the CPU
        keeps ``host_dram_gbs - pcie_h2d_gbs`` (physics-audit 1d). 1 when that covers its need or
        the host's DRAM is not modelled (``host_dram_gbs = 0``)."""
        return dram_speed(cpu_bytes, cpu_s, self.dram_left_bps())

    def dram_left_bps(self) -> float:
        """Host DRAM bytes/s left to the CPU while a host-to-device DMA runs (``inf`` when the
        host's DRAM is not modelled)."""
        hw = self.hw
        return float("inf") if hw.host_dram_gbs <= 0 else (hw.host_dram_gbs - hw.pcie_h2d_gbs) * GB

    def layer_sync_s(self) -> float:
        """Joining CPU and GPU partial results of a layer (only when CPU experts ran)."""
        return self.hw.layer_sync_us * US

    def cost_table(self, gamma: int, context: int) -> CostTable:
        """The numbers a policy may use to decide (pure data)."""
        n = max(1, gamma + 1)
        return CostTable(
            gpu_expert_s=self.gpu_expert_table(),
            cpu_expert_s=self.cpu_expert_table(),
            transfer_s=self.transfer_s(),
            layer_fixed_s=self.layer_fixed_s(n, context),
            draft_phase_s=gamma * self.draft_token_s(context),
            expert_bytes=self.expert_bytes,
            step_fixed_s=self.step_fixed_s(n),
            dram_left_bps=self.dram_left_bps(),
            layer_fixed_by_n=tuple(self.layer_fixed_s(k, context) for k in range(1, n + 1)),
            step_fixed_by_n=tuple(self.step_fixed_s(k) for k in range(1, n + 1)),
        )
