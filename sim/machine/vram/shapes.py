"""Tensor shapes a memory plan needs that a :class:`sim.machine.specs.ModelSpec` holds only in aggregate:
layer count, vocabulary, K/V width, query width, attention heads, and the small F32 tensors.

The query width of a GQA layer follows from its projection count ``2 H q + 2 H kv``; the K/V width
from the KV bytes per token (16-bit, K and V). Attention heads are the query width over the head
size: 64 for gpt-oss (config.json ``head_dim``), 128 for the other supported families (Qwen3 MoE,
Mixtral, GLM-4.5; DeepSeek's MLA is priced by its latent).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shapes:
    """Per-model numbers for the VRAM terms (see the module docstring)."""

    layers: int
    vocab: int
    kv_width: float
    q_width: float
    heads: float
    small_params: float        # routers, norms, biases, sinks (F32 in GGUF files)
    dense_ffn_params: float    # all dense (non-MoE) layers' FFN weights


def shapes(m) -> Shapes:
    """The :class:`Shapes` of model spec ``m``."""
    layers = m.n_layers + m.n_dense_layers
    H = m.hidden
    kv_width = (m.kv_bytes_per_token + m.kv_swa_bytes_per_token) / (4 * layers)   # K or V elements per layer-token
    q_width = max(float(H), (m.attn_params_per_layer / H - 2 * kv_width) / 2) if m.attention == "gqa" else \
        m.attn_params_per_layer / (2 * H)
    head = 64 if "gpt_oss" in m.name.replace("-", "_") else 128
    dense = m.n_dense_layers * 3 * H * m.dense_intermediate
    small = (m.non_expert_params - layers * m.attn_params_per_layer - m.embed_params - m.lm_head_params
             - m.n_layers * m.shared_params - dense)
    return Shapes(layers, max(1, m.lm_head_params // H), kv_width, q_width, q_width / head, max(0.0, small), dense)
