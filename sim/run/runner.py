"""One simulated run from its specification: resolve, trace, schedule, policy, engine, row.

This is the boundary between configuration (strings, YAML) and the hot loop (plain dataclasses and
numpy arrays). The commands (:mod:`sim.commands`) and the tests call :func:`run_one`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from sim.engine.decode import Engine
from sim.machine.memory_plan import MemoryPlan
from sim.prefill.handoff import land_prefill_copies
from sim.protocol import build_context, table_context
from sim.protocol.expert_cache import ExpertCache
from sim.run import requests
from sim.run.identity import identity_columns
from sim.run.resolve import Resolved, resolve, run_cost_model
from sim.run.spec import RunSpec
from sim.run.workload import recorded_signals, routing_shape, run_profile, schedule, synthetic_trace
from sim.speculation.schedule import speculative_schedule
from traces.schema import Trace
from sim.engine.decode import EngineOptions


@dataclass
class RunResult:
    """A result row plus the engine (for timelines and inspection)."""

    row: dict
    engine: Engine
    plan: MemoryPlan | None = None


def run_one(spec: RunSpec, resolved: Resolved | None = None) -> RunResult:
    """Simulate one run (:class:`sim.run.spec.RunSpec`); returns its result row.

    ``runtime`` (a conf/runtime name or mapping; None: the policy preset's) supplies the
    efficiencies; ``quant`` / ``quant_dense`` the weight formats; ``slots_per_layer`` or a policy
    knob (``n_cpu_moe``, ``gpu_experts_per_layer``) replace ``cache_ratio``; ``vram_budget_gib``
    caps the VRAM. ``overlap=False`` makes any policy prefetch blocking (its transfers finish
    before the step goes on), the synchronous mode in which the real engine's decisions equal the
    simulator's. ``table_tokens`` is the KV length of the policy's cost table (default: the
    middle of the generation, ``prompt_tokens + gen_tokens // 2``; a replay passes the real run's).
    ``prefill=true`` simulates the prompt first: ``ttft_s`` and the decode's starting cache come from
    it; ``batch=B`` decodes B requests together (:mod:`sim.run.requests`). The row carries the
    run's identity (:func:`sim.run.resolve.identity_of`) and its ``run_id``. ``resolved``: ``spec``
    already resolved (:func:`sim.run.resolve.resolve`, its policy not yet reset), so no input is
    read twice."""
    wall = time.perf_counter()
    r = resolve(spec) if resolved is None else resolved
    run = spec.run
    trace, key = r.trace, None
    if trace is None:
        key = (r.model.name, r.workload, run.gen_tokens + r.gamma + 1, run.seed, routing_shape(r.model))
        trace = synthetic_trace(*key)
    sched, batched, mean_acc = _schedule(spec, r, trace, key)
    cost = requests.widen(run_cost_model(r), sched)
    tctx = table_context(spec.workload.prompt_tokens, run.gen_tokens) if run.table_tokens is None else run.table_tokens
    ctx = build_context(r.policy, cost, r.plan.n_slots, r.gamma, tctx, run.seed,
                        run_profile(r.policy, r.model, run.seed, trace), sched.counts)
    cache = ExpertCache(r.model.n_layers, r.model.n_experts, r.plan.n_slots)
    r.policy.reset(ctx, cache)
    pre = requests.run_prefill(spec, r, cost) if spec.serving.prefill else None
    engine = Engine(cost, r.policy, cache, sched, ctx, EngineOptions(context0=spec.workload.prompt_tokens * spec.serving.batch,
                    seed=run.seed, timeline=run.timeline,
                    recorded=recorded_signals(trace, sched) if batched is None else None,
                    warm=(lambda core: land_prefill_copies(core, pre.last_copied)) if pre is not None else None))
    counters = engine.run()
    row = _row(spec, r, trace, sched.mean_accepted if mean_acc is None else mean_acc, counters)
    row.update(requests.columns(spec.serving, pre, batched, counters))
    row.update(r.policy.metrics())
    row.update({k: v for k, v in identity_columns(r.identity).items() if k not in row})
    row["sim_wall_s"] = time.perf_counter() - wall
    return RunResult(row, engine, r.plan)


def _schedule(spec: RunSpec, r, trace: Trace, key: tuple | None):
    """The decode steps: a speculative schedule where the policy or the acceptance model needs one,
    else the plain (memoised) one; with ``batch > 1`` the merged schedule of the requests."""
    run, acc = spec.run, (r.acceptance if r.acceptance is not None else 0.0)
    sched = speculative_schedule(trace, r.policy.adaptive_gamma, r.gamma, run.gen_tokens, acc, run.seed, r.draft,
                                 spec.draft.acceptance_model) \
        or schedule(trace, key, r.gamma, run.gen_tokens, acc, run.seed)
    if spec.serving.batch > 1:
        batched, mean_acc = requests.batch_schedule(key, r.gamma, run.gen_tokens, acc, run.seed, spec.serving)
        return batched.schedule, batched, mean_acc
    return sched, None, None


def _row(spec: RunSpec, r, trace: Trace, mean_accepted: float, counters) -> dict:
    """The row's leading columns: what ran, on what, and the engine's counters."""
    m, hw, d = r.model, r.hw, r.draft
    row = {"experiment": spec.run.experiment, "policy": spec.policy.policy, "model": m.name, "draft": d.name,
           "hardware": hw.name, "workload": r.workload, "cache_ratio": float(r.cache_ratio), "gamma": r.gamma,
           "gen_tokens": int(counters.tokens), "seed": int(spec.run.seed), "ttft_s": float("nan"),
           "mean_accepted": mean_accepted, "n_slots": r.plan.n_slots, "runtime": hw.runtime,
           "quant": m.expert_quant, "quant_dense": m.dense_quant, "source": "sim",
           "trace": trace.path or f"synthetic:{trace.meta.get('workload')}"}
    row.update(counters.row())
    return row
