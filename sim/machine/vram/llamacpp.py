"""VRAM as llama.cpp places it (``llama-server``, CUDA backend), term by term.

- Model buffer (``load_tensors: CUDA0 model buffer size``): attention, norms and router of the layers
  on the GPU, shared experts, dense layers, and the output head when ``-ngl`` covers it (more than
  the layer count); tensor types from :mod:`sim.machine.vram.gguf_layout`. The token embedding always stays
  in host memory (``CPU_Mapped``): llama.cpp assigns the input layer to the CPU (``llama-model.cpp``
  ``dev_input``), as every published load log shows (gpt-oss-20b MXFP4: ``CPU_Mapped model buffer
  size = 586.82 MiB`` = 201088 x 2880 Q8_0).
- KV cache (``llama_kv_cache: CUDA0 KV buffer size``): ``-c`` cells padded to 256, ``-ctk``/``-ctv``
  element sizes; sliding-window layers keep ``pad(n_swa x n_seq + ubatch, 256)`` cells
  (``llama-kv-cache-iswa.cpp``) unless ``--swa-full``; MLA caches the latent as K only.
- Compute buffer (``llama_context: CUDA0 compute buffer size``): ggml-alloc reuses memory, so the
  buffer is the largest live set of one phase of the graph, not a sum: the output phase (F32 logits
  ``ubatch x n_vocab`` when the head is on the GPU), the attention phase (without flash attention the
  F32 ``KQ`` of ``heads x n_ctx x ubatch``), or the MoE phase (when experts live in host memory and
  ``ubatch >= 32``, ggml's scheduler copies one layer's expert tensors into this buffer to run the
  prompt on the GPU; not with ``--no-op-offload``). Each phase adds ``c x ubatch x width x 4 B`` of other F32 activations; the
  three ``c`` are fitted on the published load logs of tests/data/llamacpp_load_logs.yaml. The
  expert copy is counted when tensor overrides (``--n-cpu-moe``, ``--cpu-moe``, ``-ot``) keep experts
  in host memory, as the logs show (gpt-oss-20b ``--cpu-moe``: 456.98 MiB = three 134 MiB expert
  tensors + activations); not for layers ``-ngl`` leaves whole on the CPU, where the published
  Mixtral f16 ``-ngl 8`` run on a 24 GB card (Fiddler paper, llama.cpp b2956; point P41) would
  not have fitted with it. Nor under ik_llama.cpp, whose host experts are run-time repacked (``-rtr``)
  or stored in row-interleaved ``_R4``/``_R8`` types that have no CUDA kernels, so the scheduler
  cannot move their ops to the GPU: ik_llama.cpp issue 629 (build 3772, RTX 5090, ``-ub 2048 -rtr``)
  prints the same compute buffer for IQ3_K and Q8_0 experts (1264.01 and 1251.00 MiB, the output
  phase), not one layer's expert tensors more.
- CUDA context: the primary context's device memory, which grows with the GPU's SM count
  (:mod:`sim.machine.vram.cuda_context`, ggml-org/llama.cpp PR #23604: 107 MiB with 34 SMs, 555 MiB
  with 188); the runtime's ``reserved_gib`` for a GPU that is not CUDA or whose SMs are unknown.
- CUDA pool: ggml-cuda's memory pool (``ggml_cuda_pool``), which holds an op's temporaries outside the
  compute buffer and keeps its peak mapped; the peak is the larger of two ops' buffers
  (``ggml/src/ggml-cuda``): ``MUL_MAT_ID`` of a micro-batch (``mmq.cu`` ``ggml_cuda_mul_mat_q``, ids
  branch: the activations of ``ubatch x top_k`` rows quantized to ``block_q8_1``, 36 B per 32 values,
  rows padded to 512; for 16-bit experts ``ggml_cuda_mul_mat_id`` copies them sorted, 2 B, and its
  F32 result, 4 B) and flash attention over a quantized KV cache (``fattn-common.cuh`` ``launch_fattn``:
  ``K_f16`` / ``V_f16`` of ``ggml_nelements`` of one layer's K and V over the whole context). Not in
  the load log's buffers, so not in its term tests.

ik_llama.cpp (runtime ``ik_llama``) loads tensors as llama.cpp does (token embedding in host memory:
``CUDA_Host buffer size = 630.59 MiB`` in the issue-629 logs, Qwen3-235B's Q8_0 ``token_embd``).

llama-server's own context default is the model's training context (``common.h``: ``n_ctx = 0 //
0 == context the model was trained with``), which ``--fit`` may shrink; this project's ``context``
(default 4096) is what the plan reserves and what ``sim plan`` writes as ``-c``.
"""
from __future__ import annotations

