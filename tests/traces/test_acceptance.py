"""The acceptance model: fitted decay, lengths, burstiness, early stop, record estimates."""
import numpy as np
import pytest

from traces.acceptance import (EAGLE3_LLAMACPP_CUMULATIVE, AcceptanceModel, alpha_for_length, fit_decay,
                               from_record)


def test_decay_fitted_to_eagle3_per_position_acceptance():
    # conditional rates 0.805, 0.632/0.805 = 0.7851, 0.483/0.632 = 0.7642: log-linear fit
    alpha, decay = fit_decay(EAGLE3_LLAMACPP_CUMULATIVE)
    assert alpha == pytest.approx(0.8053, abs=1e-3) and decay == pytest.approx(0.9744, abs=1e-3)


def test_expected_accepted_is_the_sum_of_cumulative_products():
    m = AcceptanceModel(0.8, decay=0.5)
    assert m.expected_accepted(3) == pytest.approx(0.8 + 0.8 * 0.4 + 0.8 * 0.4 * 0.2)


def test_alpha_for_length_round_trip():
    a = alpha_for_length(3.68, 7, 0.974)
    assert 1 + AcceptanceModel(a, 0.974).expected_accepted(7) == pytest.approx(3.68, abs=1e-9)
    with pytest.raises(ValueError):
        alpha_for_length(9.0, 7)


def test_sampled_mean_matches_expectation_with_states():
    m = AcceptanceModel(0.7, decay=0.95, spread=0.5, burst=0.8)
    draws = m.sample(np.random.default_rng(0), 20000, 6)
    assert np.mean([d.accepted for d in draws]) == pytest.approx(m.expected_accepted(6), rel=0.03)
    assert all(d.proposed == 6 and d.decodes == 6 for d in draws)


def _lag1(x):
    x = np.asarray(x, dtype=float)
    return np.corrcoef(x[:-1], x[1:])[0, 1]


def test_burst_makes_acceptance_come_in_runs():
    rng = np.random.default_rng(1)
    bursty = [d.accepted for d in AcceptanceModel(0.7, spread=0.9, burst=0.95).sample(rng, 6000, 8)]
    plain = [d.accepted for d in AcceptanceModel(0.7, spread=0.9, burst=0.0).sample(rng, 6000, 8)]
    assert _lag1(bursty) > 0.3 and abs(_lag1(plain)) < 0.05


def test_p_min_stops_early_and_keeps_the_likelier_drafts():
    rng = np.random.default_rng(2)
    full = AcceptanceModel(0.7, p_min=0.0).sample(rng, 4000, 8)
    cut = AcceptanceModel(0.7, p_min=0.9).sample(rng, 4000, 8)
    prop = np.array([d.proposed for d in cut])
    assert prop.mean() < 8 and all(d.decodes == min(8, d.proposed + (d.proposed < 8)) for d in cut)
    # of the drafts proposed, a larger share is accepted (calibrated confidence)
    share = lambda ds: sum(d.accepted for d in ds) / sum(d.proposed for d in ds)  # noqa: E731
    assert share(cut) > share(full)


def test_alpha_from_a_record_is_the_truncated_geometric_mle():
    assert from_record([2, 0, 3], gamma=3) == pytest.approx(5 / 7)


def test_bad_parameters_name_the_field():
    with pytest.raises(ValueError, match="acceptance.decay"):
        AcceptanceModel(0.5, decay=1.5)
