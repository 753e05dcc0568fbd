"""Attention over the context: the score and value products, and their time on the device computing them.

One layer's attention for ``n`` new query tokens after ``cached`` tokens in its KV cache reads the
cache once and computes, per query token and per context token it attends to,

- GQA/MHA (llama.cpp ``build_attn_mha``: ``kq = mul_mat(k, q)``, ``kqv = mul_mat(v, kq)``):
  ``2 x n_heads x head_dim`` FLOP for the scores plus ``2 x n_heads x head_dim`` for the values,
  whatever the number of KV heads (grouped heads share a K/V row, not the products);
- absorbed MLA (llama.cpp ``-mla``/ik_llama.cpp ``-mla 2|3``, DeepSeek-V2/V3): every head scores the
  shared latent row of ``kv_lora_rank + qk_rope_head_dim`` elements and sums the ``kv_lora_rank``
  values, ``2 x n_heads x (kv_lora + rope) + 2 x n_heads x kv_lora`` FLOP (github.com/ikawrakow/
  ik_llama.cpp PR #400: "the V cache ... is just a view of the K cache with rows of 512 instead of
  576 elements"; discussion #354 "Not all MLAs are born equal").

These per-token FLOPs are ModelSpec fields (``attn_flops_per_token`` over the full-attention layers,
``attn_swa_flops_per_token`` over the sliding-window layers, derived in :mod:`sim.machine.hf_config`).
Queries are causal: the i-th of ``n`` new tokens attends ``cached + i`` tokens, a sliding-window
layer at most its window.

Time: one attention kernel (FlashAttention-style, or ggml's fused soft_max chain on the same
stream) streams the KV cache and computes on it, so reading and computing overlap: the kernel costs
``max(KV bytes / bandwidth, FLOPs / (peak x attention efficiency))``, a roofline. The projections
(q, kv, o) are other kernels run before and after it, so their time is added, not overlapped.
"""
from __future__ import annotations


def attended(n: int, cached: int, window: int = 0) -> float:
    """Context tokens attended, summed over ``n`` causal queries after ``cached`` tokens: query i
    (1..n) sees ``cached + i`` tokens, at most ``window`` when ``window > 0``."""
    n, cached = max(0, int(n)), max(0, int(cached))
    full = n * cached + n * (n + 1) / 2.0
    if window <= 0 or cached + n <= window:
        return float(full)
    k = max(0, min(n, window - cached))             # queries before the window is full
    return float(k * cached + k * (k + 1) / 2.0 + (n - k) * window)


def context_flops(m, n: int, cached: int) -> float:
    """Score and value FLOPs of one layer (the mean over the model's layers, as the KV bytes are)
    for ``n`` new query tokens after ``cached`` cached ones."""
    layers = max(1, m.n_layers + m.n_dense_layers)
    full = m.attn_flops_per_token * attended(n, cached)
    swa = m.attn_swa_flops_per_token * attended(n, cached, m.sliding_window) if m.sliding_window else 0.0
    return (full + swa) / layers


def layer_attention_work(m, n_tokens: int, context: int) -> tuple[float, float]:
    """(KV bytes read, score/value FLOPs) of one layer's attention for ``n_tokens`` causal queries
    whose keys end at ``context`` tokens in the cache (the last ``n_tokens`` of them are the queries')."""
    kv_bytes = m.kv_bytes(context) / max(1, m.n_layers + m.n_dense_layers)
    return kv_bytes, context_flops(m, n_tokens, max(0, context - n_tokens))


def attention_kernel_s(kv_bytes: float, flops: float, bw: float, flop_rate: float) -> float:
    """Seconds of one attention kernel: the KV read at ``bw`` B/s and the score/value FLOPs at
    ``flop_rate`` FLOP/s overlap (roofline max)."""
    mem = kv_bytes / bw if bw > 0 else 0.0
    return max(mem, flops / flop_rate) if flop_rate > 0 and flops > 0 else mem


def per_token_flops(mla: bool, n_heads: int, head_dim: int = 0, kv_lora: int = 0, rope: int = 0) -> int:
    """Score + value FLOPs of one layer per query token per context token (module docstring)."""
    if mla:
        return 2 * n_heads * (kv_lora + rope) + 2 * n_heads * kv_lora
    return 4 * n_heads * head_dim
