"""The synthetic generator: shapes, metadata, determinism, names, workload presets."""
from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from traces.errors import TraceError
from traces.io import load_trace, save_trace
from traces.synth import (CONF_DIR, generator_params, list_models, list_workloads, synthesize,
                          workload_preset)

WORKLOADS = ["alpaca", "cnn_dm", "gsm8k", "humaneval", "mmlu_pro", "mt_bench", "qa"]
SHAPES = {"qwen3_30b_a3b": (48, 128, 8), "deepseek_v2_lite": (26, 64, 6), "mixtral_8x7b": (32, 8, 2)}


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_shapes_and_metadata(model, tmp_path):
    tr = synthesize(model, "gsm8k", 40, seed=3)
    L, E, k = SHAPES[model]
    assert tr.experts.shape == (40, L, k) and tr.experts.dtype == np.int16
    m = tr.meta
    assert (m["n_layers"], m["n_experts"], m["top_k"]) == (L, E, k)
    assert m["source"] == "synthetic" and m["workload"] == "gsm8k" and m["model"] == model
    assert m["acceptance"] == workload_preset("gsm8k")["acceptance"]
    g = m["generator"]
    assert g["seed"] == 3 and g["tokens"] == 40 and len(g["stickiness"]) == L
    assert {"shift_rate", "working_set", "zipf_exponent", "target_reuse", "target_entropy"} <= set(g)
    assert load_trace(save_trace(tr, tmp_path / "t.npz")).meta == m


def test_deepseek_records_its_dense_layer_and_shared_experts():
    m = synthesize("deepseek_v2_lite", "qa", 8).meta
    assert m["dense_layers"] == [0] and m["shared_experts"] == 2


def test_same_arguments_give_the_same_trace():
    a, b = synthesize("qwen3_30b_a3b", "humaneval", 300, 7), synthesize("qwen3_30b_a3b", "humaneval", 300, 7)
    np.testing.assert_array_equal(a.experts, b.experts)
    assert a.meta == b.meta


def test_seed_and_workload_change_the_trace():
    base = synthesize("qwen3_30b_a3b", "alpaca", 200, 0).experts
    assert not np.array_equal(base, synthesize("qwen3_30b_a3b", "alpaca", 200, 1).experts)
    # qa and alpaca share a domain (and its popular experts) but not the token draws
    assert not np.array_equal(base, synthesize("qwen3_30b_a3b", "qa", 200, 0).experts)


def test_a_shorter_trace_is_a_prefix_of_a_longer_one():
    long = synthesize("mixtral_8x7b", "gsm8k", 600, 2).experts
    short = synthesize("mixtral_8x7b", "gsm8k", 300, 2).experts
    np.testing.assert_array_equal(long[:300], short)


def test_unknown_model_lists_the_valid_ones():
    with pytest.raises(TraceError, match=r"field 'model': unknown model class 'gpt4'; valid: "
                                         r"deepseek_v2_lite, mixtral_8x7b, qwen3_30b_a3b"):
        synthesize("gpt4", "gsm8k", 8)
    assert list_models() == sorted(SHAPES)


def test_unknown_workload_lists_the_valid_ones():
    with pytest.raises(TraceError, match=r"field 'workload': unknown workload 'chess'; valid: "
                                         + ", ".join(WORKLOADS)):
        synthesize("qwen3_30b_a3b", "chess", 8)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many"])
def test_bad_token_counts_are_rejected(bad):
    with pytest.raises(TraceError, match=r"field 'tokens': must be an integer >= 1"):
        synthesize("qwen3_30b_a3b", "gsm8k", bad)


def test_negative_seed_is_rejected():
    with pytest.raises(TraceError, match=r"field 'seed': must be an integer >= 0"):
        synthesize("qwen3_30b_a3b", "gsm8k", 8, seed=-1)


def test_the_seven_presets_exist_with_flat_sourced_keys():
    assert list_workloads() == WORKLOADS
    for name in WORKLOADS:
        raw = OmegaConf.load(CONF_DIR / "workload" / f"{name}.yaml")
        p = workload_preset(name)
        assert p["name"] == name and float(raw.acceptance) == p["acceptance"]
        assert 0.5 < p["acceptance"] < 0.95
        assert 0 < p["shift_rate"] < 0.05 and 0.3 < p["overlap"] < 0.6 and 0.5 < p["entropy"] < 0.9
        for key in ("acceptance_source", "routing_source", "shift_rate_source", "description"):
            assert isinstance(p[key], str) and len(p[key]) > 20, (name, key)
        assert all(not isinstance(v, (dict, list)) for v in p.values()), name
        assert "estimate" in p["acceptance_source"]


def test_presets_map_to_the_published_domain_types():
    domain = {n: workload_preset(n)["domain"] for n in WORKLOADS}
    assert domain == {"alpaca": "general", "cnn_dm": "summarization", "gsm8k": "math", "humaneval": "coding",
                      "mmlu_pro": "planning", "mt_bench": "general", "qa": "general"}
    assert workload_preset("cnn_dm")["overlap"] == 0.502 and workload_preset("humaneval")["entropy"] == 0.808


def test_acceptance_ordering_follows_the_stated_reasoning():
    acc = {n: workload_preset(n)["acceptance"] for n in WORKLOADS}
    assert acc["humaneval"] > acc["gsm8k"] > acc["alpaca"] > acc["mt_bench"]
    assert acc["cnn_dm"] > acc["alpaca"] and min(acc, key=acc.get) == "mt_bench"


def test_a_preset_missing_acceptance_is_a_clear_error(tmp_path, monkeypatch):
    import traces.synth as synth

    (tmp_path / "workload").mkdir()
    (tmp_path / "workload" / "odd.yaml").write_text("name: odd\ndomain: general\noverlap: 0.4\n")
    monkeypatch.setattr(synth, "CONF_DIR", tmp_path)
    with pytest.raises(TraceError, match=r"odd\.yaml: field 'acceptance': missing from the workload preset"):
        workload_preset("odd")


def test_generator_targets_follow_the_workload():
    general = generator_params("qwen3_30b_a3b", "alpaca", 16)
    summ = generator_params("qwen3_30b_a3b", "cnn_dm", 16)
    assert np.mean(summ["target_reuse"]) > np.mean(general["target_reuse"]) + 0.05
    assert np.mean(summ["target_entropy"]) < np.mean(general["target_entropy"]) - 0.1
    assert np.mean(general["target_reuse"]) == pytest.approx(0.427, abs=0.005)
