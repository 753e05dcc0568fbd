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
from sim.memory_plan import MemoryPlan, plan_memory
from sim.policies import make_policy
from sim.policies.registry import policy_runtime
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
    plan: MemoryPlan | None = None


@lru_cache(maxsize=64)
def synthetic_trace(model: str, workload: str, tokens: int, seed: int, shape: tuple | None = None) -> Trace:
    """The synthetic workload (memoised: every policy of a sweep sees the same trace); ``shape``
    (layers, experts, top_k, dense layers, shared) gives models without a calibrated class an
    assumed routing profile."""
    from traces.synth import synthesize

    return synthesize(model, workload, tokens, seed, shape)


def routing_shape(m: config.ModelSpec) -> tuple:
    """The routing shape of a model spec, for :func:`synthetic_trace`."""
    return (m.n_layers, m.n_experts, m.top_k, tuple(range(m.n_dense_layers)), m.n_shared_experts)


@lru_cache(maxsize=16)
def profile_counts(model: str, seed: int, shape: tuple | None = None) -> np.ndarray:
    """Per-(layer, expert) popularity from a separate, mixed profiling set.

    Fiddler and kTransformers place experts from an offline profile over a generic calibration
    set, not over the request being served. We profile ``PROFILE_TOKENS`` tokens spread evenly over
    every workload preset, with seeds disjoint from the evaluated traces.
    """
    from traces.synth import list_workloads

    names = list_workloads()
    per = max(1, PROFILE_TOKENS // len(names))
    return sum(_counts(synthetic_trace(model, w, per, seed + PROFILE_SEED_OFFSET, shape)) for w in names)


def workload_acceptance(workload: str) -> float:
    """The preset's per-token draft acceptance probability."""
    from traces.synth import workload_preset

    return float(workload_preset(workload)["acceptance"])


def _check_trace(trace: Trace, m: config.ModelSpec) -> None:
    for field, want in (("n_layers", m.n_layers), ("n_experts", m.n_experts), ("top_k", m.top_k)):
        if trace.meta[field] != want:
            raise TraceError(trace.path, f"meta.{field}",
                             f"is {trace.meta[field]} but model {m.name} has {want}; pass the matching model=")


def run_one(policy: str = "llamacpp", workload: str = "gsm8k", cache_ratio: float = 0.17,
            hardware="rtx4090_pcie4", model="qwen3_30b_a3b", draft="qwen3_4b_fp8", gamma: int = 8,
            gen_tokens: int = 512, seed: int = 0, trace: str | Trace | None = None,
            acceptance: float | None = None, experiment: str = "adhoc", prompt_tokens: int = 256,
            context: int = 4096, timeline: bool = False, policy_args: dict | None = None,
            overlap: bool | None = None, runtime=None, quant: str | None = None,
            quant_dense: str | None = None, slots_per_layer: int | None = None,
            vram_budget_gib: float | None = None, acceptance_model: dict | None = None,
            equal_vram: bool = False) -> RunResult:
    """Simulate one (policy, workload, cache_ratio, machine) point; returns its result row.

    ``runtime`` (a conf/runtime name or mapping; None: the policy preset's) supplies the
    efficiencies; ``quant`` / ``quant_dense`` the weight formats; ``slots_per_layer`` or a policy
    knob (``n_cpu_moe``, ``gpu_experts_per_layer``) replace ``cache_ratio``; ``vram_budget_gib``
    caps the VRAM. ``overlap=False`` makes any policy prefetch blocking (its transfers finish
    before the step goes on), the synchronous mode in which the real engine's decisions equal the
    simulator's. ``acceptance_model`` (decay, spread, burst, p_min, kappa: :mod:`traces.acceptance`)
    and ``equal_vram`` (an AR policy gets the draft's VRAM as slots): :mod:`sim.speculation.fair`."""
    from sim.speculation.fair import acceptance_model as acc_model
    from sim.speculation.fair import equal_vram_slots, run_acceptance
    from traces.online import OnlineSchedule, model_schedule

    wall = time.perf_counter()
    m = config.model(model, quant, quant_dense)
    pol = make_policy(policy, **(policy_args or {}))
    hw = config.hardware(hardware, runtime=runtime, default_runtime=policy_runtime(policy))
    if overlap is not None:
        pol.overlap = overlap
    g = (int(pol.gamma_max) if pol.adaptive_gamma else int(gamma)) if pol.speculative else 0
    sd_draft = config.draft(draft)
    d = sd_draft if g > 0 else config.draft("none")
    slots = pol.slot_request(m.n_layers, m.n_experts)
    if slots is None and slots_per_layer is not None:
        slots = int(slots_per_layer) * m.n_layers
    plan = plan_memory(hw, m, d, cache_ratio, context, n_slots=slots, vram_budget_gib=vram_budget_gib)
    if slots is not None:
        cache_ratio = plan.n_slots / (m.n_layers * m.n_experts)
    n_slots = equal_vram_slots(hw, m, sd_draft, cache_ratio, context) if equal_vram and g == 0 else plan.n_slots
    if isinstance(trace, str):
        trace = load_trace(trace)
    if trace is None:
        trace = synthetic_trace(m.name, workload, gen_tokens + g + 1, seed, routing_shape(m))
    _check_trace(trace, m)
    acc = run_acceptance(workload, sd_draft, acceptance)
    model_acc = acc_model(acc, sd_draft, acceptance_model)
    recorded = trace.sd is not None and trace.sd.gamma == g
    if pol.adaptive_gamma and g > 0 and not recorded:
        from traces.acceptance import AcceptanceModel
        sched = OnlineSchedule(trace, gen_tokens, model_acc or AcceptanceModel(acc), seed, g)
    elif model_acc is not None and g > 0 and not recorded:
        sched = model_schedule(trace, g, gen_tokens, model_acc, seed)
    else:
        sched = build_schedule(trace, g, gen_tokens, acc, seed)
    cost = CostModel(hw, m, d, cpu_scale=getattr(pol, "cpu_efficiency_scale", 1.0), n_max=max(64, g + 1))
    ctx = PolicyContext(
        n_layers=m.n_layers, n_experts=m.n_experts, top_k=m.top_k, n_slots=n_slots, gamma=g,
        costs=cost.cost_table(g, prompt_tokens + gen_tokens // 2), seed=seed,
        profile=_profile(pol, m, seed, trace),
        future_counts=sched.counts if pol.needs_future else None)
    cache = ExpertCache(m.n_layers, m.n_experts, n_slots)
    pol.reset(ctx, cache)
    engine = Engine(cost, pol, cache, sched, ctx, context0=prompt_tokens, seed=seed, timeline=timeline)
    counters = engine.run()
    row = {"experiment": experiment, "policy": policy, "model": m.name, "draft": d.name, "hardware": hw.name,
           "workload": workload, "cache_ratio": float(cache_ratio), "gamma": g, "gen_tokens": int(counters.tokens),
           "seed": int(seed), "ttft_s": float("nan"), "mean_accepted": sched.mean_accepted,
           "n_slots": n_slots, "runtime": hw.runtime, "quant": m.expert_quant,
           "quant_dense": m.dense_quant, "source": "sim", "trace": trace.path or f"synthetic:{trace.meta.get('workload')}",
           "acceptance": acc, "equal_vram": bool(equal_vram and g == 0),
           "acceptance_model": repr(sorted((acceptance_model or {}).items()))}
    row.update(counters.row())
    row.update(pol.metrics())
    row["sim_wall_s"] = time.perf_counter() - wall
    return RunResult(row, engine, plan)


def _counts(trace: Trace) -> np.ndarray:
    L, E = trace.n_layers, trace.n_experts
    idx = (np.arange(L)[None, :, None] * E + trace.experts.astype(np.int64)).ravel()
    return np.bincount(idx, minlength=L * E).reshape(L, E).astype(float)


def _profile(policy, m: config.ModelSpec, seed: int, trace: Trace) -> np.ndarray | None:
    """The offline profile for policies that use one (``needs_profile``); a replayed real trace is
    its own profile (an optimistic, in-distribution profile, stated in the run's row as ``trace``)."""
    if not getattr(policy, "needs_profile", False):
        return None
    if trace.meta["source"] == "synthetic":
        return profile_counts(m.name, seed, routing_shape(m))
    return _counts(trace)
