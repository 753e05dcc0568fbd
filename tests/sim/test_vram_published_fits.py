"""No published configuration that ran is predicted not to fit; a gpt-oss config.json plans as its preset."""
import json
from dataclasses import asdict

import pytest

from sim.machine import specs as config
from sim.machine.specs import ConfigError
from sim.machine.memory_plan import GIB, plan_memory
from sim.run.resolve import resolve
from sim.run.user_input import UserInputError, check
from sim.run.spec import RunSpec
from sim.machine.memory_plan import PlanOptions

SHORT = dict(workload="gsm8k", gen_tokens=8, prompt_tokens=64, draft="none", gamma=0)
RTX2080 = {"name": "rtx2080_box", "gpu": "rtx2080", "host": "hedt_ddr4_4ch", "link": "pcie3_x16"}
RTX4080 = {"name": "rtx4080_box", "gpu": "rtx4080", "host": "xeon_ddr5_8ch_2s", "link": "pcie4_x16"}

# huggingface.co/openai/gpt-oss-20b/raw/main/config.json (the fields this project reads and the rest)
GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
    "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12, "max_position_embeddings": 131072,
    "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
    "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": False, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                            "original_max_position_embeddings": 4096, "rope_type": "yarn",
                                            "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 201088}


@pytest.mark.parametrize("context", [4096, 32768])
def test_gpt_oss_20b_n_cpu_moe_12_fits_an_rtx2080(context):
    """gpt-oss-20b MXFP4 with ``--n-cpu-moe 12`` ran on an 8 GB RTX 2080. At llama-server's own default
    context (the model's 131072) its 3 GiB KV cache would not fit: ``--fit`` shrinks it."""
    r = resolve(RunSpec.of(policy="llamacpp", policy_args={"n_cpu_moe": 12}, hardware=RTX2080, model="gpt_oss_20b",
                quant="mxfp4", context=context, **SHORT))
    used = r.plan.vram - r.plan.free_for_experts + r.plan.n_slots * r.plan.expert_bytes
    assert r.plan.n_slots == 12 * 32 and used <= 8 * GIB
    assert r.plan.terms.host_weights == pytest.approx(201088 * 2880 * 34 / 32)   # token embedding Q8_0 on the host
    with pytest.raises(ConfigError, match="does not fit"):
        resolve(RunSpec.of(policy="llamacpp", policy_args={"n_cpu_moe": 12}, hardware=RTX2080, model="gpt_oss_20b",
                quant="mxfp4", context=131072, **SHORT))


REFUSED: dict = {}   # published runs the memory plan still refuses (none: C-6 fits since the CUDA context is per SM)


def _published_points():
    from sim.fidelity.points import load_points
    from sim.paths import CONF_DIR

    files = [CONF_DIR / "validation" / f for f in ("train.yaml", "holdout.yaml", "deferral.yaml")]   # collected.yaml: their raw source
    return {p.id: p for f in files for p in load_points(f).points}


def test_every_published_point_fits_but_the_named_ones():
    """Each point of conf/validation ran on its machine: its memory plan must fit. The ones the plan
    still refuses are named in REFUSED; one that starts fitting fails this test until it is removed."""
    from sim.fidelity.points import run_kwargs

    points = _published_points()
    assert len(points) >= 100 and set(REFUSED) <= set(points)
    fits = {}
    for pid, p in points.items():
        try:
            r = resolve(RunSpec.of(**run_kwargs(p.run, gen_tokens=8)))
            fits[pid] = r.plan.n_slots <= r.plan.max_slots and r.plan.free_for_experts >= 0
        except ConfigError:
            fits[pid] = False
    assert sorted(pid for pid, ok in fits.items() if not ok) == sorted(REFUSED)


def test_deepseek_v3_int4_ktransformers_fits_an_rtx4080():
    """DeepSeek-V3 with int4 routed experts on the CPU under kTransformers ran on a 16 GB RTX 4080
    (SGLang kt-kernel RFC, sgl-project/sglang issue 11425); its tutorial asks at least 14 GB."""
    r = resolve(RunSpec.of(policy="ktransformers", policy_args={"gpu_experts_per_layer": 0}, hardware=RTX4080,
                model="deepseek_v3", quant="int4", context=4096, **SHORT))
    used = r.plan.vram - r.plan.free_for_experts
    assert r.plan.n_slots == 0 and 10 * GIB < used <= 14 * GIB
    parts = dict(r.plan.terms.model)
    assert parts["output head"] == pytest.approx(926679040 * 2)                  # lm_head: no rule matches it
    assert set(parts) == {"attention, norms, router", "shared experts", "dense layers", "output head"}


def test_hf_gpt_oss_config_plans_as_its_preset_term_by_term(tmp_path):
    folder = tmp_path / "gpt-oss-20b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(GPT_OSS_20B))
    hf, preset = config.model(f"hf:{folder}", quant="mxfp4"), config.model("gpt_oss_20b", quant="mxfp4")
    assert (hf.quant, hf.quant_dense) == ("mxfp4", "bf16") == (preset.quant, preset.quant_dense)
    skip = {"name", "source"}
    assert {k: v for k, v in asdict(hf).items() if k not in skip} == \
        {k: v for k, v in asdict(preset).items() if k not in skip}
    d = config.draft("none")
    for runtime in ("llama_cpp", "custom_cuda"):
        hw = config.hardware(RTX2080, runtime=runtime)
        a, b = plan_memory(hw, hf, d, 0.5, opts=PlanOptions(check=False)), plan_memory(hw, preset, d, 0.5, opts=PlanOptions(check=False))
        for field in ("reserved", "non_expert", "draft", "kv", "workspace", "expert_bytes", "n_slots"):
            assert getattr(a, field) == getattr(b, field), (runtime, field)
        assert (a.terms is None and b.terms is None) or a.terms == b.terms
    # the generic plan prices the BF16 non-expert weights as the checkpoint stores them (3.35 GiB)
    generic = plan_memory(config.hardware(RTX2080, runtime="custom_cuda"), hf, d, 0.0)
    assert generic.non_expert / GIB == pytest.approx(3.349, abs=0.001)


def test_modules_to_not_convert_only_when_the_dense_modules_are_listed(tmp_path):
    cfg = dict(GPT_OSS_20B, quantization_config={"quant_method": "mxfp4"})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert config.model(f"hf:{tmp_path}").quant_dense is None          # dense then follows quant (mxfp4)
    assert config.model(f"hf:{tmp_path}").dense_quant == "mxfp4"
    assert config.model(f"hf:{tmp_path}", quant="q4_k_m").dense_quant == "q4_k_m"


def test_kv_cache_type_keys_are_checked_with_the_allowed_values():
    assert check("cache_type_k", "q8_0") == "q8_0" and check("cache_type_v", "iq4_nl") == "iq4_nl"
    with pytest.raises(UserInputError, match=r"cache_type_v='q3_k': must be one of f32, f16, bf16, q8_0, q4_0"):
        check("cache_type_v", "q3_k")
    with pytest.raises(UserInputError, match="flash_attn"):
        check("flash_attn", "yes")
    with pytest.raises(ConfigError, match="cache_type_k='int8'"):
        resolve(RunSpec.of(policy="llamacpp", hardware=RTX2080, model="gpt_oss_20b", cache_type_k="int8", **SHORT))
