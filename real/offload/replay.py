"""Simulated replay of a real run's trace: :func:`sim.run.runner.run_one` with the run's own specs.

A trace written by ``python -m real run`` carries in its metadata the model, draft and hardware
specs, cache ratio, gamma, seed and context the real run used, so the simulator rebuilds the same
policy context (slots, the cost table at the run's own ``table_context``, profile, future) and
replays the recorded verify windows from the real prompt length.
``sync=True`` replays with blocking prefetch (``run_one(overlap=False)``), as the real run's
``sync=true`` does.
"""
from __future__ import annotations

from sim.run import runner
from sim.protocol import table_context
from sim.run.spec import RunSpec

COUNTS = ("requests", "hits", "gpu_execs", "cpu_execs", "demand_fetches", "prefetches", "streams",
          "evictions", "fallbacks", "prefetch_useful", "tokens", "steps")


def replay(trace, policy: str | None = None, policy_args: dict | None = None, sync: bool | None = None,
           hardware: dict | None = None, experiment: str = "validate"):
    """Simulate ``trace`` (a real run's) under the run's settings; returns the ``RunResult``."""
    meta = trace.meta
    policy = policy or meta["policy"]
    sync = meta["sync"] if sync is None else sync
    args = dict(policy_args or {})
    gen = trace.n_tokens - 1    # tokens produced by the verify steps (the first came from the prefill)
    tctx = meta.get("table_context", table_context(meta["prompt_tokens"], meta["ctx_gen_tokens"]))
    kwargs = dict(policy=policy, trace=trace, hardware=hardware or meta["hardware_spec"],
                  model=meta["model_spec"], draft=meta["draft_spec"], gamma=meta["gamma"],
                  gen_tokens=gen, seed=meta["seed"], acceptance=0.7, experiment=experiment,
                  prompt_tokens=meta["prompt_tokens"], table_tokens=tctx, context=meta["context"], policy_args=args,
                  workload=meta["workload"], cache_ratio=meta["cache_ratio"],
                  overlap=False if sync else None)
    return runner.run_one(RunSpec.of(**kwargs))


def count_differences(real, simulated) -> dict:
    """``{counter: (real, simulated)}`` for every decision count that differs (empty: identical)."""
    return {k: (getattr(real, k), getattr(simulated, k)) for k in COUNTS
            if getattr(real, k) != getattr(simulated, k)}
