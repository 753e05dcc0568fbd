"""Equal-cost token classes in the CPU/GPU split: exactness against brute force, and AdaSpec's
placements on random speculative traffic equal to the brute-force best split."""
from __future__ import annotations


import numpy as np
import pytest

import sim.policies.adaspec as adaspec_mod
from sim.machine.cost_table import CostTable
from sim.policies import make_policy
from sim.policies.split import ExpertTimes, best_split, best_split_phase, split_time
from sim.policies.split_classes import split_classes
from tests.policies.conftest import Driver, brute_force, context, random_counts


def flat_costs(rng, n_max=16) -> CostTable:
    """Memory-bound decode: one expert's GPU and CPU time do not depend on its few tokens (up to a
    roofline knee), then grow; transfer and times random."""
    n = np.arange(n_max + 1)
    knee = int(rng.integers(2, 10))
    g0, c0 = float(rng.uniform(1, 60)), float(rng.uniform(20, 300))
    g = np.where(n > 0, g0 * np.maximum(1.0, n / knee), 0.0)
    c = np.where(n > 0, c0 * np.maximum(1.0, n / knee), 0.0)
    return CostTable(gpu_expert_s=g, cpu_expert_s=c, transfer_s=float(rng.uniform(5, 400)),
                     layer_fixed_s=1.0, draft_phase_s=0.0, expert_bytes=1)


def test_equal_cost_neighbours_merge_and_others_do_not():
    n = np.arange(8)
    cpu = np.array([0, 5, 5, 7, 5, 5, 9, 9], dtype=float)      # cpu(1)=cpu(2), cpu(4)=cpu(5), 3 apart
    cost = CostTable(gpu_expert_s=np.where(n > 0, 1.0, 0.0), cpu_expert_s=cpu, transfer_s=3.0,
                     layer_fixed_s=0.0, draft_phase_s=0.0, expert_bytes=1)
    counts = np.array([1, 2, 3, 4, 5, 1, 2, 0])
    present = np.array([True, True, False, False, False, False, False, False])
    keys, members, sig = split_classes(counts, present, cost, ExpertTimes(cost))
    # present {2 tokens, 1 token} merge; absent by tokens descending: 5,4 merge; 3 alone; 2,1 merge
    assert [list(m) for m in members] == [[1, 0], [4, 3], [2], [6, 5]]
    assert keys == [(True, 2), (False, 5), (False, 3), (False, 2)]
    assert sig == [(True, 1.0, 5.0), (False, 1.0, 5.0), (False, 1.0, 7.0), (False, 1.0, 5.0)]


@pytest.mark.parametrize("seed", range(4))
def test_best_split_is_exact_on_verify_windows(seed):
    """Up to 10 requested experts with up to 9 tokens each: the search equals all 2^k assignments,
    and best_split_phase's time equals split_time of its answer."""
    rng = np.random.default_rng(seed)
    for _ in range(12):
        cost = flat_costs(rng)
        E, k = 14, int(rng.integers(1, 11))
        counts = np.zeros(E, dtype=np.int64)
        counts[rng.choice(E, size=k, replace=False)] = rng.integers(1, 10, size=k)
        present = rng.random(E) < 0.3
        limit = None if rng.random() < 0.5 else int(rng.integers(0, 4))
        wait = 0.0 if rng.random() < 0.5 else float(rng.uniform(0, cost.transfer_s))
        want = brute_force(counts, present, cost, limit, wait)
        times = ExpertTimes(cost)
        on_gpu = best_split(counts, present, cost, max_fetch=limit, link_wait_s=wait, times=times)
        assert split_time(counts, on_gpu, present, cost, wait) == pytest.approx(want, rel=1e-12)
        on2, t = best_split_phase(counts, present, cost, limit, wait, {}, times)
        assert (on2 == on_gpu).all()
        assert t == pytest.approx(split_time(counts, on2, present, cost, wait), rel=1e-12)


def test_adaspec_places_the_brute_force_best_split_on_random_windows(monkeypatch):
    """AdaSpec driven on random 5-token windows (memoised, one cost table): every placement made
    through best_split_phase is a brute-force best split, and its time is split_time's."""
    rng = np.random.default_rng(7)
    cost = flat_costs(rng)
    ctx = context(L=3, E=10, k=2, slots=6, gamma=4, cost=cost, profile=rng.integers(0, 9, (3, 10)).astype(float))
    seen = []
    real = adaspec_mod.best_split_phase

    def checked(counts, present, costs, max_fetch, wait, memo, times):
        on_gpu, t = real(counts, present, costs, max_fetch, wait, memo, times)
        seen.append(1)
        assert split_time(counts, on_gpu, present, costs, wait) == pytest.approx(
            brute_force(counts, present, costs, max_fetch, wait), rel=1e-12)
        assert t == pytest.approx(split_time(counts, on_gpu, present, costs, wait), rel=1e-12)
        return on_gpu, t

    monkeypatch.setattr(adaspec_mod, "best_split_phase", checked)
    Driver(make_policy("adaspec"), ctx, prefetch_budget=1).run(random_counts(rng, 8, 3, 10, 2, window=5))
    assert len(seen) > 12
