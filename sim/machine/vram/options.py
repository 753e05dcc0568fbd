"""What a user sets about an engine's memory besides placement: KV cache types (llama.cpp ``-ctk`` /
``-ctv``), the micro-batch (``-ub``), flash attention (``-fa``), parallel sequences, the SWA cache size and
CUDA unified memory (``GGML_CUDA_ENABLE_UNIFIED_MEMORY=1``) and op offload (``--no-op-offload``).

KV cache element sizes are ggml's block sizes (``ggml/src/ggml-common.h``: ``block_q8_0`` 34 B per 32,
``block_q4_0`` 18 B / 32, ``block_q4_1`` 20 B / 32, ``block_q5_0`` 22 B / 32, ``block_q5_1`` 24 B / 32,
``block_iq4_nl`` 18 B / 32); the allowed types are those of llama.cpp ``common/arg.cpp``
(``kv_cache_types``: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1).
"""
from __future__ import annotations

from dataclasses import dataclass

CACHE_TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32,
                    "iq4_nl": 18 / 32, "q5_0": 22 / 32, "q5_1": 24 / 32}


@dataclass(frozen=True)
class MemoryOptions:
    """Engine memory settings: ``cache_type_k`` / ``cache_type_v`` (``-ctk`` / ``-ctv``), ``ubatch``
    (``-ub``), ``flash_attn`` (``-fa``; llama-server's ``auto`` turns it on for CUDA), ``n_seq``
    (``-np``, sliding-window cells per sequence) and ``swa_full`` (``--swa-full``: SWA layers keep the
    whole context) and ``unified_memory`` (``GGML_CUDA_ENABLE_UNIFIED_MEMORY=1``: ggml-cuda allocates its
    buffers with ``cudaMallocManaged``, so on Linux what exceeds VRAM pages to host memory instead of
    failing: llama.cpp ``docs/build.md``, ggml-org/llama.cpp PR #12934) and ``op_offload`` (llama.cpp's
    default since ggml-org/llama.cpp PR #6083: an op of a micro-batch of 32 or more tokens whose weights
    live in host memory runs on the GPU, its weights copied into the compute buffer; ``--no-op-offload``,
    PR #13386, keeps such ops on the CPU and the copy out of VRAM)."""

    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    ubatch: int = 512
    flash_attn: bool = True
    n_seq: int = 1
    swa_full: bool = False
    unified_memory: bool = False
    op_offload: bool = True

    def __post_init__(self):
        from sim.machine.specs import ConfigError
        for key in ("cache_type_k", "cache_type_v"):
            value = getattr(self, key)
            if value not in CACHE_TYPE_BYTES:
                raise ConfigError(f"{key}={value!r}: must be one of {', '.join(CACHE_TYPE_BYTES)}")
        if int(self.ubatch) < 1 or int(self.n_seq) < 1:
            raise ConfigError(f"ubatch={self.ubatch}, n_seq={self.n_seq}: both must be integers >= 1")

    @property
    def k_bytes(self) -> float:
        """Bytes per K element."""
        return CACHE_TYPE_BYTES[self.cache_type_k]

    @property
    def v_bytes(self) -> float:
        """Bytes per V element."""
        return CACHE_TYPE_BYTES[self.cache_type_v]
