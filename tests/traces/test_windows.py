"""Verify windows built from token routing, an acceptance model, alternative rows or an SD record."""
import numpy as np
import pytest

from traces.schema import SDRecord, Trace
from traces.windows import build_schedule


def trace(T=30, L=3, E=10, k=2, alt=False, seed=0):
    rng = np.random.default_rng(seed)
    draw = lambda: np.stack([np.stack([rng.choice(E, k, replace=False) for _ in range(L)])  # noqa: E731
                             for _ in range(T)]).astype(np.int16)
    meta = dict(schema_version=1, model="t", n_layers=L, n_experts=E, top_k=k, source="synthetic")
    return Trace(meta=meta, experts=draw(), alt_experts=draw() if alt else None).validate()


def test_autoregressive_steps_are_one_hot_rows():
    tr = trace()
    s = build_schedule(tr, 0, 20)
    assert s.n_steps == 20 and list(s.produced) == [1] * 20 and s.mean_accepted == 0
    for t in range(20):
        for layer in range(3):
            assert set(np.flatnonzero(s.counts[t, layer])) == set(tr.experts[t, layer].tolist())


def test_full_acceptance_verifies_consecutive_real_tokens():
    tr = trace(alt=True)
    s = build_schedule(tr, 4, 20, acceptance=1.0)
    assert list(s.produced) == [5, 5, 5, 5] and s.mean_accepted == 4
    assert all((r == tr.experts[5 * i:5 * i + 5]).all() for i, r in enumerate(s.rows))
    assert int(s.counts.sum()) == 20 * 3 * 2


def test_rejected_drafts_use_alternative_rows():
    tr = trace(alt=True)
    s = build_schedule(tr, 4, 10, acceptance=0.0)  # nothing accepted: one token per step
    assert list(s.produced) == [1] * 10
    for t, rows in enumerate(s.rows):
        assert (rows[0] == tr.experts[t]).all()                 # the committed token
        assert (rows[1:] == tr.alt_experts[t + 1:t + 5]).all()  # four rejected drafts


def test_without_alternative_rows_next_real_tokens_stand_in():
    tr = trace(alt=False)
    s = build_schedule(tr, 4, 10, acceptance=0.0)
    assert (s.rows[3] == tr.experts[3:8]).all()


@pytest.mark.parametrize("acc", [0.3, 0.7, 0.9])
def test_tokens_produced_sum_exactly_and_acceptance_is_truncated_geometric(acc):
    tr = trace(T=4000, L=1, E=4, k=1, seed=1)
    s = build_schedule(tr, 6, 3900, acceptance=acc, seed=3)
    assert int(s.produced.sum()) == 3900
    expected = sum(acc ** i for i in range(1, 7))  # E[leading successes, capped at 6]
    assert s.mean_accepted == pytest.approx(expected, rel=0.06)


def test_recorded_sd_windows_are_used_when_gamma_matches():
    tr = trace(T=12)
    rows = np.stack([tr.experts[i:i + 3] for i in (0, 2, 5)])  # 3 steps, gamma 2
    tr.sd = SDRecord(2, rows, np.array([1, 2, 0], np.int16), np.array([3, 3, 3], np.int16))
    s = build_schedule(tr, 2, 6)
    assert list(s.produced) == [2, 3, 1] and (s.rows[1] == tr.experts[2:5]).all()
    other = build_schedule(tr, 3, 6, acceptance=1.0)  # another gamma: acceptance model
    assert list(other.produced) == [4, 2]