from sim.machine.vram.cuda_context import cuda_context_bytes
from sim.machine.vram.gguf_layout import dense_format, layout
from sim.machine.vram.options import MemoryOptions
from sim.machine.vram.shapes import shapes
from sim.machine.vram.terms import GIB, VramTerms

PAD = 256                 # llama.cpp pads the KV cells to 256
F32 = 4
C_OUT = 2.5               # F32 activations of width n_embd live beside the logits (logs: 1.0 and 4.5)
C_ATTN = 7.0              # ... of the query width beside KQ without flash attention (log: 7.0)
C_ATTN_FA = 3.0           # ... of the query width in a flash-attention layer
C_MOE = 2.5               # ... of top_k x expert width in the MoE phase (gate, up, their product; log: 2.4)
OFFLOAD_MIN_BATCH = 32    # ggml-cuda offloads host-weight ops from this batch size (ggml-cuda.cu)


def pad(n: float, to: int = PAD) -> int:
    """``n`` rounded up to a multiple of ``to`` (GGML_PAD)."""
    return int(-(-int(n) // to) * to)


def kv_bytes(m, context: int, opts: MemoryOptions, gpu_share: float = 1.0) -> float:
    """KV cache bytes of the layers on the GPU (``gpu_share`` of them)."""
    cells = pad(context)
    swa_cells = cells if opts.swa_full else min(cells, pad(m.sliding_window * opts.n_seq + opts.ubatch))
    per_elem = opts.k_bytes if m.attention == "mla" else (opts.k_bytes + opts.v_bytes) / 2
    elems = (m.kv_bytes_per_token * cells + m.kv_swa_bytes_per_token * swa_cells) / 2   # 16-bit bytes -> elements
    return gpu_share * elems * per_elem


def compute_bytes(m, context: int, opts: MemoryOptions, output_on_gpu: bool, host_experts: bool) -> float:
    """The CUDA compute buffer: the largest of the output, attention and MoE phases."""
    s, ub = shapes(m), opts.ubatch
    out = ub * ((s.vocab * F32 if output_on_gpu else 0) + C_OUT * m.hidden * F32)
    if opts.flash_attn:
        attn = ub * C_ATTN_FA * s.q_width * F32
    else:
        attn = ub * (s.heads * pad(context) * F32 + C_ATTN * s.q_width * F32)
    moe = ub * C_MOE * m.top_k * m.moe_intermediate * F32
    if host_experts and opts.op_offload and ub >= OFFLOAD_MIN_BATCH:
        moe += m.n_experts * m.expert_bytes
    return max(out, attn, moe)


MMQ_ROW_PAD = 512         # MATRIX_ROW_PADDING (ggml-cuda common.cuh): ne10_padded of quantized activations
Q8_1 = 36 / 32            # block_q8_1: 32 int8 values + two fp16 (d, s)
_SIXTEEN_BIT = ("f16", "bf16")


def pool_bytes(m, context: int, opts: MemoryOptions) -> float:
    """The peak of ggml-cuda's memory pool: the larger of the MoE matmul's and flash attention's
    temporaries (the module docstring)."""
    rows, width = opts.ubatch * m.top_k, max(m.hidden, m.moe_intermediate)
    if m.expert_quant in _SIXTEEN_BIT:
        moe = rows * width * (2 + F32)
    else:
        moe = rows * pad(width, MMQ_ROW_PAD) * Q8_1
    fa = 0.0
    if opts.flash_attn and m.attention == "gqa":
        elems = pad(context) * shapes(m).kv_width        # one full-context layer's K (or V) elements
        fa = elems * 2 * ((opts.cache_type_k != "f16") + (opts.cache_type_v != "f16"))
    return max(moe, fa)


def model_parts(m, cpu_layers: int) -> tuple[tuple, float]:
    """((part, bytes), ...) of the GPU model buffer without expert slots, and the host token embedding
    (a GGUF file's own tensor sizes when the model was read from one: :func:`file_parts`)."""
    if m.file_non_expert_bytes:
        return file_parts(m, cpu_layers)
    s = shapes(m)
    g = layout(m, m.hidden * s.kv_width / m.attn_params_per_layer if m.attention == "gqa" else 0.0)
    dense_on_gpu = cpu_layers == 0
    gpu_layers = s.layers - cpu_layers - (0 if dense_on_gpu else m.n_dense_layers)
    parts = [("attention, norms, router",
              gpu_layers * (m.attn_params_per_layer * g.attention + s.small_params / s.layers * g.small))]
    if m.n_shared_experts:
        parts.append(("shared experts", (m.n_layers - cpu_layers) * m.shared_params * g.shared))
    if m.n_dense_layers and dense_on_gpu:
        parts.append(("dense layers", s.dense_ffn_params * g.dense))
    if cpu_layers == 0:
        parts.append(("output head", m.lm_head_params * g.output))
    return tuple(parts), (m.embed_params or m.lm_head_params) * g.embed


def file_parts(m, cpu_layers: int) -> tuple[tuple, float]:
    """The model buffer from a GGUF file's tensor table (``model=gguf:PATH``): the per-layer weights
    (attention, norms, routers, shared experts, dense layers) of the blocks ``-ngl`` puts on the GPU,
    and the output head when it goes too (a file without ``output.weight`` ties it to ``token_embd``,
    which llama.cpp then duplicates onto the output layer's device); the embedding stays in host memory."""
    layers = m.n_layers + m.n_dense_layers
    per_layer = m.file_non_expert_bytes - m.file_embed_bytes - m.file_head_bytes
    parts = [("attention, norms, router, shared and dense weights", per_layer * (layers - cpu_layers) / layers)]
    if cpu_layers == 0:
        parts.append(("output head", m.file_head_bytes or m.file_embed_bytes))
    return tuple(parts), m.file_embed_bytes


def context_bytes(hw) -> float:
    """The CUDA context of ``hw``'s GPU: per SM where it is a CUDA GPU of known SM count (the module
    docstring), else the runtime's ``reserved_gib``."""
    return cuda_context_bytes(hw.cuda_sms) if hw.cuda_sms else hw.reserved_gib * GIB


def llamacpp_terms(hw, m, draft, context: int, cpu_layers: int, opts: MemoryOptions,
                   n_slots: int | None = None) -> VramTerms:
    """llama.cpp's VRAM terms for ``m`` with ``cpu_layers`` MoE layers whole on the CPU (``-ngl``);
    ``n_slots`` (None: unknown) tells whether any routed expert lives in host memory."""
    parts, embed = model_parts(m, cpu_layers)
    total = m.n_layers * m.n_experts
    host_experts = ((n_slots is None or n_slots < total) and cpu_layers == 0   # the module docstring says why
                    and hw.runtime != "ik_llama")
    layers = m.n_layers + m.n_dense_layers
    return VramTerms(
        model=parts, kv=kv_bytes(m, context, opts, (layers - cpu_layers) / layers),
        compute=compute_bytes(m, context, opts, cpu_layers == 0, host_experts),
        context=context_bytes(hw), pool=pool_bytes(m, context, opts), draft=draft.weight_bytes, draft_kv=context * draft.kv_bytes_per_token,
        draft_workspace=hw.draft_workspace_gib * GIB if draft.params > 0 else 0.0, host_weights=embed,
        formats=f" ({dense_format(m)} GGUF; experts {m.file_expert_types or m.expert_quant}, "
                f"{m.attention.upper()} attention)")
