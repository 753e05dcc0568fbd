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
    if tokens:
        w.add_token_list([f"t{i}".encode() for i in range(tokens)])
        w.add_token_types([1] * tokens)
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


def qwen3moe(path, layers: int = 2, hidden: int = 256, experts: int = 4, ffn: int = 256, vocab: int = 512,
             **kw) -> list[Path]:
    """A small Qwen3-MoE file: Q4_K experts with Q6_K ``ffn_down`` in layer 0 (as Q4_K_M does),
    Q8_0 and Q6_K attention, F32 norms and router, Q4_K embedding, Q6_K output head."""
    H, nh, nkv, hd = hidden, 4, 2, 64
    t = [("token_embd.weight", "q4_k", (H, vocab)), ("output_norm.weight", "f32", (H,)),
         ("output.weight", "q6_k", (H, vocab))]
    for i in range(layers):
        b = f"blk.{i}."
        t += [(b + "attn_norm.weight", "f32", (H,)), (b + "attn_q.weight", "q8_0", (H, nh * hd)),
              (b + "attn_k.weight", "q8_0", (H, nkv * hd)), (b + "attn_v.weight", "q6_k", (H, nkv * hd)),
              (b + "attn_output.weight", "q8_0", (nh * hd, H)), (b + "attn_q_norm.weight", "f32", (hd,)),
              (b + "attn_k_norm.weight", "f32", (hd,)), (b + "ffn_norm.weight", "f32", (H,)),
              (b + "ffn_gate_inp.weight", "f32", (H, experts)),
              (b + "ffn_gate_exps.weight", "q4_k", (H, ffn, experts)), (b + "ffn_up_exps.weight", "q4_k", (H, ffn, experts)),
              (b + "ffn_down_exps.weight", "q6_k" if i == 0 else "q4_k", (ffn, H, experts))]
    meta = {"block_count": layers, "context_length": 40960, "embedding_length": H, "feed_forward_length": 6144,
            "expert_feed_forward_length": ffn, "expert_count": experts, "expert_used_count": 2,
            "attention.head_count": nh, "attention.head_count_kv": nkv, "attention.key_length": hd,
            "attention.value_length": hd, "general.name": "tiny qwen3moe"}
    return write_gguf(path, "qwen3moe", meta, t, **kw)
