"""A run's inputs resolved, without simulating: specs, policy, gamma, draft, trace, acceptance, memory
plan, and the run's identity (:mod:`sim.identity`). :func:`sim.runner.run_one` simulates what this
returns; a sweep resolves every point first, so a bad one fails before any run.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from sim import config
from sim.memory_plan import plan_memory
from sim.policies import make_policy
from sim.policies.registry import policy_runtime
from sim.runner import _check_trace, spec
from sim.vram import EngineOptions
from traces.errors import TraceError
from traces.io import load_trace
from traces.schema import Trace


@dataclass
class Resolved:
    """A run's inputs resolved to specs, objects and numbers, and its identity (:mod:`sim.identity`)."""

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
    serving: object = None     # sim.serving.ServingOptions


def resolve(policy: str = "llamacpp", workload: str | None = "gsm8k", cache_ratio: float = 0.17,
            hardware="rtx4090_pcie4", model="qwen3_30b_a3b", draft="qwen3_4b_fp8", gamma: int = 8,
            gen_tokens: int = 512, seed: int = 0, trace: str | Trace | None = None,
            acceptance: float | None = None, experiment: str = "adhoc", prompt_tokens: int = 256,
            context: int = 4096, policy_args: dict | None = None, overlap: bool | None = None,
            runtime=None, quant: str | None = None, quant_dense: str | None = None,
            slots_per_layer: int | None = None, vram_budget_gib: float | None = None, prefill: bool = False,
            ubatch: int = 512, prefill_rule: str = "auto", prefill_threshold: int = 1024, batch: int = 1,
            stagger: int = 0, equal_vram: bool = False, acceptance_model: dict | None = None,
            cache_type_k: str = "f16", cache_type_v: str = "f16", flash_attn: bool = True, **_ignored) -> Resolved:
    """Specs, policy, gamma, draft, trace and acceptance of a run, and its identity, without simulating.

    A replayed trace supplies what is not given (``model=None``, ``workload=None``): its recorded
    ``model_spec`` or preset model name, its workload and its acceptance. A speculative policy with
    gamma > 0 needs a drafter (``draft=none`` is refused). A policy that chooses its draft length per
    step runs with its largest (:meth:`sim.policies.base.Policy.run_gamma`). ``equal_vram`` gives an
    autoregressive run the VRAM the draft would use as expert slots; ``acceptance_model`` shapes the
    acceptance (:mod:`sim.speculation`); ``cache_type_k`` / ``cache_type_v`` / ``flash_attn`` size
    llama.cpp's KV cache and compute buffer (:mod:`sim.vram`)."""
    from sim.speculation.fair import equal_vram_slots
    from sim.identity import code_version, spec_record, trace_digest
    from sim.policies.registry import policy_preset
    from sim.user_input import UserInputError

    if isinstance(trace, str):
        trace = load_trace(trace)
    meta = trace.meta if trace is not None else {}
    model = model if model is not None else _trace_model(trace)
    workload = workload if workload is not None else str(meta.get("workload") or "gsm8k")
    m = config.model(model, quant, quant_dense)
    pol = make_policy(policy, **(policy_args or {}))
    hw = config.hardware(hardware, runtime=runtime, default_runtime=policy_runtime(policy))
    if overlap is not None:
        pol.overlap = overlap
    g = pol.run_gamma(int(gamma))
    d = spec("draft", draft if g > 0 else "none")
    if g > 0 and d.params <= 0 and d.kind == "model":
        raise UserInputError(f"draft={d.name}: policy {policy} is speculative (gamma={g}) and needs a draft "
                             "model; give one (e.g. draft=qwen3_4b_fp8) or gamma=0")
    if trace is not None:
        _check_trace(trace, m)
    slots = pol.slot_request(m.n_layers, m.n_experts)
    if slots is None and slots_per_layer is not None:
        slots = int(slots_per_layer) * m.n_layers
    engine = EngineOptions(cache_type_k, cache_type_v, int(ubatch), bool(flash_attn))
    plan = plan_memory(hw, m, d, cache_ratio, context, n_slots=slots, vram_budget_gib=vram_budget_gib,
                       cpu_layers=pol.cpu_layer_count(m.n_layers), engine=engine)
    if slots is not None:
        cache_ratio = plan.n_slots / (m.n_layers * m.n_experts)
    if equal_vram and g == 0:
        plan = replace(plan, n_slots=equal_vram_slots(hw, m, spec("draft", draft), cache_ratio, context))
    acc = None
    if g > 0:
        acc = acceptance if acceptance is not None else _acceptance(workload, meta, trace, d)
    params = {k: v for k, v in policy_preset(policy).items() if k not in ("_target_", "description")}
    params.update(policy_args or {})
    if overlap is not None:
        params["overlap"] = overlap
    ident = {"experiment": experiment, "policy": policy, "policy_params": params, "workload": workload,
             "acceptance": acc, "model_spec": spec_record(m), "draft_spec": spec_record(d),
             "hardware_spec": spec_record(hw), "cache_ratio": float(cache_ratio), "gamma": g,
             "gen_tokens_asked": int(gen_tokens), "prompt_tokens": int(prompt_tokens), "context": int(context),
             "seed": int(seed), "slots_per_layer": slots_per_layer, "vram_budget_gib": vram_budget_gib,
             "equal_vram": bool(equal_vram and g == 0), "acceptance_model": dict(acceptance_model or {}), "trace": trace.path if trace is not None and trace.path else
             ("memory" if trace is not None else "synthetic"),
             "trace_sha256": trace_digest(trace) if trace is not None else "", "code_version": code_version()}
    from sim import serving
    opts = serving.ServingOptions(bool(prefill), int(ubatch), str(prefill_rule), int(prefill_threshold), int(batch),
                                  int(stagger))
    serving.check(opts, trace is not None, policy, pol.adaptive_gamma, int(prompt_tokens))
    ident.update(serving.identity_keys(opts))
    if engine != EngineOptions(ubatch=engine.ubatch):    # set only when changed: earlier run ids stay
        ident["engine_memory"] = {"cache_type_k": cache_type_k, "cache_type_v": cache_type_v,
                                  "flash_attn": bool(flash_attn)}
    return Resolved(hw, m, d, pol, g, workload, acc, trace, plan, float(cache_ratio), ident, opts)


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
