"""MoE-SpAc's Heterogeneous Workload Balancer: the O(K) search against brute force, capacities."""
import math

import numpy as np
import pytest

from sim.machine.cost_table import CostTable
from sim.policies.moespac.balancer import Balancer, choose_tau, choose_tau_brute


def per_level(levels, present, K):
    n_at = np.bincount(levels, minlength=K + 1).tolist()
    miss_at = np.bincount(levels[~present], minlength=K + 1).tolist()
    return n_at, miss_at


def random_instance(rng):
    K = int(rng.integers(1, 8))
    E = int(rng.integers(1, 160))
    levels = rng.integers(0, K + 1, E)
    present = rng.random(E) < rng.random()
    g = rng.random(K + 1) * rng.choice([1e-6, 1e-5, 1e-3])     # GPU-bound instances too
    c = rng.random(K + 1) * rng.choice([1e-5, 1e-4, 1e-3])
    g[rng.random(K + 1) < 0.2] = 0.0
    c[rng.random(K + 1) < 0.2] = 0.0
    cap = float(rng.choice([rng.uniform(0, E), np.inf]))
    budget = float(rng.choice([rng.uniform(-10, E), np.inf]))
    return K, levels, present, g, c, cap, budget


def check_same(K, levels, present, g, c, cap, budget):
    n_at, miss_at = per_level(levels, present, K)
    fast = choose_tau(n_at, miss_at, g.tolist(), c.tolist(), cap, budget)
    ref = choose_tau_brute(levels, present, g, c, cap, budget, K)
    f_fast, f_ref = max(fast[1], fast[2]), max(ref[1], ref[2])
    assert f_fast == pytest.approx(f_ref, rel=1e-9, abs=1e-15)
    assert fast[0] == ref[0]                      # same tau (same tie rule: the larger tau)
    assert fast[3:] == ref[3:]                     # same |H|, placed x, transfers needed


def test_fast_search_equals_brute_force_on_5000_seeded_instances():
    rng = np.random.default_rng(20240601)
    for _ in range(5000):
        check_same(*random_instance(rng))


def test_cpu_bound_layer_takes_every_level_that_fits():
    # 3 experts at level 2, 4 at level 1; GPU 10x faster: everything hot (tau = 1)
    levels, present = np.array([2, 2, 2, 1, 1, 1, 1, 0]), np.ones(8, bool)
    g, c = np.array([0.0, 1e-5, 1e-5]), np.array([1e-5, 1e-4, 1e-4])
    assert choose_tau(*per_level(levels, present, 2), g.tolist(), c.tolist(), 99, 99)[0] == 1


def test_gpu_bound_layer_keeps_work_on_the_cpu():
    # GPU slower than CPU per expert: moving level 1 over would lengthen the layer
    levels, present = np.array([2, 1, 1, 1, 1]), np.ones(5, bool)
    g, c = np.array([0.0, 3e-4, 3e-4]), np.array([0.0, 1e-4, 1e-4])
    tau, t_gpu, t_cpu, *_ = choose_tau(*per_level(levels, present, 2), g.tolist(), c.tolist(), 99, 99)
    assert tau == 2 and t_gpu == pytest.approx(3e-4) and t_cpu == pytest.approx(4e-4)


def test_capacity_truncates_the_boundary_level():
    """Slots for 5: levels 3 (2 experts) and 2 (4 experts) overflow by one -> tau = 2 (level 2 is
    partly placed); level 1 adds nothing placeable, so the tie keeps tau = 2."""
    levels, present = np.array([3, 3, 2, 2, 2, 2, 1, 1, 1]), np.zeros(9, bool)
    g, c = np.full(4, 1e-5), np.full(4, 1e-4)
    tau, _, _, n_hot, placed, need = choose_tau(*per_level(levels, present, 3), g.tolist(),
                                                c.tolist(), cap=5, budget=99)
    assert (tau, n_hot, placed, need) == (2, 6, 5, 5)
    # the PCIe budget truncates the same way: 2 present + 1 transfer
    present[:2] = True
    tau, _, _, n_hot, placed, need = choose_tau(*per_level(levels, present, 3), g.tolist(),
                                                c.tolist(), cap=99, budget=1)
    assert (tau, placed, need) == (2, 3, 1)


