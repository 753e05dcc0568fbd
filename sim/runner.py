"""One simulated run from names and numbers: specs, memory plan, trace, schedule, policy, engine, row.

This is the boundary between configuration (strings, YAML) and the hot loop (plain dataclasses and
numpy arrays). The CLI (:mod:`sim.cli`) and the tests call :func:`run_one`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from sim import config, serving
from sim.engine import Engine
from sim.expert_cache import ExpertCache
from sim.memory_plan import MemoryPlan
from sim.prefill.handoff import land_prefill_copies
from sim.policies import make_policy  # noqa: F401  (sim.runner.make_policy is patched by tests)
from sim.protocol import build_context, policy_cost_model, routing_counts, table_context
from traces.errors import TraceError
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


def run_one(policy: str = "llamacpp", workload: str | None = "gsm8k", cache_ratio: float = 0.17,
            hardware="rtx4090_pcie4", model="qwen3_30b_a3b", draft="qwen3_4b_fp8", gamma: int = 8,
            gen_tokens: int = 512, seed: int = 0, trace: str | Trace | None = None,
            acceptance: float | None = None, experiment: str = "adhoc", prompt_tokens: int = 256,
            context: int = 4096, timeline: bool = False, policy_args: dict | None = None,
            overlap: bool | None = None, runtime=None, quant: str | None = None,
            quant_dense: str | None = None, slots_per_layer: int | None = None,
            vram_budget_gib: float | None = None, table_tokens: int | None = None, prefill: bool = False,
            ubatch: int = 512, prefill_rule: str = "auto", prefill_threshold: int = 1024,
            batch: int = 1, stagger: int = 0, equal_vram: bool = False,
            acceptance_model: dict | None = None, cache_type_k: str = "f16", cache_type_v: str = "f16",
            flash_attn: bool = True) -> RunResult:
    """Simulate one (policy, workload, cache_ratio, machine) point; returns its result row.

    ``runtime`` (a conf/runtime name or mapping; None: the policy preset's) supplies the
    efficiencies; ``quant`` / ``quant_dense`` the weight formats; ``slots_per_layer`` or a policy
    knob (``n_cpu_moe``, ``gpu_experts_per_layer``) replace ``cache_ratio``; ``vram_budget_gib``
    caps the VRAM. ``overlap=False`` makes any policy prefetch blocking (its transfers finish
    before the step goes on), the synchronous mode in which the real engine's decisions equal the
    simulator's. ``table_tokens`` is the KV length of the policy's cost table (default: the
    middle of the generation, ``prompt_tokens + gen_tokens // 2``; a replay passes the real run's).
    ``prefill=true`` simulates the prompt first (micro-batches of ``ubatch``, copy-or-CPU by
    ``prefill_rule``): ``ttft_s`` and the decode's starting cache come from it; ``batch=B`` decodes B
    requests together, request i joining at step ``i * stagger`` (:mod:`sim.serving`).
    ``equal_vram`` (an AR run gets the draft's VRAM as expert slots) and ``acceptance_model``
    (decay, spread, burst, p_min, kappa: :mod:`traces.acceptance`) are :mod:`sim.speculation`'s.
    ``cache_type_k`` / ``cache_type_v`` / ``flash_attn`` (llama.cpp ``-ctk`` / ``-ctv`` / ``-fa``) size
    the memory plan of the llama.cpp runtime (:mod:`sim.vram`).
    The row carries the run's identity (:func:`sim.resolve.resolve`) and its ``run_id``."""
    from sim.identity import identity_columns
    from sim.resolve import resolve
    from sim.speculation.schedule import speculative_schedule

    wall = time.perf_counter()
    r = resolve(policy, workload, cache_ratio, hardware, model, draft, gamma, gen_tokens, seed, trace, acceptance,
                experiment, prompt_tokens, context, policy_args, overlap, runtime, quant, quant_dense,
                slots_per_layer, vram_budget_gib, prefill=prefill, ubatch=ubatch, prefill_rule=prefill_rule,
                prefill_threshold=prefill_threshold, batch=batch, stagger=stagger, equal_vram=equal_vram,
                acceptance_model=acceptance_model, cache_type_k=cache_type_k, cache_type_v=cache_type_v,
                flash_attn=flash_attn)
    hw, m, d, pol, g, trace, plan = r.hw, r.model, r.draft, r.policy, r.gamma, r.trace, r.plan
    if table_tokens is not None:          # a replay's cost-table context changes the numbers
        r.identity["table_tokens"] = int(table_tokens)
    cache_ratio, workload = r.cache_ratio, r.workload
    key = None
    if trace is None:
        key = (m.name, workload, gen_tokens + g + 1, seed, routing_shape(m))
        trace = synthetic_trace(*key)
    acc = r.acceptance if r.acceptance is not None else 0.0
    sched = speculative_schedule(trace, pol.adaptive_gamma, g, gen_tokens, acc, seed, d, acceptance_model) \
        or schedule(trace, key, g, gen_tokens, acc, seed)
    opts, batched, mean_acc = r.serving, None, None
    if opts.batch > 1:
        batched, mean_acc = serving.batch_schedule(key, g, gen_tokens, acc, seed, opts.batch, opts.stagger)
        sched = batched.schedule
    cost = serving.widen(policy_cost_model(pol, hw, m, d, g, plan.n_slots), sched)
    tctx = table_context(prompt_tokens, gen_tokens) if table_tokens is None else table_tokens
    ctx = build_context(pol, cost, plan.n_slots, g, tctx, seed, _profile(pol, m, seed, trace), sched.counts)
    cache = ExpertCache(m.n_layers, m.n_experts, plan.n_slots)
    pol.reset(ctx, cache)
    if cost.graphs and pol.output_on_cpu:       # -ngl N = layer count: the output layer splits the graph
        cost = replace(cost, graphs=False)
    pre = serving.run_prefill(opts, pol, policy, cost, m, workload, prompt_tokens, seed,
                              routing_shape(m)) if opts.prefill else None
    engine = Engine(cost, pol, cache, sched, ctx, context0=prompt_tokens * opts.batch, seed=seed, timeline=timeline,
                    recorded=recorded_signals(trace, sched) if batched is None else None,
                    warm=(lambda core: land_prefill_copies(core, pre.last_copied)) if pre is not None else None)
    counters = engine.run()
    row = {"experiment": experiment, "policy": policy, "model": m.name, "draft": d.name, "hardware": hw.name,
           "workload": workload, "cache_ratio": float(cache_ratio), "gamma": g, "gen_tokens": int(counters.tokens),
           "seed": int(seed), "ttft_s": float("nan"),
           "mean_accepted": sched.mean_accepted if mean_acc is None else mean_acc,
           "n_slots": plan.n_slots, "runtime": hw.runtime, "quant": m.expert_quant,
           "quant_dense": m.dense_quant, "source": "sim", "trace": trace.path or f"synthetic:{trace.meta.get('workload')}"}
    row.update(counters.row())
    row.update(serving.columns(opts, pre, batched, counters))
    row.update(pol.metrics())
    row.update({k: v for k, v in identity_columns(r.identity).items() if k not in row})
    row["sim_wall_s"] = time.perf_counter() - wall
    return RunResult(row, engine, plan)


def _counts(trace: Trace) -> np.ndarray:
    return routing_counts(trace.experts, trace.n_layers, trace.n_experts)


def recorded_signals(trace: Trace, sched) -> dict | None:
    """Per step, the trace's recorded signals of the step's rows (``[n, L, k]`` each), or None.

    Only an autoregressive schedule (one row per step, the trace's own positions) can use them;
    a speculative window's rejected drafts have no recorded prediction or weights."""
    if sched.gamma > 0:
        return None
    out = {}
    if trace.next_pred is not None:
        out["next_pred"] = [trace.next_pred[t:t + 1] for t in range(sched.n_steps)]
    if trace.weights is not None:
        out["weights"] = [trace.weights[t:t + 1] for t in range(sched.n_steps)]
        out["experts"] = sched.rows
    return out or None


def _profile(policy, m: config.ModelSpec, seed: int, trace: Trace) -> np.ndarray | None:
    """The offline profile for policies that use one (``needs_profile``); a replayed real trace is
    its own profile (an optimistic, in-distribution profile, stated in the run's row as ``trace``)."""
    if not policy.needs_profile:
        return None
    if trace.meta["source"] == "synthetic":
        return profile_counts(m.name, seed, routing_shape(m))
    return _counts(trace)


def __getattr__(name: str):
    """``resolve`` and ``record_acceptance`` live in :mod:`sim.resolve` (kept importable from here)."""
    if name in ("resolve", "record_acceptance", "Resolved"):
        from sim import resolve as module
        return getattr(module, name)
    raise AttributeError(name)
