"""The cache a prefill leaves to the decode, and the prefill columns of a run's row."""
import math

import numpy as np
import pytest

from sim.prefill.handoff import keeps_cache, land_prefill_copies
from sim.protocol import ProtocolCore
from tests.sim.doubles import FetchFIFO, StaticGPU, make_cache, tiny_specs
from sim.run.spec import RunSpec


def core_for(policy, n_slots, initial=()):
    _, m, _ = tiny_specs(n_layers=2, n_experts=3)
    cache = make_cache(m, n_slots)
    policy.reset(None, cache)
    core = ProtocolCore(policy, cache, expert_bytes=m.expert_bytes, gpu_tab=np.zeros(5), cpu_tab=np.zeros(5))
    for layer, e in initial:
        cache.load(layer, e)
    return core


def test_copies_land_fewest_tokens_first_through_the_policys_victims():
    """Two slots; layer 0 copied experts 1 (3 tokens) and 2 (1 token), layer 1 expert 0: landing
    order (0, 2), (0, 1), then (1, 0) evicts the FIFO policy's oldest, (0, 2)."""
    core = core_for(FetchFIFO(), 2)
    assert keeps_cache(core.policy)
    landed = land_prefill_copies(core, {0: (np.array([1, 2]), np.array([3, 1])), 1: (np.array([0]), np.array([2]))})
    assert landed == 3
    assert sorted(map(tuple, np.argwhere(core.cache.resident).tolist())) == [(0, 1), (1, 0)]
    assert core.c.evictions == 0 and core.c.demand_fetches == 0 and core.c.pcie_bytes == 0   # decode tallies start clean


def test_a_static_placement_keeps_its_startup_residency():
    core = core_for(StaticGPU([(0, 0)]), 2, initial=[(0, 0)])
    assert not keeps_cache(core.policy)
    assert land_prefill_copies(core, {0: (np.array([1, 2]), np.array([3, 1]))}) == 0
    assert np.argwhere(core.cache.resident).tolist() == [[0, 0]]


def test_a_run_with_prefill_reports_ttft_and_starts_from_the_prefill_cache():
    from sim.run.runner import run_one

    args = dict(gen_tokens=16, prompt_tokens=600, quant="q4_k_m", cache_ratio=0.17)
    off = run_one(RunSpec.of(policy="ondemand_lru", **args)).row
    on = run_one(RunSpec.of(policy="ondemand_lru", prefill=True, ubatch=256, **args)).row
    assert math.isnan(off["ttft_s"]) and math.isnan(off["e2e_tok_s"]) and off["prefill_rule"] == ""
    assert on["ttft_s"] > 0 and on["prefill_tok_s"] == pytest.approx(600 / on["ttft_s"])
    assert on["e2e_tok_s"] == pytest.approx(on["gen_tokens"] / (on["ttft_s"] + on["decode_s"]))
    assert on["prefill_rule"] == "optimal" and on["ubatch"] == 256
    assert on["hit_rate"] > off["hit_rate"]          # an LRU cache warmed by the prompt's last copies
    assert on["run_id"] != off["run_id"]
    static_on = run_one(RunSpec.of(policy="llamacpp", prefill=True, **args)).row
    static_off = run_one(RunSpec.of(policy="llamacpp", **args)).row
    assert static_on["decode_s"] == static_off["decode_s"] and static_on["prefill_rule"] == "llamacpp"


def _policies():
    from sim.policies import policy_names
    return policy_names()


@pytest.mark.parametrize("policy", _policies())
def test_every_policy_decodes_from_the_prefill_cache(policy):
    """The handoff goes through each policy's own victims; the decode's tallies stay consistent."""
    from sim.run.runner import run_one

    res = run_one(RunSpec.of(policy=policy, gen_tokens=4, prompt_tokens=96, ubatch=48, prefill=True, quant="q4_k_m"))
    row, c = res.row, res.engine.c
    assert row["ttft_s"] > 0 and row["gen_tokens"] == 4
    assert int(res.engine.cache.resident.sum()) <= row["n_slots"]
    assert c.hits <= c.requests and c.gpu_execs + c.cpu_execs >= c.requests
