"""The workload of a run: the synthetic trace of a preset (memoised: every policy of a sweep sees the same
one), its decode schedule, the offline routing profile of the policies that place from one, a replayed
trace's recorded signals, and the preset specs by name."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from sim.machine import specs as config
from sim.protocol import routing_counts
from traces.errors import TraceError
from traces.schema import Trace
from traces.windows import Schedule, build_schedule

PROFILE_TOKENS = 1024
PROFILE_SEED_OFFSET = 7919


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
    return sum(trace_counts(synthetic_trace(model, w, per, seed + PROFILE_SEED_OFFSET, shape)) for w in names)


@lru_cache(maxsize=64)
def _preset_spec(kind: str, name: str):
    return getattr(config, kind)(name)


def preset_spec(kind: str, name_or_cfg):
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


def check_trace(trace: Trace, m: config.ModelSpec) -> None:
    for field, want in (("n_layers", m.n_layers), ("n_experts", m.n_experts), ("top_k", m.top_k)):
        if trace.meta[field] != want:
            raise TraceError(trace.path, f"meta.{field}",
                             f"is {trace.meta[field]} but model {m.name} has {want}; pass the matching model=")


def trace_counts(trace: Trace) -> np.ndarray:
    """Per-(layer, expert) token counts of a whole trace."""
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


def run_profile(policy, m: config.ModelSpec, seed: int, trace: Trace) -> np.ndarray | None:
    """The offline profile for policies that use one (``needs_profile``); a replayed real trace is
    its own profile (an optimistic, in-distribution profile, stated in the run's row as ``trace``)."""
    if not policy.needs_profile:
        return None
    if trace.meta["source"] == "synthetic":
        return profile_counts(m.name, seed, routing_shape(m))
    return trace_counts(trace)
