"""Static placement policies: llama.cpp (AR and with speculative decoding), Fiddler, kTransformers.

The GPU holds a fixed set of experts chosen before decoding (loaded by :meth:`initial_residency`
at no cost); everything else runs on the CPU from host memory. No prefetch; only Fiddler ever
moves an expert at decode (a temporary copy, when that is no slower than computing it on the CPU).
"""
from __future__ import annotations

import numpy as np

from sim.policies.base import CPU, Placement, Policy, Signals
from sim.policies.common import OffloadPolicy, gpu_where, present_row, static_where
from sim.policies.recency import LRUOrder
from sim.policies.resident_first import resident_first
from sim.policies.split import ExpertTimes
from sim.policies.static_sets import layer_experts, most_popular, whole_layers


class LlamaCppStatic(Policy):
    """llama.cpp with the experts of whole layers on the GPU and the rest on the CPU (AR).

    Mechanism: tensor placement is fixed at load time; at decode every op runs where its weights
    live (a routed expert of a GPU layer on the GPU, of a CPU layer on the CPU); nothing moves over
    PCIe while decoding. Experts are stored as one tensor per layer (``ffn_{up,gate,down}_exps``),
    so placement is by whole layers: ``n_slots // n_experts`` layers, the rest of the budget unused.
    Source: github.com/ggml-org/llama.cpp, ``-ngl 99 -ot <regex>=CPU`` (PR #11397) and
    ``--n-cpu-moe N`` (PR #15077: the experts of the first N layers stay on the CPU).

    Parameters:
        gpu_layers: which end of the model keeps its experts on the GPU, ``"last"`` (default,
            what ``--n-cpu-moe N`` does: the first N layers' experts on the CPU) or ``"first"``;
            or a number N, llama.cpp's ``-ngl N``: the last N layers are offloaded whole to the
            GPU, the others run whole on the CPU (attention, router and experts, weights and KV
            in host DRAM), and the output layer runs on the GPU only when N exceeds the layer
            count (llama.cpp ``llm_load_tensors``: ``i_gpu_start = n_layer - n_gpu_layers``).
        n_cpu_moe: ``--n-cpu-moe N``: the experts of the first N MoE layers stay on the CPU, those
            of the other layers are on the GPU (the slots follow; ``cache_ratio`` is ignored).
    """

    speculative = False

    def __init__(self, gpu_layers: str | int = "last", n_cpu_moe: int | None = None):
        if isinstance(gpu_layers, bool) or not (gpu_layers in ("last", "first")
                                               or (isinstance(gpu_layers, int) and gpu_layers >= 0)):
            raise ValueError(f"policy.gpu_layers must be 'last', 'first' or an integer >= 0 (-ngl N), "
                             f"got {gpu_layers!r}")
        if isinstance(gpu_layers, int) and n_cpu_moe is not None:
            raise ValueError("policy.gpu_layers=N (-ngl) and policy.n_cpu_moe cannot both be set")
        if n_cpu_moe is not None and (not isinstance(n_cpu_moe, int) or n_cpu_moe < 0):
            raise ValueError(f"policy.n_cpu_moe must be an integer >= 0, got {n_cpu_moe!r}")
        self.gpu_layers = gpu_layers
        self.n_cpu_moe = n_cpu_moe

    def slot_request(self, n_layers: int, n_experts: int) -> int | None:
        if isinstance(self.gpu_layers, int):
            return min(self.gpu_layers, n_layers) * n_experts
        if self.n_cpu_moe is None:
            return None
        return (n_layers - min(self.n_cpu_moe, n_layers)) * n_experts

    def cpu_layer_count(self, n_layers: int) -> int:
        return n_layers - min(self.gpu_layers, n_layers) if isinstance(self.gpu_layers, int) else 0

    def output_layer_on_cpu(self, n_layers: int) -> bool:
        return isinstance(self.gpu_layers, int) and self.gpu_layers <= n_layers

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        if isinstance(self.gpu_layers, int):
            self.cpu_layers = frozenset(range(ctx.n_layers - min(self.gpu_layers, ctx.n_layers)))
            self.output_on_cpu = self.output_layer_on_cpu(ctx.n_layers)

    def initial_residency(self) -> list[tuple[int, int]]:
        c = self.ctx
        which = "last" if isinstance(self.gpu_layers, int) else self.gpu_layers
        layers = whole_layers(c.n_layers, c.n_experts, c.n_slots, which)
        return layer_experts(layers, c.n_experts)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        return Placement(static_where(cache, layer, CPU))


class LlamaCppSpec(LlamaCppStatic):
    """llama.cpp with speculative decoding (``llama-speculative -md draft.gguf --draft 8``).

    Same placement as :class:`LlamaCppStatic`; the executor runs the draft model and verifies
    gamma+1 tokens per step, so a layer's experts see several tokens at once and an expert on the
    CPU computes all of them from one read of its weights. This is the "llama.cpp-w/SD" baseline of
    MoE-SpAc (arXiv 2603.09983, its strongest baseline); the authors' own fork runs it as
    ``llama-speculative -m target.gguf -md draft.gguf -ot exps=CPU --draft 8``.

    ``examples/speculative`` decodes the target's corrected token on the draft and then each of
    the gamma drafts: gamma + 1 draft decodes per step (``draft_extra_decodes = 1``).

    Parameters:
        gpu_layers: as :class:`LlamaCppStatic` (default ``"last"``, ``--n-cpu-moe`` placement).
        n_cpu_moe: as :class:`LlamaCppStatic` (``--n-cpu-moe N``; None: ``cache_ratio`` decides).
    """

    speculative = True
    draft_extra_decodes = 1


