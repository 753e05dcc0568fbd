"""Synchronous mode: the real engine's decisions equal the simulator's on the recorded trace.

With ``sync=true`` prefetches block at the protocol points (``Engine._drain``'s places), so a
policy's decisions depend only on what it is told. The real run records its trace (with the SD
record); :func:`real.offload.replay.replay` feeds it to :func:`sim.run.runner.run_one` with the same
specs, slots, cost table, profile and future and ``overlap = False``; every decision count must
be equal. The policies that read the next-layer gate guess or the router's gate weights
(MixtralOffload, Fate, HybriMoE: autoregressive) are included: the real run records both in its
trace, and the replay reads them instead of simulating a predictor. SP-MoE alone is excluded:
its draft-based prediction has no recorded counterpart (the live executor stands in the previous
verify window, the simulator a draft predictor of stated accuracy; :mod:`real.offload.signals`).
"""
from __future__ import annotations

import pytest

from tests.real import need

need("torch")
need("transformers")

from real.offload.options import RunOptions, parse  # noqa: E402
from real.offload.replay import COUNTS, count_differences, replay  # noqa: E402
from real.offload.run import prepare, run  # noqa: E402
from sim.policies import policy_names  # noqa: E402

NOT_RECORDED = {"sp_moe"}   # draft-based prediction: no recorded signal to replay
RECORDED_SIGNALS = {"fate", "hybrimoe", "mixtral_offload"}
EXACT = [p for p in policy_names() if p not in NOT_RECORDED]


_PREPARED: dict = {}
_RUNS: dict = {}


def _options(target: str, policy: str, ratio: float, prompts: int) -> RunOptions:
    return parse(RunOptions, [f"target={target}", "draft=tiny:dense", f"policy={policy}",
                              f"cache_ratio={ratio}", "gamma=4", "max_new_tokens=20", f"prompts=tiny:{prompts}",
                              "sync=true", "quiet=true", "warmup=0"])


@pytest.fixture(scope="module", autouse=True)
def _close_prepared():
    yield
    for p in _PREPARED.values():
        p.close()
    _PREPARED.clear()
    _RUNS.clear()


def sync_run(target: str, policy: str, ratio: float = 0.3, prompts: int = 1):
    """A synchronous real run (models loaded once per target; each run memoised for the module)."""
    key = (target, policy, ratio, prompts)
    if key not in _RUNS:
        if (target, prompts) not in _PREPARED:
            _PREPARED[(target, prompts)] = prepare(_options(target, policy, ratio, prompts))
        _RUNS[key] = run(_options(target, policy, ratio, prompts), _PREPARED[(target, prompts)])
    return _RUNS[key]


@pytest.mark.parametrize("policy", EXACT)
def test_counts_equal_simulator_qwen3(policy):
    report = sync_run("tiny:qwen3_moe", policy)
    trace, real = report.traces[0], report.counters[0]
    sim = replay(trace).engine.c
    assert count_differences(real, sim) == {}
    assert real.requests > 0
    if policy in RECORDED_SIGNALS:     # the replayed signal drove real prefetches
        assert trace.next_pred is not None and real.prefetches > 0
    assert trace.sd is not None or trace.meta["gamma"] == 0


@pytest.mark.parametrize("policy", ["accelerate", "fate", "fiddler", "hybrimoe", "llamacpp_sd", "mixtral_offload",
                                    "moespac", "moespac_static", "ondemand_lru", "oracle", "vllm"])
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


def test_block_copies_run_as_blocks_on_the_real_executor(monkeypatch):
    """Accelerate's ``Placement.bulk``: the live executor copies a layer's experts as one transfer
    (the protocol core's block ``Copy``), as the simulator does, and the slots land together."""
    from real.offload.transfers import TransferMixin
    sizes = []
    original = TransferMixin.transfer

    def spy(self, copy):
        sizes.append(len(copy.experts))
        return original(self, copy)
    monkeypatch.setattr(TransferMixin, "transfer", spy)
    _RUNS.pop(("tiny:qwen3_moe", "accelerate", 0.3, 1), None)
    report = sync_run("tiny:qwen3_moe", "accelerate")
    assert max(sizes) > 1 and sum(sizes) == report.counters[0].demand_fetches
