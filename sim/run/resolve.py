"""A run's inputs resolved, without simulating: specs, policy, gamma, draft, trace, acceptance, memory
plan, and the run's identity (:mod:`sim.run.identity`). :func:`sim.run.runner.run_one` simulates what this
returns; a sweep resolves every point first, so a bad one fails before any run.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from sim.machine import specs as config
from sim.machine.memory_plan import plan_memory
from sim.machine.vram import MemoryOptions
from sim.policies import make_policy
from sim.policies.registry import policy_runtime
from sim.protocol import policy_cost_model
from sim.run import requests
from sim.run.spec import RECORDED, RunSpec
from sim.run.workload import check_trace, preset_spec
from traces.errors import TraceError
from traces.io import load_trace
from traces.schema import Trace
from sim.machine.memory_plan import PlanOptions


@dataclass
class Resolved:
    """A run's inputs resolved to specs, objects and numbers, and its identity (:mod:`sim.run.identity`)."""

    hw: config.HardwareSpec
    model: config.ModelSpec
    draft: config.DraftSpec
    policy: object
    gamma: int
    workload: str
    acceptance: float | None
    trace: Trace | None
    plan: object
    cache_ratio: float
    identity: dict


def resolve(spec: RunSpec) -> Resolved:
    """Specs, policy, gamma, draft, trace and acceptance of a run, and its identity, without simulating.

    A replayed trace supplies what is not given (``model=None``, ``workload=None``): its recorded
    ``model_spec`` or preset model name, its workload and its acceptance. A speculative policy with
    gamma > 0 needs a drafter (``draft=none`` is refused). A policy that chooses its draft length per
    step runs with its largest (:meth:`sim.policies.base.Policy.run_gamma`). ``equal_vram`` gives an
    autoregressive run the VRAM the draft would use as expert slots; ``acceptance_model`` shapes the
    acceptance (:mod:`sim.speculation`)."""
    from sim.speculation.fair import equal_vram_slots
    from sim.run.user_input import UserInputError

    w, mem, sp = spec.workload, spec.memory, spec.draft
    trace = load_trace(w.trace) if isinstance(w.trace, str) else w.trace
    meta = trace.meta if trace is not None else {}
    model = spec.model.model if spec.model.model is not None else _trace_model(trace)
    workload = w.workload if w.workload is not None else str(meta.get("workload") or "gsm8k")
    m = config.model(model, spec.model.quant, spec.model.quant_dense)
    name = spec.policy.policy
    pol = make_policy(name, **(spec.policy.policy_args or {}))
    hw = config.hardware(spec.machine.hardware, runtime=spec.machine.runtime, default_runtime=policy_runtime(name))
    if spec.policy.overlap is not None:
        pol.overlap = spec.policy.overlap
    g = pol.run_gamma(int(sp.gamma))
    d = preset_spec("draft", sp.draft if g > 0 else "none")
    if g > 0 and d.params <= 0 and d.kind == "model":
        raise UserInputError(f"draft={d.name}: policy {name} is speculative (gamma={g}) and needs a draft "
                             "model; give one (e.g. draft=qwen3_4b_fp8) or gamma=0")
    if trace is not None:
        check_trace(trace, m)
    slots = pol.slot_request(m.n_layers, m.n_experts)
    if slots is None and mem.slots_per_layer is not None:
        slots = int(mem.slots_per_layer) * m.n_layers
    engine = MemoryOptions(mem.cache_type_k, mem.cache_type_v, int(spec.serving.ubatch), bool(mem.flash_attn),
                           swa_full=bool(mem.swa_full), unified_memory=bool(mem.unified_memory), op_offload=bool(mem.op_offload))
    plan = plan_memory(hw, m, d, mem.cache_ratio, mem.context, opts=PlanOptions(n_slots=slots, vram_budget_gib=mem.vram_budget_gib,
                       cpu_layers=pol.cpu_layer_count(m.n_layers), engine=engine))
    cache_ratio = plan.n_slots / (m.n_layers * m.n_experts) if slots is not None else mem.cache_ratio
    if mem.equal_vram and g == 0:
        plan = replace(plan, n_slots=equal_vram_slots(hw, m, preset_spec("draft", sp.draft), cache_ratio, mem.context))
    acc = None
    if g > 0:
        acc = sp.acceptance if sp.acceptance is not None else _acceptance(workload, meta, trace, d)
    requests.check(spec.serving, trace is not None, name, pol.adaptive_gamma, int(w.prompt_tokens))
    parts = Resolved(hw, m, d, pol, g, workload, acc, trace, plan, float(cache_ratio), {})
    parts.identity = identity_of(spec, parts)
    return parts