class Fiddler(OffloadPolicy):
    """Fiddler: popular experts fixed on the GPU, resident experts always computed there (AR).

    Mechanism, as its code runs (arXiv 2402.07033, ICLR'25; github.com/efeslab/fiddler
    ``src/fiddler/mixtral.py``): at load time ``calc_n_expert_on_gpu`` counts how many experts fit
    in 95% of VRAM after the other weights and one ``expert_placeholder``, and ``set_expert_loc``
    puts that many (layer, expert) pairs on the GPU in the order of an offline popularity profile
    (here ``ctx.profile``, greedy by popularity up to the budget). At decode each requested expert
    is decided on its own (:func:`sim.policies.resident_first.resident_first`): a resident expert
    always runs on the GPU; a non-resident one is copied over PCIe into the placeholder when that
    is no slower than computing it on the CPU for its token count, else it runs on the CPU (with
    one token: the CPU). There is no CPU/GPU balancing of resident experts.

    Parameters:
        fetch_slots: slots kept out of the static set to hold such temporary copies (default 1:
            Fiddler's one ``expert_placeholder``). At most this many copies per layer; with 0,
            the policy never copies.
    """

    speculative = False
    needs_profile = True

    def __init__(self, fetch_slots: int = 1):
        self.fetch_slots = fetch_slots

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        n_static = max(0, ctx.n_slots - self.fetch_slots)
        self.static = most_popular(ctx.profile, ctx.n_layers, ctx.n_experts, n_static, ctx.seed)
        self.static_mask = np.zeros((ctx.n_layers, ctx.n_experts), dtype=bool)
        for l, e in self.static:
            self.static_mask[l, e] = True
        self.lru = LRUOrder(ctx.n_layers, ctx.n_experts, keep=~self.static_mask)   # the temporary copies
        self.times = ExpertTimes(ctx.costs)

    def initial_residency(self) -> list[tuple[int, int]]:
        return list(self.static)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        spare = cache.n_free + self.lru.evictable_count(cache)
        present = present_row(cache, layer)
        on_gpu = resident_first(counts, present, self.ctx.costs, min(spare, self.fetch_slots), self.times)
        where = gpu_where(cache, layer, counts, on_gpu)
        return Placement(where)

    def victim(self, layer: int, expert: int, cache, demand: bool):
        found = self.lru.oldest_evictable(cache)
        return found if found is not None else self.refuse(demand)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self.lru.touch(layer, expert)


class KTransformers(Policy):
    """kTransformers: attention and shared experts on the GPU, routed experts on the CPU (AR).

    Mechanism (SOSP'25; github.com/kvcache-ai/ktransformers): a static GPU expert mask
    (``--kt-num-gpu-experts`` / ``--kt-gpu-experts-ratio`` with the "frequency" strategy: global
    top-k of an activation-frequency table, here ``ctx.profile``); masked experts run on the GPU,
    all others on the CPU with kTransformers' AVX-512/AMX kernels; no transfers at decode.

    Parameters:
        cpu_speedup: how much faster its CPU expert kernel is than the CPU cost of the hardware
            preset. Exposed to the cost model as ``cpu_efficiency_scale`` (the runner applies it;
            the policy's own decisions do not depend on it). Default 1.25, the low end of the
            1.25-4.09x decode speedup over llama.cpp/Fiddler reported in the SOSP'25 abstract; a
            rough attribution, since that range also includes NUMA-aware tensor parallelism and
            CUDA graphs on dual-socket Xeons, not available on a one-socket desktop.
        gpu_experts_per_layer: the K most popular experts of every layer on the GPU (its
            per-layer GPU expert count); None: the global top ``n_slots`` (``--kt-num-gpu-experts``).
        deferred_experts: Expert Deferral (SOSP'25; ``--kt-max-deferred-experts-per-token``; the
            "N+M" optimize rules of its artifact: N immediate, M deferred): in one-token decode, up
            to M of a layer's CPU experts are computed while the next layer's attention runs, their
            output joined at the next layer's end (the last MoE layer defers none). 0: off.
    """

    speculative = False
    needs_profile = True

    def __init__(self, cpu_speedup: float = 1.25, gpu_experts_per_layer: int | None = None,
                 deferred_experts: int = 0):
        self.cpu_speedup = cpu_speedup
        self.cpu_efficiency_scale = cpu_speedup
        self.gpu_experts_per_layer = gpu_experts_per_layer
        if int(deferred_experts) != deferred_experts or deferred_experts < 0:
            raise ValueError(f"policy.deferred_experts must be an integer >= 0, got {deferred_experts!r}")
        self.deferred_experts = int(deferred_experts)

    def slot_request(self, n_layers: int, n_experts: int) -> int | None:
        k = self.gpu_experts_per_layer
        return None if k is None else min(int(k), n_experts) * n_layers

    def initial_residency(self) -> list[tuple[int, int]]:
        c = self.ctx
        if self.gpu_experts_per_layer is None:
            return most_popular(c.profile, c.n_layers, c.n_experts, c.n_slots, c.seed)
        k, out = c.n_slots // c.n_layers, []
        for l in range(c.n_layers):
            row = None if c.profile is None else c.profile[l:l + 1]
            out += [(l, e) for _, e in most_popular(row, 1, c.n_experts, k, c.seed + l)]
        return out

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        return Placement(static_where(cache, layer, CPU))
