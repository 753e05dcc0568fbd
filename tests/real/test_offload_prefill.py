"""Prefill on the live executor through the simulator's copy-or-CPU rule: lossless, and the same
decisions and tallies as the simulated prefill of the same prompt routing (CPU, float32)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.real import need

torch = need("torch")
need("transformers")

from real.offload.options import RunOptions, parse  # noqa: E402
from real.offload.run import prepare, run  # noqa: E402
from sim.prefill.phase import simulate_prefill  # noqa: E402

BASE = ["target=tiny:qwen3_moe", "policy=llamacpp", "cache_ratio=0.3", "max_new_tokens=6", "prompts=tiny:1",
        "prompt_len=24", "quiet=true", "warmup=0"]


@pytest.fixture(scope="module")
def prepared():
    p = prepare(parse(RunOptions, BASE))
    yield p
    p.close()


def test_prefill_follows_the_rule_and_matches_the_simulated_prefill(prepared):
    plain = run(parse(RunOptions, BASE), prepared)
    assert plain.rows[0]["prefill_rule"] == ""
    resident = prepared.executor.cache.resident.copy()          # llama.cpp's static placement
    assert resident.any() and not resident.all()
    for rule in ("cpu", "gpu", "optimal"):
        report = run(parse(RunOptions, BASE + ["prefill=true", f"prefill_rule={rule}"]), prepared)
        assert report.tokens[0] == plain.tokens[0]               # where the experts ran changes no token
        pf = prepared.executor.prefill
        experts = pf.experts()
        assert experts.shape[0] == 24 and experts.shape[1] == resident.shape[0]
        sim = simulate_prefill(pf.costs, pf.rule, experts, resident)
        assert [bool(x) for x in sim.copied_layers[0]] == pf.copied
        assert (sim.copies, sim.cpu_execs, sim.gpu_execs) == (pf.copies, pf.cpu_execs, pf.gpu_execs)
        row = report.rows[0]
        assert row["prefill_rule"] == rule and row["ttft_s"] > 0
        assert row["prefill_copy_share"] == pytest.approx(float(np.mean(pf.copied)))
        if rule == "cpu":
            assert pf.copies == 0 and pf.cpu_execs > 0
        if rule == "gpu":
            assert pf.cpu_execs == 0 and pf.copies > 0


def test_a_caching_policy_decodes_from_what_the_prefill_copied(prepared, monkeypatch):
    """As in the simulator (sim.prefill.handoff), the prompt's copies land in a caching policy's
    decode cache before the first step (its own victims), and a static placement keeps its own."""
    from real.offload.executor import OffloadExecutor

    seen = []
    original = OffloadExecutor.land_prefill

    def spy(self):
        before = self.cache.resident.copy()
        original(self)
        seen.append((before, self.cache.resident.copy(), dict(self.prefill.last_copied) if self.prefill else {}))

    monkeypatch.setattr(OffloadExecutor, "land_prefill", spy)
    args = [a for a in BASE if not a.startswith("policy=")]
    plain = run(parse(RunOptions, args + ["policy=ondemand_lru"]), prepared)
    cached = run(parse(RunOptions, args + ["policy=ondemand_lru", "prefill=true", "prefill_rule=gpu"]), prepared)
    assert cached.tokens[0] == plain.tokens[0]
    before, after, copied = seen[-1]
    new = np.argwhere(after & ~before)
    assert len(new) > 0 and after.sum() <= prepared.executor.cache.n_slots
    assert all(e in set(copied[layer][0].tolist()) for layer, e in new.tolist())   # only what the prompt copied
    run(parse(RunOptions, BASE + ["prefill=true", "prefill_rule=gpu"]), prepared)   # llama.cpp: static
    before, after, _ = seen[-1]
    assert (before == after).all()