def run_cost_model(r: Resolved):
    """The cost model of a resolved run, the one both executors use (:func:`sim.run.runner.run_one`
    and :func:`real.offload.context.policy_context`): the policy's, with the plan's slots, so a
    forward with every expert on the GPU and nothing on the CPU (no layer, no output layer: llama.cpp
    ``-ngl N`` with N at most the layer count splits the graph) runs as one CUDA graph."""
    return policy_cost_model(r.policy, r.hw, r.model, r.draft, r.gamma, r.plan.n_slots)


def identity_of(spec: RunSpec, r: Resolved) -> dict:
    """The run's identity, derived from every field of ``spec``: the fields above as their resolved
    records (specs, policy parameters, trace digest), the core keys always, and any other field
    under its own name when it differs from its default (so a default run keeps its ``run_id``; the
    prefill's own knobs count only with ``prefill=true``)."""
    from sim.policies.registry import preset_params
    from sim.run.identity import code_version, spec_record, trace_digest

    flat, name = spec.flat(), spec.policy.policy
    params = preset_params(name)
    params.update(spec.policy.policy_args or {})
    if spec.policy.overlap is not None:
        params["overlap"] = spec.policy.overlap
    trace = r.trace
    ident = {"experiment": spec.run.experiment, "policy": name, "policy_params": params, "workload": r.workload,
             "acceptance": r.acceptance, "model_spec": spec_record(r.model), "draft_spec": spec_record(r.draft),
             "hardware_spec": spec_record(r.hw), "cache_ratio": r.cache_ratio, "gamma": r.gamma,
             "gen_tokens_asked": int(spec.run.gen_tokens), "prompt_tokens": int(spec.workload.prompt_tokens),
             "context": int(spec.memory.context), "seed": int(spec.run.seed),
             "slots_per_layer": spec.memory.slots_per_layer, "vram_budget_gib": spec.memory.vram_budget_gib,
             "equal_vram": bool(spec.memory.equal_vram and r.gamma == 0),
             "acceptance_model": dict(spec.draft.acceptance_model or {}),
             "trace": trace.path if trace is not None and trace.path else ("memory" if trace is not None else "synthetic"),
             "trace_sha256": trace_digest(trace) if trace is not None else "", "code_version": code_version()}
    defaults, skipped = RunSpec().flat(), requests.identity_skipped(spec.serving)
    for key, value in flat.items():
        if key not in ident and key not in RECORDED and key not in skipped and value != defaults[key]:
            ident[key] = value
    return ident



def _trace_model(trace: Trace | None):
    """The model of a replayed trace: its recorded spec, else its preset name, else the default."""
    if trace is None:
        return "qwen3_30b_a3b"
    meta = trace.meta
    if isinstance(meta.get("model_spec"), dict):
        return dict(meta["model_spec"])
    from sim.paths import preset_names
    if meta.get("model") in preset_names("model"):
        return meta["model"]
    raise TraceError(trace.path, "meta.model", f"{meta.get('model')!r} is not a model preset and the trace "
                                               "records no model_spec; pass model=")


def _acceptance(workload: str, meta: dict, trace: Trace | None, draft: config.DraftSpec) -> float:
    """Per-token acceptance: the trace's recorded one, else the draft preset's for the workload, else
    the workload preset's (:func:`sim.speculation.fair.run_acceptance`)."""
    if meta.get("acceptance") is not None:
        return float(meta["acceptance"])
    from sim.speculation.fair import run_acceptance
    from traces.synth import list_workloads
    if workload in list_workloads() or workload in (draft.acceptance or {}):
        return run_acceptance(workload, draft, None)
    if trace is not None and trace.sd is not None:
        return record_acceptance(trace)
    raise TraceError(trace.path if trace is not None else "run", "acceptance",
                     f"workload {workload!r} is not a preset and the trace records no acceptance; pass acceptance=")


def record_acceptance(trace: Trace) -> float:
    """Per-token acceptance measured by a trace's SD record: accepted drafts / (accepted + rejections),
    the maximum-likelihood rate of the geometric-truncated acceptance model (used when the replay's
    gamma differs from the record's; with the same gamma the record itself is replayed)."""
    sd = trace.sd
    accepted = int(np.sum(sd.accepted))
    rejections = int(np.sum(sd.accepted < sd.n_verified - 1))
    return accepted / (accepted + rejections) if accepted + rejections else 0.0
