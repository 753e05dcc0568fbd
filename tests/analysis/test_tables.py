"""Tables on a hand-made DataFrame: averages, speedups, diff%, oracle fraction, slices."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis import paper
from analysis.load import main_slice
from analysis.tables import (AVERAGE, ablation_table, diagnostics, diff_pct, oracle_fraction, paper_comparison,
                             speedup_matrix, standard_speedup, tps_by_workload)
from tests.analysis.fixtures import row


@pytest.fixture
def hand():
    rows = [row("paper_qwen3", "moespac", "gsm8k", tps=20.0), row("paper_qwen3", "moespac", "mt_bench", tps=30.0),
            row("paper_qwen3", "llamacpp_sd", "gsm8k", tps=10.0),
            row("paper_qwen3", "llamacpp_sd", "mt_bench", tps=20.0),
            row("paper_qwen3", "heuristic_oracle", "gsm8k", tps=40.0), row("paper_qwen3", "heuristic_oracle", "mt_bench", tps=60.0),
            # a duplicate run (e.g. a resumed sweep) is averaged, not double counted
            row("paper_qwen3", "heuristic_oracle", "mt_bench", tps=60.0, seed=1)]
    return pd.DataFrame(rows)


def test_tps_table_averages_over_workloads(hand):
    t = tps_by_workload(hand)
    assert list(t.columns) == ["moespac", "llamacpp_sd", "heuristic_oracle"]
    assert list(t.index) == ["gsm8k", "mt_bench", AVERAGE]
    assert t.loc[AVERAGE].to_dict() == {"moespac": 25.0, "llamacpp_sd": 15.0, "heuristic_oracle": 50.0}


def test_speedup_matrix(hand):
    m = speedup_matrix(tps_by_workload(hand).loc[AVERAGE])
    assert m.at["moespac", "llamacpp_sd"] == pytest.approx(25 / 15)
    assert m.at["llamacpp_sd", "moespac"] == pytest.approx(15 / 25)
    assert m.at["heuristic_oracle", "heuristic_oracle"] == 1.0


def test_diff_pct_and_paper_comparison(hand):
    assert diff_pct(25.0, 20.0) == pytest.approx(25.0)
    c = paper_comparison(tps_by_workload(hand)).set_index(["policy", "workload"])
    assert c.at[("moespac", AVERAGE), "diff_pct"] == pytest.approx((25.0 / 25.06 - 1) * 100)
    assert c.at[("llamacpp_sd", AVERAGE), "paper"] == 17.66
    assert c.at[("moespac", "mt_bench"), "diff_pct"] == pytest.approx((30.0 / 24.1 - 1) * 100)
    assert math.isnan(c.at[("hybrimoe", AVERAGE), "simulated"])


def test_oracle_fraction(hand):
    o = oracle_fraction(tps_by_workload(hand).loc[AVERAGE])
    assert o.at["moespac", "fraction of heuristic oracle (SD)"] == pytest.approx(0.5)
    assert o.at["llamacpp_sd", "fraction of heuristic oracle (SD)"] == pytest.approx(0.3)


def test_standard_speedup_uses_present_baselines(hand):
    s = standard_speedup(tps_by_workload(hand).loc[AVERAGE])
    assert s["mean"] == pytest.approx(25 / 15) and s["geomean"] == pytest.approx(25 / 15)
    assert "hybrimoe" in s["missing"] and "llamacpp_sd" not in s["missing"]


def test_standard_speedup_is_arithmetic_mean_of_ratios():
    avg = pd.Series({"moespac": 12.0, "llamacpp_sd": 6.0, "llamacpp": 3.0})
    s = standard_speedup(avg)
    assert s["mean"] == pytest.approx((2 + 4) / 2)
    assert s["geomean"] == pytest.approx(math.sqrt(8))


def test_published_numbers_reproduce_the_headline_ratio():
    r = paper.AVG_TPS["moespac"].value / paper.AVG_TPS["llamacpp_sd"].value
    assert r == pytest.approx(paper.SPEEDUP_OVER_SD.value, abs=0.005)
    assert 3.0 < paper.implied_unpublished_mean_speedup() < 6.0


def test_ablation_and_diagnostics(hand):
    extra = pd.DataFrame([row("paper_qwen3", "moespac_sync", w, tps=t)
                          for w, t in (("gsm8k", 15.0), ("mt_bench", 25.0))])
    df = pd.concat([hand, extra], ignore_index=True)
    a = ablation_table(tps_by_workload(df).loc[AVERAGE])
    assert a.at["moespac_sync", "change_pct"] == pytest.approx(-20.0)
    d = diagnostics(df)
    assert d.at["moespac", "bubble_share"] == pytest.approx(0.1)
    assert d.at["moespac", "pcie_mb_per_token"] == pytest.approx(3e3 / 512)


def test_main_slice_prefers_paper_experiment_and_gamma_8(hand):
    other = pd.DataFrame([row("sweep_gamma", "moespac", "gsm8k", gamma=4, tps=99.0),
                          row("paper_qwen3", "moespac", "gsm8k", gamma=4, tps=99.0)])
    s = main_slice(pd.concat([hand, other], ignore_index=True).assign(source="sim"))
    assert set(s.rows["experiment"]) == {"paper_qwen3"}
    assert 99.0 not in set(s.rows["tps"])
    assert "gamma=8" in s.note
