"""A :class:`sim.machine.specs.ModelSpec` derived from a Hugging Face ``config.json`` (plain json, no transformers).

Supported ``model_type``s: qwen3_moe, qwen2_moe (Qwen1.5/Qwen2 MoE), deepseek_v2, deepseek_v3 (MLA
attention, shared experts, dense first layers), mixtral, gpt_oss (expert biases, attention sinks,
alternating sliding-window attention), glm4_moe, olmoe, phimoe. Parameter counts follow the module
layout of the matching transformers 5.x ``modeling_*.py`` (multi-token-prediction layers are not
part of those models and are not counted); tests check them against ``torch.device("meta")``
instantiations and the published totals. KV bytes assume a 16-bit KV cache (MLA: the compressed
latent plus the rope key, as vLLM, SGLang and kTransformers cache it).
"""
from __future__ import annotations

import json
from pathlib import Path

from sim.machine.attention import per_token_flops
from sim.machine.hf_check import MLA, REQUIRED   # the families and fields config.json must give

KV_BYTES = 2            # 16-bit KV cache
DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}
KNOWN = ("qwen3_moe", "qwen2_moe", "deepseek_v2", "deepseek_v3", "mixtral", "gpt_oss", "glm4_moe", "olmoe", "phimoe")


class UnsupportedConfig(ValueError):
    """A config.json this module cannot turn into a model spec; the message names what is missing."""


def read_config(path) -> dict:
    """The JSON of ``path`` (a config.json, or a folder holding one); a multimodal config's text part."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise UnsupportedConfig(f"model=hf:{path}: no config.json there")
    from sim.machine.hf_check import ConfigFieldError, check_fields

    try:
        cfg = json.loads(p.read_text())
    except (ValueError, OSError) as exc:   # bad JSON, not UTF-8, unreadable
        raise UnsupportedConfig(f"{p}: not a readable JSON config ({exc})") from None
    cfg = cfg.get("text_config", cfg) if isinstance(cfg, dict) and "num_hidden_layers" not in cfg else cfg
    if not isinstance(cfg, dict):
        raise UnsupportedConfig(f"{p}: must hold a JSON object (a mapping of config fields), got {cfg!r:.60}")
    try:
        return check_fields(cfg, str(p))
    except ConfigFieldError as exc:
        raise UnsupportedConfig(str(exc)) from None


def _experts(c: dict) -> int:
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if c.get(key):
            return int(c[key])
    return 0


def _moe_layers(c: dict, t: str) -> list[bool]:
    """Which decoder layers are MoE layers."""
    L = c["num_hidden_layers"]
    if t in ("deepseek_v2", "deepseek_v3", "glm4_moe"):
        k, step = c.get("first_k_dense_replace", 0) or 0, c.get("moe_layer_freq", 1) or 1
        return [i >= k and i % step == 0 for i in range(L)]
    if t in ("qwen2_moe", "qwen3_moe"):
        step, dense = c.get("decoder_sparse_step", 1) or 1, set(c.get("mlp_only_layers") or [])
        return [i not in dense and (i + 1) % step == 0 for i in range(L)]
    return [True] * L


def _attention(c: dict, t: str) -> tuple[int, int, int, int]:
    """(projection weights, other weights (norms, biases, sinks), KV bytes per token, score + value
    FLOPs per query and context token (:func:`sim.machine.attention.per_token_flops`)) of one layer."""
    H, nh = c["hidden_size"], c["num_attention_heads"]
    if t in MLA:
        nope, rope, vd, kvr, qr = (c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"],
                                   c["kv_lora_rank"], c.get("q_lora_rank"))
        q = H * nh * (nope + rope) if not qr else H * qr + qr * nh * (nope + rope)
        proj = q + H * (kvr + rope) + kvr * nh * (nope + vd) + nh * vd * H
        return proj, kvr + (qr or 0), (kvr + rope) * KV_BYTES, per_token_flops(True, nh, kv_lora=kvr, rope=rope)
    hd = c.get("head_dim") or H // nh
    kv = c.get("num_key_value_heads") or nh
    proj = 2 * H * nh * hd + 2 * H * kv * hd
    other = 0
    if c.get("qkv_bias") or (c.get("attention_bias") and t in ("glm4_moe",)):
        other += nh * hd + 2 * kv * hd                      # q, k, v biases
    elif c.get("attention_bias"):
        other += nh * hd + 2 * kv * hd + H                  # q, k, v, o biases (gpt-oss, phimoe)
    if t == "qwen3_moe" or (t == "glm4_moe" and c.get("use_qk_norm")):
        other += 2 * hd                                     # per-head q/k RMSNorm
    if t == "olmoe":
        other += nh * hd + kv * hd                          # full-width q/k RMSNorm
    if t == "gpt_oss":
        other += nh                                         # attention sinks
    return proj, other, 2 * kv * hd * KV_BYTES, per_token_flops(False, nh, head_dim=hd)


def _expert(c: dict, t: str) -> tuple[int, int]:
    """(FFN width, weights) of one routed expert."""
    H = c["hidden_size"]
    inter = c["intermediate_size"] if t in ("mixtral", "phimoe", "gpt_oss", "olmoe") else c.get("moe_intermediate_size")
    if not inter:
        raise UnsupportedConfig("config.json: missing field(s) ['moe_intermediate_size']")
    bias = 2 * inter + H if t == "gpt_oss" else 0           # gate_up and down biases
    return inter, 3 * H * inter + bias


def _shared(c: dict, t: str) -> tuple[int, int, int]:
    """(count, width of one, extra weights) of a layer's shared experts."""
    if t == "qwen2_moe":
        return 1, c["shared_expert_intermediate_size"], c["hidden_size"]   # + shared_expert_gate
    n = int(c.get("n_shared_experts") or 0)
    return n, c.get("moe_intermediate_size", 0), 0


