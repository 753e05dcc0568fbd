"""Weight formats: bits per weight including scales, each from the format's definition.

A format here is only storage: bytes per weight drive memory, transfers and bandwidth-bound compute.
How fast a device runs a format (dequantisation, formats a device cannot run natively) is the
runtime profile's business (``conf/runtime``, ``gpu_quant_eff`` / ``cpu_quant_eff``), not the
format's. Sources are listed per format and in docs/sources.md.

GGUF block sizes are from ggml's ``ggml-common.h`` block structs (github.com/ggml-org/ggml):
``block_q8_0`` 34 B / 32 weights, ``block_q4_0`` 18 B / 32, ``block_q6_K`` 210 B / 256,
``block_q5_K`` 176 B / 256, ``block_q4_K`` 144 B / 256, ``block_q3_K`` 110 B / 256,
``block_q2_K`` 84 B / 256, ``block_iq4_xs`` 136 B / 256. The ``_K_M`` names are llama.cpp file
types that mix block types per tensor; ``llama_tensor_get_type`` (src/llama-quant.cpp) gives an
MoE FFN's ``ffn_down`` the larger type in the layers ``use_more_bits`` selects (about half of
them) and ``ffn_gate``/``ffn_up`` the base type, so an expert averages (2 base + mixed down) / 3.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuantFormat:
    """One weight format: ``bits`` per weight including its scales/zeros, and the definition cited."""

    name: str
    bits: float
    source: str

    @property
    def bytes_per_weight(self) -> float:
        return self.bits / 8.0


def _mix(base: float, down_hi: float, down_share: float = 0.5) -> float:
    """Bits of an expert whose gate/up use ``base`` and ``down_share`` of whose down tensors use ``down_hi``."""
    return (2 * base + (1 - down_share) * base + down_share * down_hi) / 3


_Q4K, _Q5K, _Q6K, _Q3K = 144 * 8 / 256, 176 * 8 / 256, 210 * 8 / 256, 110 * 8 / 256
K_MIXES = {"q4_k_m": (_Q4K, _Q6K), "q5_k_m": (_Q5K, _Q6K), "q3_k_m": (_Q3K, _Q4K)}   # (base, more-bits) bits of a _K_M file
_GGML = "ggml-common.h block struct"
_MIX = "llama.cpp llama_tensor_get_type (ffn_down in use_more_bits layers)"

FORMATS = {f.name: f for f in (
    QuantFormat("f32", 32.0, "IEEE 754 binary32"),
    QuantFormat("f16", 16.0, "IEEE 754 binary16"),
    QuantFormat("bf16", 16.0, "bfloat16 (Google Brain float); 8-bit exponent, 7-bit mantissa"),
    QuantFormat("fp8", 8.0, "OCP 8-bit floating point (E4M3); per-tensor or 128x128-block scales add <0.01 bit"),
    QuantFormat("q8_0", 34 * 8 / 32, f"{_GGML}: block_q8_0 = fp16 scale + 32 int8 (34 B / 32)"),
    QuantFormat("q6_k", _Q6K, f"{_GGML}: block_q6_K 210 B / 256"),
    QuantFormat("q5_k_m", _mix(*K_MIXES["q5_k_m"]), f"{_GGML}: block_q5_K 176 B / 256; {_MIX} -> Q6_K"),
    QuantFormat("q4_k_m", _mix(*K_MIXES["q4_k_m"]), f"{_GGML}: block_q4_K 144 B / 256; {_MIX} -> Q6_K"),
    QuantFormat("q4_0", 18 * 8 / 32, f"{_GGML}: block_q4_0 = fp16 scale + 32 x 4 bit (18 B / 32)"),
    QuantFormat("q3_k_m", _mix(*K_MIXES["q3_k_m"], 1.0), f"{_GGML}: block_q3_K 110 B / 256; {_MIX}: all ffn_down -> Q4_K"),
    QuantFormat("q2_k", 84 * 8 / 256, f"{_GGML}: block_q2_K 84 B / 256 (block type; the file type raises some tensors)"),
    QuantFormat("iq4_xs", 136 * 8 / 256, f"{_GGML}: block_iq4_xs 136 B / 256"),
    QuantFormat("mxfp4", (32 * 4 + 8) / 32, "OCP Microscaling spec v1.0: 32 x FP4 E2M1 + one E8M0 scale"),
    QuantFormat("nvfp4", (16 * 4 + 8) / 16, "NVIDIA NVFP4: 16 x FP4 E2M1 + one FP8 E4M3 scale (per-tensor FP32 negligible)"),
    QuantFormat("int4", 4 + 16 / 128, "GPTQ/Marlin symmetric int4, group 128, one fp16 scale per group"),
    QuantFormat("hqq2", 2 + 32 / 64, "HQQ (mobiusml/hqq) BaseQuantizeConfig group_size=64, fp16 scale + zero"),
    QuantFormat("hqq3", 3 + 32 / 64, "HQQ (mobiusml/hqq) BaseQuantizeConfig group_size=64, fp16 scale + zero"),
    QuantFormat("hqq4", 4 + 32 / 64, "HQQ (mobiusml/hqq) BaseQuantizeConfig group_size=64, fp16 scale + zero"),
)}


def quant_format(name: str) -> QuantFormat:
    """The format called ``name``; an unknown name raises ``KeyError`` listing the valid ones."""
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown quant {name!r}; valid: {', '.join(FORMATS)}") from None


def bytes_per_weight(name: str) -> float:
    """Bytes per weight of format ``name`` including its scales."""
    return quant_format(name).bytes_per_weight
