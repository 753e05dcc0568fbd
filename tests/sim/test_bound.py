"""The LP bound: below every scripted decision sequence on tiny cases, above every policy."""
from __future__ import annotations

import numpy as np
import pytest

from sim.bound import decode_bound
from sim.bound.brute import brute_force
from tests.sim.doubles import RoundCosts, tiny_specs, toy_trace
from traces.windows import build_schedule


def _tiny(seed: int, gamma: int, tokens: int):
    hw, m, d = tiny_specs(n_layers=2, n_experts=2)
    cost = RoundCosts(hw, m, d)
    ex = np.random.default_rng(seed).integers(0, 2, size=(tokens + gamma + 1, 2, 1))
    return cost, build_schedule(toy_trace(ex, n_experts=2), gamma, tokens, acceptance=0.6, seed=seed)


@pytest.mark.parametrize("seed, gamma", [(1, 0), (2, 0), (3, 1)])
def test_lp_below_milp_below_brute_force(seed, gamma):
    """LP <= MILP (same model, integer) <= the best of all scripted runs of the engine."""
    cost, sched = _tiny(seed, gamma, 3)
    best, n_runs = brute_force(cost, sched, 1, speculative=gamma > 0, max_prefetch_steps=1)
    lp = decode_bound(cost, sched, 1, 0)
    mi = decode_bound(cost, sched, 1, 0, integer=True)
    assert n_runs >= 320
    assert lp.decode_s <= mi.decode_s * (1 + 1e-9) <= best * (1 + 1e-9)
    assert lp.fixed_s > 0 and lp.expert_s > 0
    assert lp.decode_s >= 0.3 * best          # a bound, not a trivial one


def test_bound_exact_on_a_hand_case():
    """One layer, expert 0 requested twice, 1 slot: loading it at the start is free, so both uses
    run on the GPU (10 us each); fixed parts 1 + 2 us per token."""
    hw, m, d = tiny_specs(n_layers=1, n_experts=2)
    cost = RoundCosts(hw, m, d)
    sched = build_schedule(toy_trace([[[0]], [[0]]], n_experts=2), 0, 2)
    b = decode_bound(cost, sched, 1, 0)
    assert b.decode_s == pytest.approx(2 * (1 + 2 + 10) * 1e-6, rel=1e-6)


def _configs(n, seed=0):
    rng = np.random.default_rng(seed)
    models = {"qwen3_30b_a3b": (0.03, 0.2), "mixtral_8x7b": (0.03, 0.12), "deepseek_v2_lite": (0.05, 0.5)}
    for i in range(n):
        model = list(models)[i % 3]
        lo, hi = models[model]
        yield dict(model=model, workload=str(rng.choice(["gsm8k", "mt_bench", "cnn_dm"])),
                   hardware=str(rng.choice(["rtx4090_pcie4", "rtx3090_ddr4", "h200_pcie5"])),
                   draft=str(rng.choice(["qwen3_0_6b", "eagle3_qwen3_30b_a3b", "ngram"])),
                   cache_ratio=float(rng.uniform(lo, hi)), gamma=int(rng.integers(1, 5)),
                   gen_tokens=4, seed=int(rng.integers(100)))


@pytest.mark.slow
@pytest.mark.parametrize("cfg", list(_configs(3)), ids=lambda c: c["model"])
def test_no_policy_beats_the_bound(cfg):
    """Every registered policy, on its own schedule and cost model, stays below the LP bound."""
    from sim.bound.check import policies_vs_bound
    from sim.policies import policy_names

    beaten = [(n, row["tps"], b) for n, row, b in policies_vs_bound(cfg, policy_names()) if row["tps"] > b * (1 + 1e-6)]
    assert not beaten
