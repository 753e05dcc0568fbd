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
from traces.windows import Schedule, build_schedule

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


@lru_cache(maxsize=64)
def _preset_spec(kind: str, name: str):
    return getattr(config, kind)(name)


def spec(kind: str, name_or_cfg):
    """``config.hardware|model|draft`` of a preset name (memoised: the specs are frozen) or of a
    mapping (built each time)."""
    if isinstance(name_or_cfg, str):
        return _preset_spec(kind, name_or_cfg)
    return getattr(config, kind)(name_or_cfg)


@lru_cache(maxsize=64)
def _synthetic_schedule(model: str, workload: str, tokens: int, seed: int, shape: tuple | None,
                        gamma: int, gen_tokens: int, acceptance: float) -> Schedule:
    trace = synthetic_trace(model, workload, tokens, seed, shape)
    sched = build_schedule(trace, gamma, gen_tokens, acceptance, seed)
    for a in (sched.counts, sched.n_verify, sched.produced, *sched.rows):
        a.flags.writeable = False          # shared by every run of the point: nobody may change it
    return sched


def schedule(trace: Trace, synthetic_key: tuple | None, gamma: int, gen_tokens: int, acceptance: float,
             seed: int) -> Schedule:
    """The decode steps of a run; memoised (read-only) for synthetic traces, whose key
    ``(model, workload, tokens, seed, shape)`` names them exactly."""
    if synthetic_key is None:
        return build_schedule(trace, gamma, gen_tokens, acceptance, seed)
    return _synthetic_schedule(*synthetic_key, gamma, gen_tokens, float(acceptance))


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
            vram_budget_gib: float | None = None) -> RunResult:
    """Simulate one (policy, workload, cache_ratio, machine) point; returns its result row.

    ``runtime`` (a conf/runtime name or mapping; None: the policy preset's) supplies the
    efficiencies; ``quant`` / ``quant_dense`` the weight formats; ``slots_per_layer`` or a policy
    knob (``n_cpu_moe``, ``gpu_experts_per_layer``) replace ``cache_ratio``; ``vram_budget_gib``
    caps the VRAM. ``overlap=False`` makes any policy prefetch blocking (its transfers finish
    before the step goes on), the synchronous mode in which the real engine's decisions equal the
    simulator's."""
    wall = time.perf_counter()
    m = config.model(model, quant, quant_dense)
    pol = make_policy(policy, **(policy_args or {}))
    hw = config.hardware(hardware, runtime=runtime, default_runtime=policy_runtime(policy))
    if overlap is not None:
        pol.overlap = overlap
    g = int(gamma) if pol.speculative else 0
    d = spec("draft", draft if g > 0 else "none")
    slots = pol.slot_request(m.n_layers, m.n_experts)
    if slots is None and slots_per_layer is not None:
        slots = int(slots_per_layer) * m.n_layers
    plan = plan_memory(hw, m, d, cache_ratio, context, n_slots=slots, vram_budget_gib=vram_budget_gib,
                       cpu_layers=pol.cpu_layer_count(m.n_layers))
    if slots is not None:
        cache_ratio = plan.n_slots / (m.n_layers * m.n_experts)
    if isinstance(trace, str):
        trace = load_trace(trace)
    key = None
    if trace is None:
        key = (m.name, workload, gen_tokens + g + 1, seed, routing_shape(m))
        trace = synthetic_trace(*key)
    _check_trace(trace, m)
    acc = acceptance if acceptance is not None else workload_acceptance(workload)
    sched = schedule(trace, key, g, gen_tokens, acc, seed)
    cost = CostModel(hw, m, d, cpu_scale=getattr(pol, "cpu_efficiency_scale", 1.0), n_max=max(64, g + 1))
    ctx = PolicyContext(
        n_layers=m.n_layers, n_experts=m.n_experts, top_k=m.top_k, n_slots=plan.n_slots, gamma=g,
        costs=cost.cost_table(g, prompt_tokens + gen_tokens // 2), seed=seed,
        profile=_profile(pol, m, seed, trace),
        future_counts=sched.counts if pol.needs_future else None)
    cache = ExpertCache(m.n_layers, m.n_experts, plan.n_slots)
    pol.reset(ctx, cache)
    engine = Engine(cost, pol, cache, sched, ctx, context0=prompt_tokens, seed=seed, timeline=timeline)
    counters = engine.run()
    row = {"experiment": experiment, "policy": policy, "model": m.name, "draft": d.name, "hardware": hw.name,
           "workload": workload, "cache_ratio": float(cache_ratio), "gamma": g, "gen_tokens": int(counters.tokens),
           "seed": int(seed), "ttft_s": float("nan"), "mean_accepted": sched.mean_accepted,
           "n_slots": plan.n_slots, "runtime": hw.runtime, "quant": m.expert_quant,
           "quant_dense": m.dense_quant, "source": "sim", "trace": trace.path or f"synthetic:{trace.meta.get('workload')}"}
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
