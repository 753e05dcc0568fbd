"""The report never averages rows that differ in an identity field (QA cases G10, I4)."""
import json

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


def test_systems_on_different_runtimes_of_one_machine_are_one_setting():
    """llama.cpp and kTransformers rows of one machine differ in runtime fields, not in the machine."""
    parts = {"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}
    spec = lambda runtime, eff: json.dumps({"name": "rtx4090_pcie4", "parts": parts, "cpu_threads": 8,  # noqa: E731
                                            "vram_gib": 24.0, "runtime": runtime, "cpu_mem_eff": eff})
    a = _rows(spec=spec("llama_cpp", 0.68))
    b = [dict(row("default", "hybrimoe", "gsm8k"), hardware_spec=spec("ktransformers", 0.66), run_id="k")]
    other = [dict(row("default", "hybrimoe", "qa"), run_id="o",
                  hardware_spec=json.dumps({"name": "x", "parts": {**parts, "host": "desktop_ddr4_2ch"},
                                            "cpu_threads": 8, "vram_gib": 24.0}))]
    s = main_slice(pd.DataFrame(a + b + other))
    assert set(s.rows["policy"]) == {"moespac", "llamacpp_sd", "hybrimoe"} and len(s.rows) == 3
    assert "1 other settings" in s.note


def test_rows_of_one_policy_and_workload_that_differ_are_refused():
    a = _rows()
    b = [dict(r, run_id=r["run_id"] + "-K4", policy_params='{"K": 4}') for r in a]
    with pytest.raises(AnalysisError, match=r"rows of llamacpp_sd on gsm8k differ in \['policy_params'\]"):
        main_slice(pd.DataFrame(a + b))


def test_a_subset_of_workloads_is_not_compared_with_the_seven_workload_average():      # I4
    df = pd.DataFrame(_rows())
    text = "\n".join(paper_section(tps_by_workload(df)))
    assert "average of 7" not in text and "the results hold 1 of the paper's 7 workloads (gsm8k)" in text
