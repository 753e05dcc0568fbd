"""MoE-SpAc's Speculative Utility Estimator: inertial transition, calibration, per-level statistics."""
import numpy as np
import pytest

from sim.policies.moespac.estimator import EstimatorConfig, UtilityEstimator, transition_table
from sim.policies.moespac.level_stats import LevelStats


def run_levels(est, counts_seq, n):
    """Levels of layer 0 after each window of ``counts_seq``."""
    out = []
    for c in counts_seq:
        est.update(0, np.asarray(c, dtype=np.uint8), n)
        out.append(est.rows[0].tolist())
    return out


def test_static_transition_step_by_step():
    """Authors' setting (U=5, D=1, K=5) on 9-token windows, one column per scenario:
    e0 climbs one level per window however many tokens it gets, caps at K, then decays one per
    window; e1 sits in the dead band; e2 never reaches the up-boundary."""
    est = UtilityEstimator(1, 3, EstimatorConfig(K=5, mode="static", up=5, down=1, n_max=9))
    seq = [[5, 5, 4], [9, 5, 4], [9, 6, 4], [9, 2, 4], [9, 5, 4], [9, 9, 4], [9, 9, 4], [2, 9, 0],
           [0, 9, 0], [0, 9, 0]]
    want = [[1, 1, 0],   # 5-0>=5: up; 5-0>=5: up; 4-0<5: stay
            [2, 1, 0],   # 9-1>=5 up; 5-1=4: dead band (s <= c <= s+4)
            [3, 2, 0],   # 9-2>=5 up; 6-1=5 up
            [4, 2, 0],   # 9-3 up; c=2=s: stay
            [5, 2, 0],   # 9-4=5 up (to K); 5-2=3 stay
            [5, 3, 0],   # at K: stays; 9-2=7 up
            [5, 4, 0],
            [4, 5, 0],   # 5-2>=1: down one (not to 2); 9-4=5 up
            [3, 5, 0],   # decays one level per window
            [2, 5, 0]]
    assert run_levels(est, seq, 9) == want


def test_static_preset_cannot_rise_in_short_windows():
    """U=5 with a 1-token window (AR): c - s <= 1 < 5, nothing ever becomes hot."""
    est = UtilityEstimator(1, 2, EstimatorConfig(mode="static", up=5, down=1, n_max=1))
    assert run_levels(est, [[1, 0]] * 5, 1)[-1] == [0, 0]


def test_up_boundary_follows_window_length():
    est = UtilityEstimator(1, 4, EstimatorConfig(mode="adaptive", u_frac0=0.5, gain=0.0, n_max=17))
    assert [est.boundaries(0, n) for n in (1, 3, 9, 17)] == [(1, 1), (2, 1), (5, 1), (9, 1)]


def test_adaptive_calibration_step_by_step():
    """Target one hot expert; gain ln 3 triples / thirds the up-fraction f per layer update
    (scope 'layer'); windows of n=3 tokens. f starts at the floor 0.5/n_max = 1/6 (U=1)."""
    est = UtilityEstimator(1, 4, EstimatorConfig(K=5, mode="adaptive", u_frac0=0.0, gain=np.log(3), target=1.0,
                           n_max=3, scope="layer"))
    steps = [([3, 2, 1, 0], 1, [1, 1, 1, 0]),   # U=ceil(3/6)=1: every requested expert rises
             ([3, 2, 1, 0], 2, [2, 1, 1, 0]),   # 3 hot > 1: f=1/2, U=2: only 3-1>=2 rises
             ([3, 0, 0, 0], 3, [2, 0, 0, 0]),   # f=1 (clamped), U=3: e0 in the dead band
             ([0, 3, 3, 0], 3, [1, 1, 1, 0])]   # 1 hot = target: f stays; 3-0>=3 rises
    for counts, U, levels in steps:
        est.update(0, np.array(counts, dtype=np.uint8), 3)
        assert est.last_up[0] == U
        assert est.rows[0].tolist() == levels
    assert est.frac[0] == pytest.approx(1.0)


def test_global_calibration_uses_total_hot_set():
    """Scope 'global': one up-fraction for all layers, fed by the total hot set."""
    est = UtilityEstimator(2, 4, EstimatorConfig(mode="adaptive", u_frac0=0.0, gain=1.0, target=1.0, n_max=9))
    f0 = est.f_glob
    est.update(0, np.array([2, 2, 2, 2], dtype=np.uint8), 9)     # 4 hot vs 2 wanted
    assert est.f_glob > f0
    assert est.boundaries(0, 9) == est.boundaries(1, 9)


def test_binary_mode_is_last_window_signal():
    est = UtilityEstimator(1, 4, EstimatorConfig(K=5, mode="binary"))
    assert run_levels(est, [[3, 0, 1, 0], [0, 0, 9, 1]], 9) == [[5, 0, 5, 0], [0, 0, 5, 5]]


def test_transition_table_equals_the_hand_table():
    """K=2, U=2, D=1, counts 0..3, by hand: up one if c - s >= 2, down one if s - c >= 1, else stay."""
    t = transition_table(2, 4, 2, 1).reshape(3, 4)
    assert t.tolist() == [[0, 0, 1, 1],
                          [0, 1, 1, 2],
                          [1, 1, 2, 2]]


def test_update_moves_every_expert_by_the_table_at_once():
    """128 experts in one call: each expert's new level is the table entry of (its level, its count)."""
    est = UtilityEstimator(1, 128, EstimatorConfig(mode="static", up=2, down=1, n_max=3))
    table = transition_table(5, est.W, 2, 1).reshape(6, est.W)
    rng = np.random.default_rng(2)
    for _ in range(10):
        before = est.rows[0].copy()
        c = rng.integers(0, 4, 128)
        est.update(0, c.astype(np.uint8), 3)
        assert est.rows[0].tolist() == table[before, c].tolist()


def test_level_stats_learn_request_probability_and_tokens():
    W = 64
    st = LevelStats(K=2, W=W, n_max=9, gpu_table=np.arange(W) * 1e-6, cpu_table=np.full(W, 1e-4),
                    decay=1.0)
    rng = np.random.default_rng(3)
    for _ in range(200):       # level 2 always requested with 4 tokens; level 0 with prob. 0.1
        lv = np.array([2] * 10 + [0] * 100)
        c = np.concatenate([np.full(10, 4), (rng.random(100) < 0.1).astype(int)])
        st.observe(lv * W + c)
    p, m = st.p_requested(), st.tokens_when_requested()
    assert p[2] == pytest.approx(1.0, abs=1e-3) and p[0] == pytest.approx(0.1, abs=0.01)
    assert m[2] == pytest.approx(4.0, abs=0.01) and m[0] == pytest.approx(1.0)
    g, c = st.expected_costs()
    assert g[2] == pytest.approx(p[2] * 4e-6, rel=1e-3) and c[0] == pytest.approx(p[0] * 1e-4)
