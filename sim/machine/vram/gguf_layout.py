"""Bytes per weight of each tensor group as the common GGUF files store it.

``llama_tensor_get_type`` (llama.cpp ``src/llama-quant.cpp``) gives a ``*_K_M`` file's ``attn_v`` and
``ffn_down`` (experts and shared experts included) the larger type in the layers ``use_more_bits``
selects (about half), ``output.weight`` Q6_K unless the file is Q8_0 or 16-bit, and every other
matrix the base type; norms and the router (``ffn_gate_inp``) stay F32. Tensor tables that confirm
it: unsloth Qwen3-30B-A3B Q4_K_M (``type f32: 241, q4_K: 289, q6_K: 49``: 24 ``attn_v`` + 24
``ffn_down_exps`` + ``output`` in Q6_K, ``token_embd`` Q4_K) and Qwen3-Coder-30B-A3B Q8_0
(``f32: 241, q8_0: 338``). gpt-oss MXFP4 (ggml-org/gpt-oss-20b-GGUF, ``f32: 289, q8_0: 98,
mxfp4: 72``): experts MXFP4, attention, ``token_embd`` and ``output`` Q8_0, router, expert biases,
attention biases, sinks and norms F32 — so a gpt-oss model whose non-expert weights are given as
the checkpoint's BF16 is stored with Q8_0 ones (``quant_dense=f16`` keeps the 16-bit F16 file).
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.machine.quant import K_MIXES as _BITS, bytes_per_weight   # (base, more-bits) bits of K mixes

_KEEP_OUTPUT = ("q8_0", "f16", "bf16", "f32")
_GGUF = ("f32", "f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "q3_k_m", "q2_k", "iq4_xs", "mxfp4")


@dataclass(frozen=True)
class GgufLayout:
    """Bytes per weight of: attention projections, shared experts, dense FFN layers, ``output``,
    ``token_embd``; F32 (4) for routers, norms, biases and sinks."""

    attention: float
    shared: float
    dense: float
    output: float
    embed: float
    small: float = 4.0


def dense_format(model) -> str:
    """The format of a GGUF file's non-expert matrices: gpt-oss's BF16 checkpoint weights are Q8_0
    in the common MXFP4 file; any other format is the model's own."""
    if model.expert_quant == "mxfp4" and model.dense_quant == "bf16":
        return "q8_0"
    return model.dense_quant


def _mixed(fmt: str, hi_share: float) -> float:
    """Bytes per weight of a group where ``hi_share`` of the weights sit in the more-bits layers' tensors."""
    base, hi = _BITS[fmt]
    return (base * (1 - hi_share / 2) + hi * hi_share / 2) / 8


def layout(model, v_share: float) -> GgufLayout:
    """The GGUF layout of ``model``; ``v_share`` is ``attn_v``'s share of one layer's attention weights."""
    fmt = dense_format(model)
    if fmt in _BITS:
        base = _BITS[fmt][0] / 8
        ffn = _mixed(fmt, 1 / 3)                      # ffn_down is one of three matrices
        return GgufLayout(_mixed(fmt, v_share), ffn, ffn, bytes_per_weight("q6_k"), base)
    b = bytes_per_weight(fmt)
    out = b if fmt in _KEEP_OUTPUT or fmt not in _GGUF else bytes_per_weight("q6_k")
    return GgufLayout(b, b, b, out, b)
