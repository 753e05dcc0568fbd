"""Small GGUF files for tests and benchmarks, written with ``gguf.GGUFWriter`` (no downloads).

Tensor data is all zeros and left as a hole in the file (the file is extended past the header, not
written), so a file of realistic tensor sizes costs neither time nor disk space. Shapes are ggml's
(``ne0`` first, as llama.cpp logs them).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

# ggml block structs (ggml-common.h): (weights per block, bytes per block), spelled out by hand so
# that tests do not take the sizes from the package under test
BLOCK = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18), "q4_k": (256, 144),
         "q5_k": (256, 176), "q6_k": (256, 210), "mxfp4": (32, 17)}


def nbytes(ggml_type: str, shape) -> int:
    """Bytes of a tensor of ``shape`` in ``ggml_type``."""
    per, size = BLOCK[ggml_type]
    return int(np.prod(shape)) // per * size


def write_gguf(path, arch: str, meta: dict, tensors, split_max_tensors: int = 0, tokens: int = 0) -> list[Path]:
    """Write a GGUF model: ``meta`` maps keys (``{arch}.`` prefixed unless they start with ``general.``
    or ``tokenizer.``) to ints, floats, strings or lists; ``tensors`` are
    ``(name, ggml_type, shape)``; ``tokens`` adds a tokenizer of that many strings. Returns the files
    written (several shards with ``split_max_tensors``)."""
    import gguf

    w = gguf.GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    for key, value in meta.items():
        full = key if key.startswith(("general.", "tokenizer.")) else f"{arch}.{key}"
        if isinstance(value, bool):
            w.add_bool(full, value)
        elif isinstance(value, int):
            w.add_uint32(full, value)
        elif isinstance(value, float):
            w.add_float32(full, value)
        elif isinstance(value, list):
            w.add_array(full, value)
        else:
            w.add_string(full, value)
    if tokens:                                # a BPE tokenizer: strings, types and merges
        w.add_token_list([f"t{i}".encode() for i in range(tokens)])
        w.add_token_types([1] * tokens)
        w.add_token_merges([f"t{i} t{i + 1}" for i in range(tokens - 1)])
    for name, ggml_type, shape in tensors:
        w.add_tensor_info(name, list(reversed(shape)), np.dtype(np.float32), nbytes(ggml_type, shape),
                          raw_dtype=gguf.GGMLQuantizationType[ggml_type.upper()])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    shards = [Path(f.name) for f in w.fout]
    sizes = [sum(w.ggml_pad(ti.nbytes, w.data_alignment) for ti in shard.values()) for shard in w.tensors]
    w.close()
    for shard, size in zip(shards, sizes):
        os.truncate(shard, w.ggml_pad(shard.stat().st_size, w.data_alignment) + size)
    return shards


def _attention(b: str, H: int, nh: int, nkv: int, hd: int) -> list:
    return [(b + "attn_norm.weight", "f32", (H,)), (b + "attn_q.weight", "q8_0", (H, nh * hd)),
            (b + "attn_k.weight", "q8_0", (H, nkv * hd)), (b + "attn_v.weight", "q6_k", (H, nkv * hd)),
            (b + "attn_output.weight", "q8_0", (nh * hd, H)), (b + "ffn_norm.weight", "f32", (H,))]


def _ffn(b: str, i: int, H: int, ffn: int, experts: int, per_expert: bool) -> list:
    """Routed experts of layer ``i``: Q4_K gate/up, Q6_K down in layer 0 (as Q4_K_M mixes them)."""
    down = "q6_k" if i == 0 else "q4_k"
    if per_expert:                            # Mixtral files before the merged *_exps tensors
        return [t for j in range(experts) for t in ((f"{b}ffn_gate.{j}.weight", "q4_k", (H, ffn)),
                (f"{b}ffn_up.{j}.weight", "q4_k", (H, ffn)), (f"{b}ffn_down.{j}.weight", down, (ffn, H)))]
    return [(b + "ffn_gate_exps.weight", "q4_k", (H, ffn, experts)), (b + "ffn_up_exps.weight", "q4_k", (H, ffn, experts)),
            (b + "ffn_down_exps.weight", down, (ffn, H, experts))]


def gqa_moe(path, arch: str = "qwen3moe", layers: int = 2, hidden: int = 256, experts: int = 4, ffn: int = 256,
            vocab: int = 512, dense_layers: int = 0, shared_ffn: int = 0, per_expert: bool = False,
            extra_layers: int = 0, head_norms: bool = False, meta: dict | None = None, **kw) -> list[Path]:
    """A small GQA MoE file (4 heads of 64, 2 KV heads): Q8_0/Q6_K attention, F32 norms and router,
    Q4_K embedding, Q6_K output head; ``dense_layers`` leading dense FFN layers (Q8_0, width 512);
    ``shared_ffn`` a shared expert of that width per MoE layer (Q8_0, with Qwen2-MoE's gate);
    ``extra_layers`` more blocks past ``block_count - nextn_predict_layers`` (prediction heads);
    ``head_norms`` per-head q/k RMSNorm weights (Qwen3)."""
    H, nh, nkv, hd = hidden, 4, 2, 64
    t = [("token_embd.weight", "q4_k", (H, vocab)), ("output_norm.weight", "f32", (H,)),
         ("output.weight", "q6_k", (H, vocab))]
    for i in range(layers + extra_layers):
        b = f"blk.{i}."
        t += _attention(b, H, nh, nkv, hd)
        if head_norms:
            t += [(b + "attn_q_norm.weight", "f32", (hd,)), (b + "attn_k_norm.weight", "f32", (hd,))]
        if i < dense_layers:
            t += [(b + f"ffn_{x}.weight", "q8_0", (H, 512) if x != "down" else (512, H)) for x in ("gate", "up", "down")]
            continue
        t += [(b + "ffn_gate_inp.weight", "f32", (H, experts))] + _ffn(b, i, H, ffn, experts, per_expert)
        if shared_ffn:
            t += [(b + f"ffn_{x}_shexp.weight", "q8_0", (H, shared_ffn) if x != "down" else (shared_ffn, H))
                  for x in ("gate", "up", "down")] + [(b + "ffn_gate_inp_shexp.weight", "f32", (H,))]
    m = {"block_count": layers + extra_layers, "context_length": 40960, "embedding_length": H,
         "feed_forward_length": 512, "expert_feed_forward_length": ffn, "expert_count": experts, "expert_used_count": 2,
         "attention.head_count": nh, "attention.head_count_kv": nkv, "attention.key_length": hd,
         "attention.value_length": hd, "general.name": f"tiny {arch}", **(meta or {})}   # None drops a key
    if extra_layers:
        m["nextn_predict_layers"] = extra_layers
    return write_gguf(path, arch, {k: v for k, v in m.items() if v is not None}, t, **kw)


def qwen3moe(path, **kw) -> list[Path]:
    """A small Qwen3-MoE file (:func:`gqa_moe` plus Qwen3's per-head q/k norms)."""
    return gqa_moe(path, "qwen3moe", head_norms=True, **kw)


def deepseek2(path, mla_keys: bool = True) -> list[Path]:
    """A small DeepSeek-V2-Lite-like file: 3 layers (the first dense), 8 experts of width 256, one
    shared expert, MLA (kv_lora_rank 128, rope 32, nope 64, v 64, no q compression).
    ``mla_keys``: the current converter's keys and split ``attn_k_b``/``attn_v_b``; else the older
    file (per-head widths in the plain keys, ``attn_kv_b``)."""
    H, nh, L, E = 256, 4, 3, 8
    t = [("token_embd.weight", "q4_k", (H, 512)), ("output_norm.weight", "f32", (H,)), ("output.weight", "q6_k", (H, 512))]
    for i in range(L):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", "f32", (H,)), (b + "attn_q.weight", "q8_0", (H, nh * 96)),
              (b + "attn_kv_a_mqa.weight", "q8_0", (H, 160)), (b + "attn_kv_a_norm.weight", "f32", (128,)),
              (b + "attn_output.weight", "q8_0", (nh * 64, H)), (b + "ffn_norm.weight", "f32", (H,))]
        t += ([(b + "attn_k_b.weight", "f16", (64, 128, nh)), (b + "attn_v_b.weight", "f16", (128, 64, nh))] if mla_keys
              else [(b + "attn_kv_b.weight", "f16", (128, nh * 128))])
        if i == 0:
            t += [(b + f"ffn_{x}.weight", "q8_0", (H, 512) if x != "down" else (512, H)) for x in ("gate", "up", "down")]
            continue
        t += [(b + "ffn_gate_inp.weight", "f32", (H, E))]
        t += [(b + f"ffn_{x}_exps.weight", "q4_k", (H, 256, E) if x != "down" else (256, H, E)) for x in ("gate", "up", "down")]
        t += [(b + f"ffn_{x}_shexp.weight", "q8_0", (H, 256) if x != "down" else (256, H)) for x in ("gate", "up", "down")]
    m = {"block_count": L, "context_length": 163840, "embedding_length": H, "feed_forward_length": 512,
         "expert_feed_forward_length": 256, "expert_count": E, "expert_used_count": 2, "expert_shared_count": 1,
         "leading_dense_block_count": 1, "attention.head_count": nh, "attention.kv_lora_rank": 128,
         "rope.dimension_count": 32}
    m.update({"attention.head_count_kv": 1, "attention.key_length": 160, "attention.value_length": 128,
              "attention.key_length_mla": 96, "attention.value_length_mla": 64} if mla_keys else
             {"attention.head_count_kv": nh, "attention.key_length": 96, "attention.value_length": 64})
    return write_gguf(path, "deepseek2", m, t)


def gpt_oss(path) -> list[Path]:
    """A small gpt-oss file: 2 layers, 4 MXFP4 experts of width 256 with F32 biases, attention
    biases and sinks, sliding window 128 on every other layer."""
    H, nh, nkv, hd, E = 256, 4, 2, 64, 4
    t = [("token_embd.weight", "q8_0", (H, 512)), ("output_norm.weight", "f32", (H,)), ("output.weight", "q8_0", (H, 512))]
    for i in range(2):
        b = f"blk.{i}."
        for name, shape in (("attn_q", (H, nh * hd)), ("attn_k", (H, nkv * hd)), ("attn_v", (H, nkv * hd)),
                            ("attn_output", (nh * hd, H))):
            t += [(b + name + ".weight", "q8_0", shape), (b + name + ".bias", "f32", shape[1:])]
        t += [(b + "attn_norm.weight", "f32", (H,)), (b + "post_attention_norm.weight", "f32", (H,)),
              (b + "attn_sinks.weight", "f32", (nh,)), (b + "ffn_gate_inp.weight", "f32", (H, E)),
              (b + "ffn_gate_inp.bias", "f32", (E,))]
        for x in ("gate", "up", "down"):
            t += [(b + f"ffn_{x}_exps.weight", "mxfp4", (H, 256, E)), (b + f"ffn_{x}_exps.bias", "f32", (256, E))]
    m = {"block_count": 2, "context_length": 131072, "embedding_length": H, "feed_forward_length": 256,
         "expert_feed_forward_length": 256, "expert_count": E, "expert_used_count": 2, "attention.head_count": nh,
         "attention.head_count_kv": nkv, "attention.key_length": hd, "attention.value_length": hd,
         "attention.sliding_window": 128}
    return write_gguf(path, "gpt-oss", m, t)
