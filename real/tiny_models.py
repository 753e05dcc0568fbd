"""Tiny random-weight models for tests and dry runs: no downloads, deterministic from a seed.

``tiny:qwen3_moe`` and ``tiny:deepseek_v2`` are MoE targets built from the Hugging Face config
classes; ``tiny:dense`` is a dense Qwen3 draft. All three share one vocabulary and, for a given
seed, the SAME embedding and output tables. Their residual branches (attention ``o_proj``, MLP and
expert ``down_proj``, initialised with std 0.02) are multiplied by ``RESIDUAL_GAIN``, while the
shared embedding has std 1: the branches stay small enough that the logits are dominated by the
shared embedding -> lm_head path, so the draft's guesses are often accepted, and large enough that
the layers still move the logits, so some drafts are rejected (both cases are exercised).
Mean accepted drafts per step with ``tiny:dense`` (8 prompts x 128 tokens): about 3.1 at gamma 4
and 5.1-5.3 at gamma 8, for either target.
"""
from __future__ import annotations

import torch

VOCAB = 512
HIDDEN = 64
RESIDUAL_GAIN = 4.0
TINY_KINDS = ("qwen3_moe", "deepseek_v2", "dense")

_COMMON = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2,
               max_position_embeddings=4096, tie_word_embeddings=False, eos_token_id=None,
               bos_token_id=None, pad_token_id=None)


def tiny_config(kind: str):
    """The transformers config of one tiny model kind (see ``TINY_KINDS``)."""
    if kind == "qwen3_moe":
        from transformers import Qwen3MoeConfig
        return Qwen3MoeConfig(**_COMMON, head_dim=16, num_hidden_layers=4, intermediate_size=128,
                              moe_intermediate_size=32, num_experts=16, num_experts_per_tok=4,
                              norm_topk_prob=True)
    if kind == "deepseek_v2":
        from transformers import DeepseekV2Config
        kw = dict(_COMMON, num_key_value_heads=4)
        return DeepseekV2Config(**kw, num_hidden_layers=4, intermediate_size=128, moe_intermediate_size=32,
                                n_routed_experts=16, n_shared_experts=2, num_experts_per_tok=4,
                                first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=None,
                                qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=16,
                                topk_method="greedy", norm_topk_prob=False, routed_scaling_factor=1.0)
    if kind == "dense":
        from transformers import Qwen3Config
        return Qwen3Config(**_COMMON, head_dim=16, num_hidden_layers=2, intermediate_size=128)
    raise ValueError(f"unknown tiny model kind {kind!r}; choose one of {', '.join(TINY_KINDS)}")


def build_tiny(kind: str, seed: int = 0, dtype: torch.dtype = torch.float32):
    """Build the tiny ``kind`` model with weights drawn from ``seed`` (eval mode, on CPU)."""
    from transformers import AutoModelForCausalLM
    config = tiny_config(kind)
    config._experts_implementation = "eager"
    offset = TINY_KINDS.index(kind) + 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed * 1000 + offset)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    _install_shared_tables(model, seed)
    _scale_residual_branches(model, RESIDUAL_GAIN)
    return model.to(dtype).eval()


def _shared_tables(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The embedding and output tables every tiny model of this seed shares."""
    gen = torch.Generator().manual_seed(seed)
    embed = torch.randn(VOCAB, HIDDEN, generator=gen)
    head = torch.randn(VOCAB, HIDDEN, generator=gen) * 0.5
    return embed, head


def _install_shared_tables(model, seed: int) -> None:
    embed, head = _shared_tables(seed)
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(embed)
        model.get_output_embeddings().weight.copy_(head)


def _scale_residual_branches(model, factor: float) -> None:
    """Multiply every projection that writes into the residual stream by ``factor``."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight", "experts.down_proj")):
                param.mul_(factor)
