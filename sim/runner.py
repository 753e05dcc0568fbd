"""One simulated run from names and numbers: specs, memory plan, trace, schedule, policy, engine, row.

This is the boundary between configuration (strings, YAML) and the hot loop (plain dataclasses and
numpy arrays). The CLI (:mod:`sim.cli`) and the tests call :func:`run_one`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sim import config
from sim.cost_model import CostModel
from sim.engine import Engine
from sim.expert_cache import ExpertCache
from sim.memory_plan import plan_memory
from sim.policies import make_policy
from sim.policies.base import PolicyContext
from traces.errors import TraceError
from traces.io import load_trace
from traces.schema import Trace
from traces.windows import build_schedule

PROFILE_TOKENS = 1024
PROFILE_SEED_OFFSET = 7919


@dataclass
class RunResult:
    """A result row plus the engine (for timelines and inspection)."""

    row: dict
    engine: Engine


@lru_cache(maxsize=64)
def synthetic_trace(model: str, workload: str, tokens: int, seed: int) -> Trace:
    """The synthetic workload (memoised: every policy of a sweep sees the same trace)."""
    from traces.synth import synthesize

    return synthesize(model, workload, tokens, seed)


@lru_cache(maxsize=16)
def profile_counts(model: str, seed: int) -> np.ndarray:
    """Per-(layer, expert) popularity from a separate, mixed profiling set.

    Fiddler and kTransformers place experts from an offline profile over a generic calibration
    set, not over the request being served. We profile ``PROFILE_TOKENS`` tokens spread evenly over
    every workload preset, with seeds disjoint from the evaluated traces.
    """
    from traces.synth import list_workloads

    names = list_workloads()
    per = max(1, PROFILE_TOKENS // len(names))
    return sum(_counts(synthetic_trace(model, w, per, seed + PROFILE_SEED_OFFSET)) for w in names)


def workload_acceptance(workload: str) -> float:
    """The preset's per-token draft acceptance probability."""
    from traces.synth import workload_preset

    return float(workload_preset(workload)["acceptance"])


def _check_trace(trace: Trace, m: config.ModelSpec) -> None:
    for field, want in (("n_layers", m.n_layers), ("n_experts", m.n_experts), ("top_k", m.top_k)):
        if trace.meta[field] != want:
            raise TraceError(trace.path, f"meta.{field}",
                             f"is {trace.meta[field]} but model {m.name} has {want}; pass the matching model=")


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
    identity: dict


def resolve(policy: str = "llamacpp", workload: str | None = "gsm8k", cache_ratio: float = 0.17,
            hardware="rtx4090_pcie4", model="qwen3_30b_a3b", draft="qwen3_4b_fp8", gamma: int = 8,
            gen_tokens: int = 512, seed: int = 0, trace: str | Trace | None = None,
            acceptance: float | None = None, experiment: str = "adhoc", prompt_tokens: int = 256,
            context: int = 4096, policy_args: dict | None = None, overlap: bool | None = None,
            **_ignored) -> Resolved:
    """Specs, policy, gamma, draft, trace and acceptance of a run, and its identity, without simulating.

    A replayed trace supplies what is not given (``model=None``, ``workload=None``): its recorded
    ``model_spec`` or preset model name, its workload and its acceptance. A speculative policy with
    gamma > 0 needs a draft model (``draft=none`` is refused)."""
    from sim.identity import code_version, spec_record, trace_digest
    from sim.policies.registry import policy_preset
    from sim.user_input import UserInputError

    if isinstance(trace, str):
        trace = load_trace(trace)
    meta = trace.meta if trace is not None else {}
    model = model if model is not None else _trace_model(trace)
    workload = workload if workload is not None else str(meta.get("workload") or "gsm8k")
    hw, m = config.hardware(hardware), config.model(model)
    pol = make_policy(policy, **(policy_args or {}))
    if overlap is not None:
        pol.overlap = overlap
    g = int(gamma) if pol.speculative else 0
    d = config.draft(draft if g > 0 else "none")
    if g > 0 and d.params <= 0:
        raise UserInputError(f"draft={d.name}: policy {policy} is speculative (gamma={g}) and needs a draft "
                             "model; give one (e.g. draft=qwen3_4b_fp8) or gamma=0")
    if trace is not None:
        _check_trace(trace, m)
    plan = plan_memory(hw, m, d, cache_ratio, context)
    acc = None
    if g > 0:
        acc = acceptance if acceptance is not None else _acceptance(workload, meta, trace)
    params = {k: v for k, v in policy_preset(policy).items() if k not in ("_target_", "description")}
    params.update(policy_args or {})
    if overlap is not None:
        params["overlap"] = overlap
    ident = {"experiment": experiment, "policy": policy, "policy_params": params, "workload": workload,
             "acceptance": acc, "model_spec": spec_record(m), "draft_spec": spec_record(d),
             "hardware_spec": spec_record(hw), "cache_ratio": float(cache_ratio), "gamma": g,
             "gen_tokens_asked": int(gen_tokens), "prompt_tokens": int(prompt_tokens), "context": int(context),
             "seed": int(seed), "trace": trace.path if trace is not None and trace.path else
             ("memory" if trace is not None else "synthetic"),
             "trace_sha256": trace_digest(trace) if trace is not None else "", "code_version": code_version()}
    return Resolved(hw, m, d, pol, g, workload, acc, trace, plan, ident)


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


