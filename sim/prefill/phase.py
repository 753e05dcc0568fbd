"""The prefill executor: the prompt's micro-batches, layer by layer, each layer's copy-or-CPU choice timed.

It owns the clock (the policy rule decides, :mod:`sim.prefill.decision`; the costs come from
:mod:`sim.prefill.costs`). Per micro-batch: the forward's head (embeddings, dense layers, host
overhead; lm_head for the last one), then per MoE layer: attention and router on the GPU; then,
if the rule copies, the touched host experts cross PCIe one after another and every touched expert
runs on the GPU after them (llama.cpp's copy and kernels share one stream: no overlap); otherwise
the resident experts run on the GPU while the host experts run on the CPU, joined at the layer's
end. Experts in VRAM during prefill are the decode's startup residency (copies go to a scratch
buffer, as llama.cpp's op offload does). Layers and micro-batches are serial (data dependencies).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.prefill.costs import PrefillCosts
from sim.prefill.routing import ubatch_bounds, ubatch_counts


@dataclass
class PrefillResult:
    """What a simulated prefill took and left: times, per-(micro-batch, layer) choices, tallies."""

    ttft_s: float = 0.0
    tokens: int = 0
    rule: str = ""
    ubatch_s: list = field(default_factory=list)
    copied_layers: list = field(default_factory=list)   # per micro-batch: bool [L], True = copied
    copies: int = 0              # expert copies over PCIe
    gpu_execs: int = 0           # (micro-batch, layer, expert) computed on the GPU
    cpu_execs: int = 0           # ... on the CPU
    host_touched: int = 0        # ... touched experts that were in host memory
    pcie_bytes: float = 0.0
    pcie_busy_s: float = 0.0
    gpu_busy_s: float = 0.0
    cpu_busy_s: float = 0.0
    last_copied: dict = field(default_factory=dict)     # layer -> (experts, tokens) of its last copy
    request_ttft_s: list = field(default_factory=list)  # several prompts: each one's first token
    events: list | None = None

    @property
    def tok_s(self) -> float:
        """Prompt tokens per second of prefill."""
        return self.tokens / self.ttft_s if self.ttft_s > 0 else float("nan")

    @property
    def copy_share(self) -> float:
        """Fraction of (micro-batch, layer) choices that copied."""
        flat = np.concatenate(self.copied_layers) if self.copied_layers else np.zeros(0)
        return float(flat.mean()) if flat.size else float("nan")


def simulate_prefill(costs: PrefillCosts, rule, experts: np.ndarray, resident: np.ndarray,
                     timeline: bool = False) -> PrefillResult:
    """Time the prefill of the prompt routed as ``experts`` (``[P, L, k]``) with ``resident`` (bool
    ``[L, E]``) experts in VRAM, in micro-batches of ``costs.ubatch`` tokens, choosing by ``rule``."""
    P, L = experts.shape[0], experts.shape[1]
    res = PrefillResult(tokens=P, rule=rule.name, events=[] if timeline else None)
    t, bounds = 0.0, ubatch_bounds(P, costs.ubatch)
    for u, (start, end) in enumerate(bounds):
        t0, n = t, end - start
        counts = ubatch_counts(experts, start, end, resident.shape[1])
        head = costs.head_s(n, last=u == len(bounds) - 1)
        t = _busy(res, "GPU", f"U{u} head", t, head)
        res.gpu_busy_s += head
        choices = np.zeros(L, dtype=bool)
        for layer in range(L):
            t, choices[layer] = _layer(res, costs, rule, (u, layer, n, start), (counts[layer], resident[layer]), t)
        res.copied_layers.append(choices)
        res.ubatch_s.append(t - t0)
    res.ttft_s = t
    res.pcie_bytes = res.copies * costs.cost.expert_bytes
    return res


def _layer(res: PrefillResult, costs: PrefillCosts, rule, where: tuple, routing: tuple, t: float) -> tuple[float, bool]:
    """One MoE layer of micro-batch ``u`` from time ``t``: attention, then the touched experts copied
    or computed on the CPU by ``rule``; ``where`` is ``(u, layer, tokens, tokens cached before)``,
    ``routing`` the layer's ``(tokens per expert, resident mask)``. Returns (end time, copied)."""
    (u, layer, n, cached), (counts, resident) = where, routing
    attn = costs.attention_s(n, cached)
    t = _busy(res, "GPU", f"U{u} L{layer} attn", t, attn)
    res.gpu_busy_s += attn
    touched = np.flatnonzero(counts)
    host = touched[~resident[touched]]
    host_n, res_n = counts[host], counts[touched[resident[touched]]]
    copy = bool(rule.copy(n, host_n, res_n, costs)) if host.size else True
    res.host_touched += int(host.size)
    if copy:
        link, gpu = costs.copy_choice_s(host_n, res_n)
        t1 = _busy(res, "PCIe", f"U{u} L{layer} copy x{host.size}", t, link)
        end = _busy(res, "GPU", f"U{u} L{layer} experts", t1, gpu)
        res.copies += int(host.size)
        res.pcie_busy_s += link
        res.gpu_busy_s += gpu
        res.gpu_execs += int(touched.size)
        if host.size:
            res.last_copied[layer] = (host, host_n)
        return end, True
    gpu, cpu = costs.cpu_choice_s(host_n, res_n)
    g_end = _busy(res, "GPU", f"U{u} L{layer} experts", t, gpu)
    c_end = _busy(res, "CPU", f"U{u} L{layer} experts", t, cpu)
    res.gpu_busy_s += gpu
    res.cpu_busy_s += cpu
    res.gpu_execs += int(res_n.size)
    res.cpu_execs += int(host.size)
    return max(g_end, c_end) + costs.sync_s(), False


def _busy(res: PrefillResult, lane: str, label: str, start: float, dur: float) -> float:
    """Mark ``lane`` busy for ``dur`` from ``start``; returns the end."""
    if res.events is not None and dur > 0:
        res.events.append((lane, label, start, start + dur))
    return start + dur
