"""The report never averages rows that differ in an identity field (QA cases G10, I4)."""
import pandas as pd
import pytest

from analysis.load import AnalysisError, main_slice
from analysis.sections import paper_section
from analysis.tables import tps_by_workload
from tests.analysis.fixtures import row


def _rows(hardware="rtx4090_pcie4", spec="{}", run="a"):
    rows = [row("default", p, "gsm8k", hardware=hardware) for p in ("moespac", "llamacpp_sd")]
    return [dict(r, hardware_spec=spec, run_id=f"{run}-{r['policy']}") for r in rows]


def test_two_machines_are_grouped_apart_and_the_note_says_why():                      # G10
    df = pd.DataFrame(_rows() + _rows("rtx4090_pcie4[pcie_h2d_gbs=50]", '{"pcie_h2d_gbs": 50}', "b")
                      + [dict(_rows(run="c")[0], workload="qa", run_id="c-q")])
    s = main_slice(df)
    assert set(s.rows["hardware"]) == {"rtx4090_pcie4"} and len(s.rows) == 3
    assert "1 other settings of this experiment left out; they differ in hardware, hardware_spec" in s.note


def test_rows_of_one_policy_and_workload_that_differ_are_refused():
    a = _rows()
    b = [dict(r, run_id=r["run_id"] + "-K4", policy_params='{"K": 4}') for r in a]
    with pytest.raises(AnalysisError, match=r"rows of llamacpp_sd on gsm8k differ in \['policy_params'\]"):
        main_slice(pd.DataFrame(a + b))


def test_a_subset_of_workloads_is_not_compared_with_the_seven_workload_average():      # I4
    df = pd.DataFrame(_rows())
    text = "\n".join(paper_section(tps_by_workload(df)))
    assert "average of 7" not in text and "the results hold 1 of the paper's 7 workloads (gsm8k)" in text
