"""The architecture fields of each model preset's public ``config.json`` and its published sizes.

Every entry: the Hugging Face repository whose config.json the fields are copied from (only the
fields the derivation reads), the total / active parameter counts its model card or paper states,
and what that publisher counts as active: ``all`` weights a token touches (Qwen, Mistral,
Microsoft, AI2), ``no_embedding`` (OpenAI's gpt-oss card, DeepSeek's papers) or
``no_embedding_no_head`` (GLM-4.5: the only reading near its 12B; our inference). Round figures
(``3.3B``) carry their rounding: :func:`active_basis` and the tests compare them at the
published number of digits. ``conf/model/<name>.yaml`` presets are derived from these by :mod:`sim.machine.hf_config`.
"""
from __future__ import annotations

_QWEN3 = dict(model_type="qwen3_moe", vocab_size=151936, head_dim=128, num_key_value_heads=4, tie_word_embeddings=False)
_DSV2 = dict(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, first_k_dense_replace=1,
             vocab_size=102400, tie_word_embeddings=False)
_GPTOSS = dict(model_type="gpt_oss", hidden_size=2880, intermediate_size=2880, head_dim=64, num_attention_heads=64,
               num_key_value_heads=8, vocab_size=201088, sliding_window=128, num_experts_per_tok=4,
               attention_bias=True, tie_word_embeddings=False)

PRESETS = {
    "qwen3_30b_a3b": ("Qwen/Qwen3-30B-A3B", 30.5e9, 3.3e9, "all", dict(
        _QWEN3, hidden_size=2048, num_hidden_layers=48, num_attention_heads=32, moe_intermediate_size=768,
        intermediate_size=6144, num_experts=128, num_experts_per_tok=8)),
    "qwen3_235b_a22b": ("Qwen/Qwen3-235B-A22B", 235e9, 22e9, "all", dict(
        _QWEN3, hidden_size=4096, num_hidden_layers=94, num_attention_heads=64, moe_intermediate_size=1536,
        intermediate_size=12288, num_experts=128, num_experts_per_tok=8)),
    "qwen2_57b_a14b": ("Qwen/Qwen2-57B-A14B", 57.4e9, 14e9, "all", dict(
        model_type="qwen2_moe", hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
        moe_intermediate_size=2560, shared_expert_intermediate_size=20480, intermediate_size=18944, num_experts=64,
        num_experts_per_tok=8, vocab_size=151936, qkv_bias=True, tie_word_embeddings=False)),
    "qwen1_5_moe_a2_7b": ("Qwen/Qwen1.5-MoE-A2.7B", 14.3e9, 2.7e9, "all", dict(
        model_type="qwen2_moe", hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
        moe_intermediate_size=1408, shared_expert_intermediate_size=5632, intermediate_size=5632, num_experts=60,
        num_experts_per_tok=4, vocab_size=151936, qkv_bias=True, tie_word_embeddings=False)),
    "deepseek_v2_lite": ("deepseek-ai/DeepSeek-V2-Lite", 15.7e9, 2.4e9, "no_embedding", dict(
        _DSV2, model_type="deepseek_v2", hidden_size=2048, num_hidden_layers=27, num_attention_heads=16,
        num_key_value_heads=16, moe_intermediate_size=1408, intermediate_size=10944, n_routed_experts=64,
        n_shared_experts=2, num_experts_per_tok=6, q_lora_rank=None)),
    "deepseek_v2": ("deepseek-ai/DeepSeek-V2", 236e9, 21e9, "no_embedding", dict(
        _DSV2, model_type="deepseek_v2", hidden_size=5120, num_hidden_layers=60, num_attention_heads=128,
        num_key_value_heads=128, moe_intermediate_size=1536, intermediate_size=12288, n_routed_experts=160,
        n_shared_experts=2, num_experts_per_tok=6, q_lora_rank=1536)),
    "deepseek_v3": ("deepseek-ai/DeepSeek-V3", 671e9, 37e9, "no_embedding", dict(
        _DSV2, model_type="deepseek_v3", hidden_size=7168, num_hidden_layers=61, num_attention_heads=128,
        num_key_value_heads=128, moe_intermediate_size=2048, intermediate_size=18432, n_routed_experts=256,
        n_shared_experts=1, num_experts_per_tok=8, q_lora_rank=1536, first_k_dense_replace=3, vocab_size=129280)),
    "mixtral_8x7b": ("mistralai/Mixtral-8x7B-v0.1", 46.7e9, 12.9e9, "all", dict(
        model_type="mixtral", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=14336, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
        tie_word_embeddings=False)),
    "gpt_oss_20b": ("openai/gpt-oss-20b", 20.91e9, 3.61e9, "no_embedding", dict(
        _GPTOSS, num_hidden_layers=24, num_local_experts=32,
        layer_types=["sliding_attention", "full_attention"] * 12)),
    "gpt_oss_120b": ("openai/gpt-oss-120b", 116.83e9, 5.13e9, "no_embedding", dict(
        _GPTOSS, num_hidden_layers=36, num_local_experts=128,
        layer_types=["sliding_attention", "full_attention"] * 18)),
    "glm4_5_air": ("zai-org/GLM-4.5-Air", 106e9, 12e9, "no_embedding_no_head", dict(
        model_type="glm4_moe", hidden_size=4096, num_hidden_layers=46, num_attention_heads=96, num_key_value_heads=8,
        head_dim=128, moe_intermediate_size=1408, intermediate_size=10944, n_routed_experts=128, n_shared_experts=1,
        num_experts_per_tok=8, first_k_dense_replace=1, vocab_size=151552, attention_bias=True,
        tie_word_embeddings=False)),
    "phi3_5_moe": ("microsoft/Phi-3.5-MoE-instruct", 41.9e9, 6.6e9, "all", dict(
        model_type="phimoe", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=6400, num_local_experts=16, num_experts_per_tok=2, vocab_size=32064, attention_bias=True,
        lm_head_bias=True, tie_word_embeddings=False)),
    "olmoe_1b_7b": ("allenai/OLMoE-1B-7B-0924", 6.9e9, 1.3e9, "all", dict(
        model_type="olmoe", hidden_size=2048, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16,
        intermediate_size=1024, num_experts=64, num_experts_per_tok=8, vocab_size=50304, tie_word_embeddings=False)),
}


def active_basis(spec, convention: str) -> float:
    """The derived active count of ``spec`` under the publisher's ``convention``."""
    drop = {"all": 0, "no_embedding": spec.embed_params,
            "no_embedding_no_head": spec.embed_params + spec.lm_head_params}[convention]
    return spec.active_params - drop

# The checkpoint's formats (``precision`` = every weight unless ``quant`` / ``quant_dense`` say
# otherwise). The paper's three models keep f16, the format the original presets used.
FORMATS_OF = {
    "qwen3_30b_a3b": {"precision": "f16"},      # the paper's code path converts to GGUF f16
    "mixtral_8x7b": {"precision": "f16"},
    "deepseek_v2_lite": {"precision": "f16"},
    "deepseek_v3": {"precision": "fp8"},        # released in FP8 (128x128 block scales)
    "gpt_oss_20b": {"precision": "bf16", "quant": "mxfp4", "quant_dense": "bf16"},   # MXFP4 experts, BF16 rest
    "gpt_oss_120b": {"precision": "bf16", "quant": "mxfp4", "quant_dense": "bf16"},
}
