"""Prefill on the live executor through the simulator's copy-or-CPU rule (:mod:`sim.prefill.decision`).

With ``prefill=true`` the prompt's forward runs each MoE layer's experts as the rule decides, the
same pure object the simulator asks, with the same costs (:class:`sim.prefill.costs.PrefillCosts`
of the policy's cost model): copy the touched host experts to the device and compute every touched
expert there, or compute the host experts on the CPU tier while resident ones (the policy's startup
residency, in their slots) run on the device. The whole prompt is one micro-batch (the HF forward).
The decisions and tallies are kept (:class:`RealPrefill`) with the prompt's routing, so
:func:`sim.prefill.phase.simulate_prefill` can be run on the same routing and compared;
``ttft_s`` is measured by the decoder as before. Without ``prefill=true`` the prompt bypasses the
policy as before (:func:`real.offload.layer.bypass`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from real.offload.expert_math import LayerRouting, expert_forward


@dataclass
class RealPrefill:
    """The rule, its costs, and what the prompt's forward did per MoE layer."""

    rule: object
    costs: object
    copied: list = field(default_factory=list)    # per MoE layer: True = copied to the device
    routing: list = field(default_factory=list)   # per MoE layer: the prompt's top-k ids [P, k]
    last_copied: dict = field(default_factory=dict)   # layer -> (host experts copied, their tokens)
    copies: int = 0
    gpu_execs: int = 0
    cpu_execs: int = 0

    def experts(self) -> np.ndarray:
        """The prompt's routing as a trace array ``[P, L, k]`` (int16)."""
        return np.stack(self.routing, axis=1).astype(np.int16)


def build(policy, opts, hardware: dict, model: dict, draft: dict, prompt_tokens: int) -> RealPrefill:
    """The rule and costs of a live run, from the policy's cost model as the simulator builds it."""
    from sim.machine import specs as config
    from sim.policies.registry import policy_runtime
    from sim.prefill.costs import PrefillCosts
    from sim.prefill.decision import make_rule
    from sim.protocol import policy_cost_model

    hw, m = config.hardware(hardware, default_runtime=policy_runtime(policy.name)), config.model(model)
    cost = policy_cost_model(policy, hw, m, config.draft("none"), 0)
    rule = make_rule(opts.prefill_rule, opts.policy, m.n_experts, m.top_k, opts.prefill_threshold)
    return RealPrefill(rule, PrefillCosts.build(cost, max(1, prompt_tokens)))


def prefill_layer(ex, pf: RealPrefill, layer: int, hidden: torch.Tensor, top_k_index: torch.Tensor,
                  top_k_weights: torch.Tensor) -> torch.Tensor:
    """MoE layer ``layer`` of the prompt's forward, placed by ``pf.rule``."""
    index = top_k_index.detach().to("cpu").numpy()
    pf.routing.append(index)
    counts = np.bincount(index.ravel(), minlength=ex.host.n_experts).astype(np.int64)
    touched = np.flatnonzero(counts)
    on_slot = ex.cache.resident[layer, touched]
    host, resident = touched[~on_slot], touched[on_slot]
    copy = bool(pf.rule.copy(int(hidden.shape[0]), counts[host], counts[resident], pf.costs)) if host.size else True
    pf.copied.append(copy)
    routing = LayerRouting(top_k_index, ex.host.n_experts)
    routing.to_device(hidden.device)
    act, outs = ex.acts[layer], {}
    for e in resident.tolist():
        pos, tok = routing.rows(e)
        gate_up, down = ex.pool.buffers(("slot", ex.pool.slot((layer, e))))
        outs[e] = expert_forward(hidden[tok], gate_up, down, act, top_k_weights[tok, pos])
    if copy:
        for e in host.tolist():
            gate_up, down = (t.to(hidden.device, non_blocking=True) for t in ex.host.expert(layer, e))
            pos, tok = routing.rows(e)
            outs[e] = expert_forward(hidden[tok], gate_up, down, act, top_k_weights[tok, pos])
        pf.copies += int(host.size)
        pf.gpu_execs += int(touched.size)
        if host.size:                  # what the decode's cache receives (sim.prefill.handoff)
            pf.last_copied[layer] = (host, counts[host])
    else:
        host_in = (hidden.to("cpu"), top_k_weights.to("cpu"))
        futures = []
        for e in host.tolist():
            pos, tok = routing.host_rows(e)
            gate_up, down = ex.host.expert(layer, e)
            futures.append(ex.cpu.submit(e, host_in, (tok, pos), gate_up, down, act))
        for e, out, _ in (f.result() for f in futures):
            outs[e] = out.to(hidden.device)
        pf.gpu_execs += int(resident.size)
        pf.cpu_execs += int(host.size)
    return routing.combine(outs, hidden)


def columns(pf: RealPrefill | None) -> dict:
    """The real row's prefill columns (as the simulator's where they exist)."""
    if pf is None:
        return {"prefill_rule": "", "prefill_copy_share": float("nan")}
    return {"prefill_rule": pf.rule.name, "prefill_copy_share": float(np.mean(pf.copied)) if pf.copied else float("nan"),
            "prefill_copies": pf.copies, "prefill_cpu_execs": pf.cpu_execs}