def _sliding(c: dict, t: str) -> int:
    """How many layers use sliding-window attention."""
    types = c.get("layer_types") or []
    if types:
        if any(x not in ("full_attention", "sliding_attention") for x in types):
            raise UnsupportedConfig(f"config.json: layer_types {sorted(set(types))}: only full and sliding "
                                    "attention are modelled (linear-attention hybrids are not)")
        return sum(x == "sliding_attention" for x in types)
    if t == "gpt_oss":
        return c["num_hidden_layers"] // 2
    return c["num_hidden_layers"] if c.get("sliding_window") and c.get("use_sliding_window", t == "mixtral") else 0


def derive(c: dict, name: str, source: str = "") -> dict:
    """ModelSpec fields from config.json ``c``; unknown families need the generic fields."""
    t = c.get("model_type", "")
    missing = [k for k in REQUIRED if k not in c] + ([] if _experts(c) else ["num_local_experts|num_experts|n_routed_experts"])
    if missing:
        raise UnsupportedConfig(f"config.json (model_type {t!r}): missing field(s) {missing}; "
                                f"families known by name: {', '.join(KNOWN)}")
    H, V, L, E = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"], _experts(c)
    moe = _moe_layers(c, t)
    n_moe = sum(moe)
    inter, expert = _expert(c, t)
    n_sh, sh_inter, sh_extra = _shared(c, t)
    proj, attn_other, kv, attn_flops = _attention(c, t)
    ln = 4 * H if t == "phimoe" else 2 * H                  # two norms per layer (LayerNorm has a bias)
    router = H * E + (E if t == "gpt_oss" else 0)
    dense_inter = int(c.get("intermediate_size") or 0) if n_moe < L else 0
    per_moe = router + n_sh * 3 * H * sh_inter + sh_extra
    tied = bool(c.get("tie_word_embeddings", False))
    head = V * H + (V if c.get("lm_head_bias") else 0)
    non_expert = (L * (proj + attn_other + ln) + n_moe * per_moe + (L - n_moe) * 3 * H * dense_inter
                  + (0 if tied else V * H) + head + (2 * H if t == "phimoe" else H))
    n_swa = 0 if t in MLA else _sliding(c, t)
    window = int(c.get("sliding_window") or 0) if n_swa else 0
    return dict(
        name=name, n_layers=n_moe, n_dense_layers=L - n_moe, n_experts=E, top_k=int(c["num_experts_per_tok"]),
        n_shared_experts=n_sh, hidden=H, moe_intermediate=inter, expert_params=expert,
        non_expert_params=float(non_expert), attn_params_per_layer=proj, lm_head_params=head,
        kv_bytes_per_token=(L - n_swa) * kv, kv_swa_bytes_per_token=n_swa * kv, sliding_window=window,
        attn_flops_per_token=(L - n_swa) * attn_flops, attn_swa_flops_per_token=n_swa * attn_flops,
        shared_intermediate=sh_inter if n_sh else 0, dense_intermediate=dense_inter,
        embed_params=0 if tied else V * H, attention="mla" if t in MLA else "gqa",
        source=source or f"config.json model_type={t}")


def from_path(path: str) -> dict:
    """ModelSpec fields of the config.json at ``path`` (named after its folder)."""
    p = Path(path)
    name = (p if p.is_dir() else p.parent).name or "hf"
    cfg = read_config(path)
    spec = derive(cfg, f"hf:{name}", source=f"hf:{path}")
    dtype = cfg.get("dtype") or cfg.get("torch_dtype")
    spec["precision"] = DTYPES.get(dtype, "bf16")
    qc = cfg.get("quantization_config") or {}
    if qc.get("quant_method") in ("mxfp4", "fp8"):
        spec["quant"] = qc["quant_method"]   # the checkpoint's expert format (gpt-oss: MXFP4, DeepSeek-V3: FP8)
        if keeps_dense(qc.get("modules_to_not_convert")):
            spec["quant_dense"] = spec["precision"]
    return spec


def keeps_dense(modules) -> bool:
    """Whether ``quantization_config.modules_to_not_convert`` keeps the non-expert weights in the
    checkpoint's dtype: gpt-oss lists ``model.layers.*.self_attn``, ``model.layers.*.mlp.router``,
    ``model.embed_tokens`` and ``lm_head`` (huggingface.co/openai/gpt-oss-20b config.json), so only
    its experts are MXFP4."""
    names = " ".join(modules or [])
    return "self_attn" in names and ("lm_head" in names or "embed_tokens" in names)
