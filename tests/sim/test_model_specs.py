"""Model specs derived from config.json: presets, parameter counts, KV bytes, model=hf:PATH."""
import json
import math

import pytest

from sim.machine import specs as config
from sim.machine.specs import ConfigError
from sim.machine.hf_config import derive
from sim.machine.published import PRESETS, active_basis
from sim.machine.write_presets import preset_yaml

CLASSES = {"qwen3_moe": "Qwen3MoeConfig", "qwen2_moe": "Qwen2MoeConfig", "deepseek_v2": "DeepseekV2Config",
           "deepseek_v3": "DeepseekV3Config", "mixtral": "MixtralConfig", "gpt_oss": "GptOssConfig",
           "glm4_moe": "Glm4MoeConfig", "olmoe": "OlmoeConfig", "phimoe": "PhimoeConfig"}


def hf_config(fields: dict):
    """The transformers 5.x config object of a family, built from the published fields."""
    transformers = pytest.importorskip("transformers")
    kw = {k: v for k, v in fields.items() if k != "model_type"}
    return getattr(transformers, CLASSES[fields["model_type"]])(**kw)


def close(derived: float, published: float) -> bool:
    """Within 1%, or equal to the published figure at its printed digits (3.35 is "3.3B" truncated)."""
    if abs(derived / published - 1) <= 0.01:
        return True
    digits = len(f"{published / 1e9:g}".replace(".", "").lstrip("0"))
    unit = 10 ** (math.floor(math.log10(published)) - digits + 1)
    return abs(derived - published) < unit


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_file_is_the_derivation_of_its_config(name):
    path = config.CONF_DIR / "model" / f"{name}.yaml"
    assert path.read_text() == preset_yaml(name), "regenerate with python -m sim.machine.write_presets"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_derived_parameter_counts_match_the_published_ones(name):
    repo, total, active, basis, fields = PRESETS[name]
    cfg = hf_config(fields).to_dict()          # transformers' own view of the config, defaults filled
    spec = config.ModelSpec(**derive(cfg, name))
    assert close(spec.total_params, total), (spec.total_params, total)
    assert close(active_basis(spec, basis), active), (active_basis(spec, basis), active)


@pytest.mark.parametrize("name", ["qwen3_30b_a3b", "qwen1_5_moe_a2_7b", "deepseek_v2_lite", "deepseek_v3",
                                  "mixtral_8x7b", "gpt_oss_20b", "glm4_5_air", "phi3_5_moe", "olmoe_1b_7b"])
def test_derived_total_equals_the_transformers_module_count(name):
    """Brute force: instantiate the family's model on the meta device (2-3 layers, real widths)
    and count its parameters; the derivation must give exactly that number."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM

    fields = dict(PRESETS[name][4])
    dense = fields.get("first_k_dense_replace", 0)
    fields["num_hidden_layers"] = dense + 2
    if "layer_types" in fields:
        fields["layer_types"] = fields["layer_types"][:2]
    if name == "deepseek_v3":
        fields.update(n_routed_experts=16, first_k_dense_replace=1, num_hidden_layers=3)   # keep it small
    cfg = hf_config(fields)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    n = sum(p.numel() for p in model.parameters())
    spec = config.ModelSpec(**derive(cfg.to_dict(), name))
    assert spec.total_params == n


def test_kv_bytes_follow_attention_type():
    gqa, mla, swa = config.model("qwen3_30b_a3b"), config.model("deepseek_v3"), config.model("gpt_oss_20b")
    assert gqa.kv_bytes(4096) == 4096 * 48 * 2 * 4 * 128 * 2                # K and V, 4 kv heads x 128
    assert mla.kv_bytes(1000) == 1000 * 61 * (512 + 64) * 2                 # latent + rope key
    # gpt-oss: 12 full layers keep every token, 12 sliding layers at most 128
    assert swa.kv_bytes(4096) == 4096 * 12 * 2 * 8 * 64 * 2 + 128 * 12 * 2 * 8 * 64 * 2
    assert swa.kv_bytes(100) == 100 * 24 * 2 * 8 * 64 * 2


def test_unknown_family_names_the_missing_fields(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 4096,
                                                      "num_hidden_layers": 32}))
    with pytest.raises(ConfigError, match=r"missing field\(s\).*num_attention_heads.*num_experts_per_tok"):
        config.model(f"hf:{tmp_path}")


def test_hf_path_reads_the_checkpoint_format(tmp_path):
    fields = dict(PRESETS["gpt_oss_20b"][4])
    cfg = hf_config(fields).to_dict() | {"quantization_config": {"quant_method": "mxfp4"}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = config.model(f"hf:{tmp_path / 'config.json'}")
    assert (m.expert_quant, m.n_layers, m.n_experts, m.top_k, m.sliding_window) == ("mxfp4", 24, 32, 4, 128)
    assert config.model(f"hf:{tmp_path}", quant="q4_k_m").dense_quant == "q4_k_m"
