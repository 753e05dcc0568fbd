"""Inputs that used to give a wrong answer without a word, or a traceback (QA cases K1-K21): each is
now right, or refused in one line naming the file or key, the value and the allowed range."""
import json

import pytest

from sim.machine import specs as config
from sim.machine.specs import ConfigError
from sim.machine.published import PRESETS

QWEN = dict(PRESETS["qwen3_30b_a3b"][4])


def _hf(tmp_path, text):
    (tmp_path / "config.json").write_text(text)
    return f"hf:{tmp_path}"


@pytest.mark.parametrize("patch,message", [
    ({"num_attention_heads": 0}, "field num_attention_heads=0: must be an integer in 1..4096"),      # was priced
    ({"hidden_size": 2048.5}, "field hidden_size=2048.5: must be an integer in 1..131072"),          # was priced
    ({"vocab_size": -5}, "field vocab_size=-5: must be an integer in 1..4194304"),                   # was priced
    ({"num_experts": 10 ** 7}, "field num_experts=10000000: must be an integer in 0..4096 or null"),  # was 91 s + traceback
    ({"num_experts_per_tok": 129}, "field num_experts_per_tok=129: must be at most the number of experts (128)"),
    ({"tie_word_embeddings": "no"}, "field tie_word_embeddings='no': must be true or false"),
    ({"num_hidden_layers": True}, "field num_hidden_layers=True: must be an integer in 1..1024"),
    ({"mlp_only_layers": [3, 48]}, "field mlp_only_layers=[3, 48]: must be a list of layer indices in 0..47"),
    ({"quantization_config": "fp8"}, "field quantization_config='fp8': must be a dict"),
])
def test_config_json_fields_are_type_and_range_checked(tmp_path, patch, message):
    with pytest.raises(ConfigError) as exc:
        config.model(_hf(tmp_path, json.dumps({**QWEN, **patch})))
    assert str(exc.value) == f"{tmp_path / 'config.json'}: {message}"


def test_config_json_integral_floats_are_the_integers(tmp_path):
    exact = config.model(_hf(tmp_path, json.dumps(QWEN)))
    assert (exact.n_layers, exact.n_experts, exact.top_k, exact.hidden) == (48, 128, 8, 2048)
    floats = config.model(_hf(tmp_path, json.dumps({**QWEN, "hidden_size": 2048.0, "num_experts": 128.0})))
    assert floats.expert_params == exact.expert_params and floats.non_expert_params == exact.non_expert_params


@pytest.mark.parametrize("text,message", [
    ('{"model_type": "qwen3_moe",', "not a readable JSON config (Expecting property name"),
    ("[1, 2]", "must hold a JSON object (a mapping of config fields), got [1, 2]"),
])
def test_a_malformed_config_json_is_refused_naming_the_file(tmp_path, text, message):
    with pytest.raises(ConfigError) as exc:
        config.model(_hf(tmp_path, text))
    assert str(exc.value).startswith(f"{tmp_path / 'config.json'}: {message}")


def test_mla_fields_missing_are_named(tmp_path):
    cfg = {**QWEN, "model_type": "deepseek_v3", "n_routed_experts": 8, "num_experts_per_tok": 2}
    with pytest.raises(ConfigError, match=r"missing field\(s\) \['qk_nope_head_dim', 'qk_rope_head_dim', "
                                          r"'v_head_dim', 'kv_lora_rank'\] \(MLA attention of deepseek_v3\)"):
        config.model(_hf(tmp_path, json.dumps(cfg)))


@pytest.mark.parametrize("field,value,message", [
    ("n_experts", 10 ** 7, "field 'n_experts' must be at most 4096, got 10000000"),   # was minutes, then killed
    ("top_k", 200, "field 'top_k' must be at most n_experts (128), got 200"),
])
def test_a_preset_model_changed_on_the_command_line_has_the_same_bounds(field, value, message):
    with pytest.raises(ConfigError) as exc:
        config.model({**config.load_preset("model", "qwen3_30b_a3b"), field: value})
    assert str(exc.value).endswith(message)
