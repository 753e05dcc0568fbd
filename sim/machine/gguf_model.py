"""A :class:`sim.machine.specs.ModelSpec` from a GGUF file (``model=gguf:PATH``): shapes from its metadata,
byte sizes from its tensor table.

The metadata keys (``{arch}.block_count``, ``{arch}.expert_count``, ...) are turned into the
config.json fields of the matching Hugging Face family and handed to
:func:`sim.machine.hf_config.derive`, so layer kinds, attention type and KV bytes follow one mapping.
The counts then come from the file itself: routed-expert weights and bytes from the
``blk.N.ffn_{gate,up,down,gate_up}_exps`` tensors (and Mixtral's older per-expert
``blk.N.ffn_{gate,up,down}.E`` tensors), everything else (attention, norms, router, shared experts,
dense layers, ``token_embd``, ``output``) as non-expert weights; layers past
``block_count - nextn_predict_layers`` (multi-token-prediction heads, which llama.cpp skips when
loading) are left out. Key and tensor names: llama.cpp ``gguf-py/gguf/constants.py``; the MLA keys
(``key_length`` = kv_lora_rank + rope dim, ``key_length_mla`` = per-head q/k width,
``value_length_mla`` = v_head_dim; older files hold the per-head widths in the plain keys) from
``convert_hf_to_gguf.py`` ``DeepseekV2Model.set_gguf_parameters`` (github.com/ggml-org/llama.cpp).
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from sim.machine.gguf_file import SPLIT, GgufError, GgufHeader, read_header
from sim.machine.hf_config import MLA, UnsupportedConfig, derive
from sim.machine.quant import FORMATS

ARCHS = {"qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe", "deepseek2": "deepseek_v2", "gpt-oss": "gpt_oss",
         "llama": "mixtral", "glm4moe": "glm4_moe", "olmoe": "olmoe", "phimoe": "phimoe"}
EXPERT_WIDTH_IS_FFN = ("mixtral", "phimoe", "gpt_oss", "olmoe")   # derive() reads their expert width as intermediate_size
# the sim's format (runtime efficiency tables are keyed by these) of a routed expert's main ggml type
TYPE_FORMAT = {"q4_k": "q4_k_m", "q5_k": "q5_k_m", "q3_k": "q3_k_m", "q6_k": "q6_k", "q8_0": "q8_0",
               "q4_0": "q4_0", "q2_k": "q2_k", "iq4_xs": "iq4_xs", "mxfp4": "mxfp4", "f16": "f16",
               "bf16": "bf16", "f32": "f32"}
EXPERT = re.compile(r"^blk\.(\d+)\.ffn_(?:gate|up|down|gate_up)(?:_exps|\.\d+)\.")
BLOCK = re.compile(r"^blk\.(\d+)\.")


def _arch(h: GgufHeader) -> str:
    """The architecture, after refusing a dense model or one no preset family covers."""
    arch = h.meta.get("general.architecture")
    if not arch:
        raise GgufError(f"gguf:{h.path}: no general.architecture in the metadata")
    experts = h.meta.get(f"{arch}.expert_count") or 0
    if not experts or not any(EXPERT.match(t.name) for t in h.tensors):
        raise GgufError(f"gguf:{h.path}: a dense model (architecture {arch!r}, no routed experts); "
                        "this tool simulates Mixture-of-Experts models")
    if arch not in ARCHS:
        raise GgufError(f"gguf:{h.path}: architecture {arch!r} is not supported; supported: {', '.join(ARCHS)}")
    return arch


def _scalar(v):
    """A per-layer array (some files store head counts per layer) as its largest value."""
    return max(v) if isinstance(v, list) else v


def hf_fields(h: GgufHeader, arch: str) -> dict:
    """The config.json fields of the file's model, as :func:`sim.machine.hf_config.derive` reads them."""
    def g(key, default=None):
        return _scalar(h.meta.get(f"{arch}.{key}", default))

    t = ARCHS[arch]
    need = ("block_count", "embedding_length", "attention.head_count", "expert_used_count") + (
        ("rope.dimension_count", "attention.kv_lora_rank", "attention.key_length", "attention.value_length") if t in MLA else ())
    missing = [k for k in need if g(k) is None]
    if missing:
        raise GgufError(f"gguf:{h.path}: missing metadata {', '.join(f'{arch}.{k}' for k in missing)}")
    shapes = {x.name: x.shape for x in h.tensors}
    H, nh = int(g("embedding_length")), int(g("attention.head_count"))
    down = next((s for n, s in shapes.items() if re.match(r"blk\.\d+\.ffn_down(_exps|\.0)\.weight$", n)), (0,))
    inter = int(g("expert_feed_forward_length") or down[0] or g("feed_forward_length"))   # Mixtral: no expert key
    embd = shapes.get("token_embd.weight")
    c = dict(model_type=t, num_hidden_layers=int(g("block_count")) - int(g("nextn_predict_layers", 0) or 0),
             hidden_size=H, num_attention_heads=nh, num_key_value_heads=int(g("attention.head_count_kv", nh) or nh),
             vocab_size=int(embd[1] if embd else g("vocab_size") or h.array_len.get("tokenizer.ggml.tokens", 0)),
             num_experts=int(g("expert_count")), num_experts_per_tok=int(g("expert_used_count")),
             moe_intermediate_size=inter, first_k_dense_replace=int(g("leading_dense_block_count", 0) or 0),
             intermediate_size=inter if t in EXPERT_WIDTH_IS_FFN else int(g("feed_forward_length", 0) or 0),
             n_shared_experts=int(g("expert_shared_count", 0) or 0), sliding_window=g("attention.sliding_window"),
             attention_bias=t == "gpt_oss")
    if g("attention.key_length"):
        c["head_dim"] = int(g("attention.key_length"))
    if t == "qwen2_moe":
        sh = shapes.get("blk.0.ffn_up_shexp.weight", (0, 0))
        c["shared_expert_intermediate_size"] = int(g("expert_shared_feed_forward_length") or sh[1])
    if t in MLA:
        rope = int(g("rope.dimension_count"))
        c.update(kv_lora_rank=int(g("attention.kv_lora_rank")), q_lora_rank=int(g("attention.q_lora_rank", 0) or 0) or None,
                 qk_rope_head_dim=rope, qk_nope_head_dim=int(g("attention.key_length_mla") or g("attention.key_length")) - rope,
                 v_head_dim=int(g("attention.value_length_mla") or g("attention.value_length")))
    return c


