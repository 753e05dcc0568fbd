"""Type and range checks of the config.json fields that :mod:`sim.machine.hf_config` reads.

A field of the wrong type (``hidden_size: 2048.5``, ``tie_word_embeddings: "no"``) or outside its
range (``num_attention_heads: 0``, ``vocab_size: -5``) is refused in one line naming the file, the
field, the value and the allowed range, before anything is derived or priced. Integral floats
(``2048.0``) are accepted as integers. The bounds are generous around the largest published MoE
configs (Hugging Face config.json files: Qwen3-Next-80B-A3B has 512 routed experts, DeepSeek-V3 61
layers, hidden 7168 and 128 heads, Gemma-3 a 262144-token vocabulary); the expert count is capped
at 4096 because the simulator's per-expert state grows with it (a run of 4096 experts takes about
12 s on a 2-core machine; 10^7 took 91 s and then failed).
"""
from __future__ import annotations

from sim.machine.presets import MAX_EXPERTS
from sim.machine.values import Rule, UserInputError, check_value as check

_INT = {                          # field: (low, high); null allowed where the field is optional
    "num_hidden_layers": (1, 1024), "hidden_size": (1, 131072), "num_attention_heads": (1, 4096),
    "vocab_size": (1, 4194304), "num_experts_per_tok": (1, MAX_EXPERTS),
    "num_local_experts": (0, MAX_EXPERTS), "num_experts": (0, MAX_EXPERTS), "n_routed_experts": (0, MAX_EXPERTS),
    "num_key_value_heads": (1, 4096), "head_dim": (1, 16384), "intermediate_size": (0, 1048576),
    "moe_intermediate_size": (0, 1048576), "shared_expert_intermediate_size": (0, 1048576),
    "n_shared_experts": (0, 256), "first_k_dense_replace": (0, 1024), "moe_layer_freq": (1, 1024),
    "decoder_sparse_step": (1, 1024), "qk_nope_head_dim": (1, 16384), "qk_rope_head_dim": (1, 16384),
    "v_head_dim": (1, 16384), "kv_lora_rank": (1, 1048576), "q_lora_rank": (1, 1048576),
    "sliding_window": (0, 1 << 30),
}
_BOOL = ("tie_word_embeddings", "attention_bias", "qkv_bias", "use_qk_norm", "use_sliding_window", "lm_head_bias")
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size", "num_experts_per_tok")
MLA = ("deepseek_v2", "deepseek_v3")   # model types with multi-head latent attention (sim.machine.hf_config)
MLA_REQUIRED = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")


class ConfigFieldError(ValueError):
    """A config.json field of the wrong type or out of range (the message names file and field)."""


def check_fields(cfg: dict, where: str) -> dict:
    """``cfg`` with every known field checked (integral floats made ints); :class:`ConfigFieldError`
    naming ``where`` (the file) and the field otherwise. Fields absent here are left to
    :func:`sim.machine.hf_config.derive`, which names the missing ones."""
    out = dict(cfg)
    for key, (low, high) in _INT.items():
        if key in cfg:
            out[key] = _one(key, cfg[key], Rule("int", low, high, nullable=key not in REQUIRED), where)
    for key in _BOOL:
        if key in cfg:
            out[key] = _one(key, cfg[key], Rule("bool", nullable=True), where)
    if isinstance(out.get("num_experts_per_tok"), int):
        experts = max(out.get(k) or 0 for k in ("num_local_experts", "num_experts", "n_routed_experts"))
        if experts and out["num_experts_per_tok"] > experts:
            raise ConfigFieldError(f"{where}: field num_experts_per_tok={out['num_experts_per_tok']}: must be "
                                   f"at most the number of experts ({experts})")
    _check_layer_list(out, where)
    for key, kind in (("model_type", str), ("quantization_config", dict), ("layer_types", list)):
        if out.get(key) is not None and not isinstance(out[key], kind):
            raise ConfigFieldError(f"{where}: field {key}={out[key]!r}: must be a {kind.__name__}")
    if out.get("model_type") in MLA:
        missing = [k for k in MLA_REQUIRED if out.get(k) is None]
        if missing:
            raise ConfigFieldError(f"{where}: missing field(s) {missing} (MLA attention of {out['model_type']})")
    return out


def _one(key: str, value, rule: Rule, where: str):
    try:
        return check(key, value, rule)
    except UserInputError as exc:
        raise ConfigFieldError(f"{where}: field {exc}") from None


def _check_layer_list(cfg: dict, where: str) -> None:
    """``mlp_only_layers``: a list of layer indices in 0..num_hidden_layers-1."""
    layers, n = cfg.get("mlp_only_layers"), cfg.get("num_hidden_layers")
    if layers is None or not isinstance(n, int):
        return
    if not isinstance(layers, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n
                                           for i in layers):
        raise ConfigFieldError(f"{where}: field mlp_only_layers={layers!r}: must be a list of layer "
                               f"indices in 0..{n - 1}")
