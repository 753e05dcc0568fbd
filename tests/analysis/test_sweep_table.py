"""The sweep's table: order, grouping, summary, width, and the machine formats."""
from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from analysis.sweep_table import WIDTH, format_table, policy_table, summary
from sim.machine.specs import ConfigError
from tests.analysis.fixtures import row


@pytest.fixture
def rows():
    tps = {("moespac", "gsm8k"): 30.0, ("moespac", "mt_bench"): 20.0,
           ("llamacpp_sd", "gsm8k"): 10.0, ("llamacpp_sd", "mt_bench"): 10.0,
           ("hybrimoe", "gsm8k"): 40.0, ("hybrimoe", "mt_bench"): 20.0,
           ("oracle", "gsm8k"): 90.0, ("oracle", "mt_bench"): 70.0}
    out = [row("default", p, w, tps=v) for (p, w), v in tps.items()]
    out.append(row("default", "hybrimoe", "gsm8k", tps=20.0, seed=1))   # averaged with the seed-0 run
    return pd.DataFrame(out)


def test_rows_sorted_by_mean_real_policies_before_heuristics(rows):
    """The old name ``oracle`` of a result file is read as ``heuristic_oracle``, a heuristic."""
    t = policy_table(rows)
    assert list(t.index) == ["hybrimoe", "moespac", "llamacpp_sd", "heuristic_oracle"]
    assert list(t.columns) == ["group", "gsm8k", "mt_bench", "mean"]
    assert t.loc["hybrimoe", "gsm8k"] == 30.0 and t.loc["hybrimoe", "mean"] == 25.0
    assert list(t.group) == ["policy", "policy", "policy", "heuristic"]


def test_summary_compares_moespac_with_llamacpp_sd_and_never_names_a_bound(rows):
    s = summary(policy_table(rows), "default")
    assert "MoE-SpAc 25.00 tok/s vs llama.cpp-w/SD 10.00 tok/s" in s and "2.50x (+150%)" in s
    assert "fastest policy hybrimoe" in s and "oracle" not in s


def test_summary_without_the_pair_names_only_the_fastest(rows):
    s = summary(policy_table(rows[rows.policy != "llamacpp_sd"]), "x")
    assert s == "x: fastest policy hybrimoe (HybriMoE), 25.00 tok/s"


def test_text_fits_100_columns_with_every_default_policy_and_workload():
    from analysis.names import DISPLAY, WORKLOADS

    df = pd.DataFrame([row("default", p, w) for p in DISPLAY for w in WORKLOADS])
    text = format_table(df, "default")
    assert max(map(len, text.splitlines())) <= WIDTH
    lines = text.splitlines()
    lines = lines[next(i for i, l in enumerate(lines) if l.startswith("simulated tokens")):]   # after the setup
    assert lines[1].split() == ["policy", "gsm8k", "alpaca", "qa", "cnn_dm", "mtb", "h-eval", "mmlu", "mean"]
    heur = lines.index("heuristics" + lines[1][len("heuristics"):])
    assert {l.split()[0] for l in lines[heur + 1:heur + 3]} == {"heuristic_oracle", "heuristic_oracle_ar"}
    assert not any("oracle" in l.split()[0] for l in lines[2:heur - 1]) and lines[heur - 1] == ""


def test_machine_formats_carry_the_exact_numbers(rows):
    t = policy_table(rows)
    csv = pd.read_csv(io.StringIO(format_table(rows, "default", "csv")), index_col="policy")
    pd.testing.assert_frame_equal(csv, t.rename_axis("policy"), check_names=False)
    js = json.loads(format_table(rows, "default", "json"))
    assert js["rows"][0] == {"policy": "hybrimoe", "group": "policy", "gsm8k": 30.0, "mt_bench": 20.0, "mean": 25.0}
    md = format_table(rows, "default", "markdown").splitlines()
    assert md[0] == "| policy | group | gsm8k | mt_bench | mean |"
    assert md[2] == "| hybrimoe | policy | 30.00 | 20.00 | 25.00 |"


def test_unknown_format_is_a_config_error(rows):
    with pytest.raises(ConfigError, match="format: 'xml' is not one of text, csv, markdown, json"):
        format_table(rows, "default", "xml")


def test_text_names_the_setup_explains_the_columns_and_the_flat_rows(rows):
    flat = pd.concat([rows, pd.DataFrame([row("default", "vllm", w, tps=7.0) for w in ("gsm8k", "mt_bench")])])
    lines = format_table(flat, "default").splitlines()
    assert " ".join(l.strip() for l in lines[:2]) == ("setup: model qwen3_30b_a3b, machine rtx4090_pcie4, cache ratio 0.17, gamma 8 (speculative "
                        "policies), 512 generated tokens, seed 0,1")
    assert [l.split()[0] for l in lines[4:8]] == ["hybrimoe", "moespac", "llamacpp_sd*", "vllm*"]
    text = " ".join(l.strip() for l in lines)
    assert "mtb = mt_bench (MT-Bench multi-turn open-ended chat)" in text and "gsm8k = GSM8K" in text
    assert "* same speed on every workload (llamacpp_sd, vllm): its time per token does not depend" in text
    assert "fixed per-operation costs bind" in text
    assert "same speed" not in format_table(rows[rows.policy != "llamacpp_sd"], "default")