def _acceptance(workload: str, meta: dict, trace: Trace | None) -> float:
    """Per-token acceptance: the trace's recorded one, else the workload preset's."""
    if meta.get("acceptance") is not None:
        return float(meta["acceptance"])
    from traces.synth import list_workloads
    if workload in list_workloads():
        return workload_acceptance(workload)
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


def run_one(policy: str = "llamacpp", workload: str | None = "gsm8k", cache_ratio: float = 0.17,
            hardware="rtx4090_pcie4", model="qwen3_30b_a3b", draft="qwen3_4b_fp8", gamma: int = 8,
            gen_tokens: int = 512, seed: int = 0, trace: str | Trace | None = None,
            acceptance: float | None = None, experiment: str = "adhoc", prompt_tokens: int = 256,
            context: int = 4096, timeline: bool = False, policy_args: dict | None = None,
            overlap: bool | None = None) -> RunResult:
    """Simulate one (policy, workload, cache_ratio, machine) point; returns its result row.

    ``overlap=False`` makes any policy prefetch blocking (its transfers finish before the step
    goes on), the synchronous mode in which the real engine's decisions equal the simulator's.
    The row carries the run's identity (:func:`resolve`, :mod:`sim.identity`) and its ``run_id``."""
    from sim.identity import identity_columns

    wall = time.perf_counter()
    r = resolve(policy, workload, cache_ratio, hardware, model, draft, gamma, gen_tokens, seed, trace, acceptance,
                experiment, prompt_tokens, context, policy_args, overlap)
    hw, m, d, pol, g, trace, plan = r.hw, r.model, r.draft, r.policy, r.gamma, r.trace, r.plan
    if trace is None:
        trace = synthetic_trace(m.name, r.workload, gen_tokens + g + 1, seed)
    acc = r.acceptance if r.acceptance is not None else 0.0
    sched = build_schedule(trace, g, gen_tokens, acc, seed)
    cost = CostModel(hw, m, d, cpu_scale=getattr(pol, "cpu_efficiency_scale", 1.0), n_max=max(64, g + 1))
    ctx = PolicyContext(
        n_layers=m.n_layers, n_experts=m.n_experts, top_k=m.top_k, n_slots=plan.n_slots, gamma=g,
        costs=cost.cost_table(g, prompt_tokens + gen_tokens // 2), seed=seed,
        profile=_profile(pol, m.name, seed, trace),
        future_counts=sched.counts if pol.needs_future else None)
    cache = ExpertCache(m.n_layers, m.n_experts, plan.n_slots)
    pol.reset(ctx, cache)
    engine = Engine(cost, pol, cache, sched, ctx, context0=prompt_tokens, seed=seed, timeline=timeline)
    counters = engine.run()
    row = {"experiment": experiment, "policy": policy, "model": m.name, "draft": d.name, "hardware": hw.name,
           "workload": r.workload, "cache_ratio": float(cache_ratio), "gamma": g, "gen_tokens": int(counters.tokens),
           "seed": int(seed), "ttft_s": float("nan"), "mean_accepted": sched.mean_accepted,
           "n_slots": plan.n_slots, "source": "sim", "trace": trace.path or f"synthetic:{trace.meta.get('workload')}"}
    row.update(counters.row())
    row.update(pol.metrics())
    row.update({k: v for k, v in identity_columns(r.identity).items() if k not in row})
    row["sim_wall_s"] = time.perf_counter() - wall
    return RunResult(row, engine)


def _counts(trace: Trace) -> np.ndarray:
    L, E = trace.n_layers, trace.n_experts
    idx = (np.arange(L)[None, :, None] * E + trace.experts.astype(np.int64)).ravel()
    return np.bincount(idx, minlength=L * E).reshape(L, E).astype(float)


def _profile(policy, model: str, seed: int, trace: Trace) -> np.ndarray | None:
    """The offline profile for policies that use one (``needs_profile``); a replayed real trace is
    its own profile (an optimistic, in-distribution profile, stated in the run's row as ``trace``)."""
    if not getattr(policy, "needs_profile", False):
        return None
    if trace.meta["source"] == "synthetic":
        return profile_counts(model, seed)
    return _counts(trace)