def tensor_sizes(h: GgufHeader, n_layers: int) -> dict:
    """Elements, bytes and ggml types (bytes per type of the weight matrices) of the file's tensor groups: ``experts``
    (routed), ``embed`` (``token_embd``), ``head`` (``output``), ``other`` (every other weight), and
    ``skipped`` (layers from ``n_layers`` on); ``moe_layers`` counts the layers holding routed experts."""
    groups = {k: {"elements": 0, "bytes": 0, "types": Counter()} for k in ("experts", "embed", "head", "other", "skipped")}
    moe_layers = set()
    for t in h.tensors:
        block, expert = BLOCK.match(t.name), EXPERT.match(t.name)
        if block and int(block[1]) >= n_layers:
            key = "skipped"
        elif expert:
            key = "experts"
            moe_layers.add(int(expert[1]))
        else:
            key = {"token_embd.weight": "embed", "output.weight": "head"}.get(t.name, "other")
        g = groups[key]
        g["elements"] += t.n_elements
        g["bytes"] += t.n_bytes
        if len(t.shape) > 1 and t.name.endswith(".weight"):     # matrices, not norms or biases
            g["types"][t.ggml_type] += t.n_bytes
    return {**groups, "moe_layers": len(moe_layers)}


def _format(types: Counter, fallback: str) -> str:
    """The sim format of the ggml type holding most bytes (nearest bits per weight when it has none)."""
    if not types:
        return fallback
    main = types.most_common(1)[0][0]
    if main in TYPE_FORMAT:
        return TYPE_FORMAT[main]
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[main.upper()]]
    bits = 8.0 * size / block
    return min(TYPE_FORMAT.values(), key=lambda f: abs(FORMATS[f].bits - bits))


def _types(types: Counter) -> str:
    """``q4_k 67% + q6_k 33%`` (share of bytes), or one type name."""
    total = sum(types.values()) or 1
    parts = [f"{name} {100 * b / total:.0f}%" for name, b in types.most_common()]
    return parts[0].split()[0] if len(parts) == 1 else " + ".join(parts)


def from_header(h: GgufHeader) -> dict:
    """ModelSpec fields of a read GGUF header (the file's own sizes replace the shape-derived counts)."""
    arch = _arch(h)
    try:
        c = hf_fields(h, arch)
        spec = derive(c, "", source="")
    except GgufError:
        raise
    except UnsupportedConfig as exc:
        raise GgufError(f"gguf:{h.path}: {exc}") from None
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:       # a key of the wrong type or zero
        raise GgufError(f"gguf:{h.path}: unusable {arch} metadata ({type(exc).__name__}: {exc})") from None
    s = tensor_sizes(h, c["num_hidden_layers"])
    ex, embed, head, other = s["experts"], s["embed"], s["head"], s["other"]
    n = spec["n_layers"] * spec["n_experts"]
    if s["moe_layers"] != spec["n_layers"] or ex["elements"] % n:
        raise GgufError(f"gguf:{h.path}: routed-expert tensors in {s['moe_layers']} layers, the metadata says "
                        f"{spec['n_layers']} MoE layers of {spec['n_experts']} experts")
    tied = head["elements"] == 0
    stem = SPLIT.sub(r"\g<stem>", Path(h.path).name).removesuffix(".gguf")
    spec.update(
        name=f"gguf:{stem}", expert_params=ex["elements"] // n,
        non_expert_params=float(other["elements"] + embed["elements"] + head["elements"]),
        embed_params=0 if tied else embed["elements"], lm_head_params=embed["elements"] if tied else head["elements"],
        quant=_format(ex["types"], "f16"), quant_dense=_format(other["types"] + head["types"], "f16"),
        file_expert_bytes=round(ex["bytes"] / n), file_non_expert_bytes=float(other["bytes"] + embed["bytes"] + head["bytes"]),
        file_embed_bytes=embed["bytes"], file_head_bytes=head["bytes"], file_expert_types=_types(ex["types"]),
        source=f"gguf:{h.path} ({arch}{f', {h.shards} shards' if h.shards > 1 else ''}; routed experts {_types(ex['types'])})")
    return spec


def from_path(path) -> dict:
    """ModelSpec fields of the GGUF model at ``path`` (a file, or the first shard of a split model)."""
    return from_header(read_header(path))


def keep_file_sizes(data: dict, overridden: set) -> dict:
    """``data`` (the file's fields with overrides) without the file's byte sizes that no longer
    apply: a format given explicitly (``quant`` for the experts, ``quant_dense`` for the rest) is
    taken whole, since the file mixes several ggml types under each."""
    out = dict(data)
    if "quant" in overridden:
        out.pop("file_expert_bytes", None)
        out.pop("file_expert_types", None)
    if "quant_dense" in overridden:
        for key in ("file_non_expert_bytes", "file_embed_bytes", "file_head_bytes"):
            out.pop(key, None)
    return out
