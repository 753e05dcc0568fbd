"""Synchronous mode: the real engine's decisions equal the simulator's on the recorded trace.

With ``sync=true`` prefetches block at the protocol points (``Engine._drain``'s places), so a
policy's decisions depend only on what it is told. The real run records its trace (with the SD
record); :func:`real.offload.replay.replay` feeds it to :func:`sim.runner.run_one` with the same
specs, slots, cost table, profile and future and ``overlap = False``; every decision count must
be equal. Policies that read prediction signals (next-layer gate guess, draft prediction, router
scores) are excluded: the live executor computes those from the model, the simulator from the
trace with a stated accuracy (:mod:`real.offload.signals`).
"""
from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from real.offload.options import RunOptions, parse  # noqa: E402
from real.offload.replay import COUNTS, count_differences, replay  # noqa: E402
from real.offload.run import run  # noqa: E402
from sim.policies import policy_names  # noqa: E402

SIGNAL_DRIVEN = {"fate", "hybrimoe", "mixtral_offload", "sp_moe"}
EXACT = [p for p in policy_names() if p not in SIGNAL_DRIVEN]
REQUIRED = {"moespac", "moespac_static", "llamacpp_sd", "ondemand_lru", "fiddler"}


def sync_run(target: str, policy: str, ratio: float = 0.3, prompts: int = 1):
    opts = parse(RunOptions, [f"target={target}", "draft=tiny:dense", f"policy={policy}",
                              f"cache_ratio={ratio}", "gamma=4", "max_new_tokens=20", f"prompts=tiny:{prompts}",
                              "sync=true", "quiet=true", "warmup=0"])
    return run(opts)


def test_required_policies_are_exact():
    assert REQUIRED <= set(EXACT)


@pytest.mark.parametrize("policy", EXACT)
def test_counts_equal_simulator_qwen3(policy):
    report = sync_run("tiny:qwen3_moe", policy)
    trace, real = report.traces[0], report.counters[0]
    sim = replay(trace).engine.c
    assert count_differences(real, sim) == {}
    assert real.requests > 0 and trace.sd is not None or trace.meta["gamma"] == 0


@pytest.mark.parametrize("policy", sorted(REQUIRED | {"oracle", "vllm", "accelerate"}))
def test_counts_equal_simulator_deepseek(policy):
    report = sync_run("tiny:deepseek_v2", policy, ratio=0.4, prompts=2)
    for trace, real in zip(report.traces, report.counters):
        assert count_differences(real, replay(trace).engine.c) == {}


def test_counts_exercise_every_kind_of_decision():
    """Across the exact policies the runs include hits, misses on the CPU, demand fetches,
    prefetches, streams and evictions, so the equality above is not vacuous."""
    seen = {k: 0 for k in COUNTS}
    for policy in ("moespac", "ondemand_lru", "vllm", "fiddler"):
        c = sync_run("tiny:qwen3_moe", policy).counters[0]
        for k in COUNTS:
            seen[k] += getattr(c, k)
    assert all(seen[k] > 0 for k in ("hits", "cpu_execs", "demand_fetches", "prefetches", "streams", "evictions"))


def test_replay_patches_overlap_only_while_running():
    """Presets without an ``overlap`` argument are made blocking only inside the replay."""
    import sim.runner
    from sim.policies import make_policy
    report = sync_run("tiny:qwen3_moe", "oracle")
    replay(report.traces[0])
    assert sim.runner.make_policy is make_policy
