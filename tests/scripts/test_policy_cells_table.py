"""scripts/policy_cells.py's per-cell table: the best other policy is the best that is not ours
(spac_auto's own delegate AdaSpec is reported beside it), and the summary's geometric means."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd

_SPEC = importlib.util.spec_from_file_location("policy_cells", Path(__file__).parents[2] / "scripts" / "policy_cells.py")
pc = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(pc)


def _rows(cell: tuple, tps: dict) -> list[dict]:
    hw, model, workload = cell
    return [dict(hardware=hw, model=model, workload=workload, policy=p, tps=v, experiment="cells:same")
            for p, v in tps.items()]


def test_best_other_leaves_out_ours_and_the_oracles():
    df = pd.DataFrame(_rows(("m1", "qwen", "gsm8k"), {"spac_auto": 11.0, "adaspec": 12.0, "heuristic_oracle": 50.0,
                                                      "fate": 10.0, "ktransformers": 8.0})
                      + _rows(("m1", "qwen", "alpaca"), {"spac_auto": 9.0, "adaspec": 9.0, "hybrimoe": 10.0}))
    t = pc.table(pc.mode_rows(df, "same")).set_index("workload")
    assert t.loc["gsm8k", "best"] == "fate" and t.loc["gsm8k", "best_tps"] == 10.0
    assert math.isclose(t.loc["gsm8k", "ratio"], 1.1) and math.isclose(t.loc["gsm8k", "vs_adaspec"], 11 / 12)
    assert t.loc["alpaca", "best"] == "hybrimoe" and math.isclose(t.loc["alpaca", "ratio"], 0.9)
    line = pc.summary(t.reset_index())
    assert "geometric mean ours/best other 0.995" in line      # sqrt(1.1 x 0.9)
    assert "below 0.99: 1, at least 1: 1" in line
    assert "ours/AdaSpec geometric mean 0.957" in line          # sqrt(11/12 x 1)