def costs(draft=10e-3, transfer=1e-3):
    n = np.arange(16)
    return CostTable(gpu_expert_s=n * 1e-6, cpu_expert_s=np.where(n > 0, 1e-4, 0.0), transfer_s=transfer,
                     layer_fixed_s=1e-4, draft_phase_s=draft, expert_bytes=1)


def test_balancer_slot_cap_is_fair_share_plus_what_others_leave():
    bal = Balancer(n_layers=2, n_slots=8, K=2, costs=costs(draft=0.1))   # link: ~100 transfers
    g, c = [0.0, 1e-5, 1e-5], [1e-5, 1e-4, 1e-4]
    levels = np.array([2] * 6 + [1] * 4)
    # layer 0 decides first: layer 1 claims nothing yet, so it may borrow all 8 slots
    bal.decide(0, levels, np.zeros(10, bool), g, c)
    assert bal.hot[0] == 8
    # layer 1 is guaranteed its fair share (4) although layer 0 claims 8
    bal.decide(1, levels, np.zeros(10, bool), g, c)
    assert bal.hot[1] == 4 and bal.tau[1] == 2
    # layer 0 re-decides: it now gets 8 - 4 = 4
    bal.decide(0, levels, np.zeros(10, bool), g, c)
    assert bal.hot[0] == 4 and bal.hot_sum == 8
    assert (bal.tau_lo, bal.tau_hi) == (2, 2)


def test_balancer_link_budget_counts_draft_phase_and_layers():
    bal = Balancer(n_layers=4, n_slots=100, K=1, costs=costs(draft=2e-3, transfer=1e-3))
    # window = draft + 3/4 of the estimated step's layers (4 x layer_fixed) = 2.3 ms -> 2.3 transfers
    assert bal.link_capacity() == pytest.approx(2.3)
    tau = bal.decide(0, np.array([1] * 5), np.zeros(5, bool), [0.0, 1e-6], [1e-4, 1e-4])
    assert tau == 1 and bal.hot[0] == 2 and bal.need[0] == 2


def test_static_tau_records_but_does_not_search():
    bal = Balancer(n_layers=1, n_slots=1, K=5, costs=costs(), static_tau=1)
    assert bal.decide(0, np.array([5, 4, 0]), np.zeros(3, bool), [0.0] * 6, [1.0] * 6) == 1
    assert bal.n_hot == 2


def test_empty_top_levels_change_nothing_to_the_bit():
    """choose_tau skips empty top levels: a case with E more empty levels on top (finite costs)
    gives the very same tuple, floats to the bit; only 'no level chosen' (tau = K + 1) moves up."""
    rng = np.random.default_rng(7)
    for _ in range(4000):
        K, levels, present, g, c, cap, budget = random_instance(rng)
        n_at, miss_at = per_level(levels, present, K)
        E = int(rng.integers(1, 4))
        more_g, more_c = rng.uniform(0, 1e-3, E).tolist(), rng.uniform(0, 1e-3, E).tolist()
        base = choose_tau(n_at, miss_at, g.tolist(), c.tolist(), cap, budget)
        tall = choose_tau(n_at + [0] * E, miss_at + [0] * E, g.tolist() + more_g, c.tolist() + more_c, cap, budget)
        want = (K + 1 + E, *base[1:]) if base[0] == K + 1 else base
        assert repr(tall) == repr(want)


def test_an_empty_top_level_with_a_non_finite_cost_is_not_skipped():
    """0 * inf is nan: an empty level whose GPU cost is not finite still enters T_gpu (as the plain
    walk over every level does), so the chosen tau reports a nan GPU time instead of a finite one."""
    n_at, miss_at = [2, 3, 1, 0], [2, 3, 1, 0]
    g, c = [1e-4, 1e-4, 1e-4, math.inf], [5e-3, 5e-3, 5e-3, 5e-3]
    tau, t_gpu, t_cpu, *_ = choose_tau(n_at, miss_at, g, c, cap=10, budget=10)
    assert tau <= 2 and math.isnan(t_gpu) and t_cpu < 6 * 5e-3
