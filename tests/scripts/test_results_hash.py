"""scripts/results_hash.py: row order and wall time do not matter, one float bit does."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd

from tests.analysis.fixtures import row

_SPEC = importlib.util.spec_from_file_location("results_hash", Path(__file__).parents[2] / "scripts" / "results_hash.py")
rh = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(rh)


def _frame():
    rows = [dict(row("default", p, w), sim_wall_s=1.0, by_layer=np.array([0.5, float("nan")]))
            for p in ("moespac", "llamacpp_sd") for w in ("gsm8k", "qa")]
    return pd.DataFrame(rows)


def test_order_and_wall_time_do_not_change_the_hash():
    df = _frame()
    cols = [c for c in df.columns if c != "sim_wall_s"]
    other = df.iloc[::-1].assign(sim_wall_s=9.0)
    assert rh.results_hash(df, cols) == rh.results_hash(other, cols)


def test_one_ulp_in_one_cell_changes_the_hash_and_is_named():
    df = _frame()
    cols = [c for c in df.columns if c != "sim_wall_s"]
    bumped = df.copy()
    bumped.loc[2, "tps"] = math.nextafter(bumped.loc[2, "tps"], math.inf)
    assert rh.results_hash(df, cols) != rh.results_hash(bumped, cols)
    assert rh.first_difference(bumped, df, cols).startswith("tps differs at")
    assert rh.first_difference(df, df, cols) == "no cell differs"
