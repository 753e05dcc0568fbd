"""VRAM as kTransformers places it, from its optimize rules (``ktransformers/optimize/optimize_rules/
DeepSeek-V3-Chat.yaml``, github.com/kvcache-ai/ktransformers): every ``torch.nn.Linear`` under
``model.layers`` except ``self_attn.kv_b_proj`` becomes ``KTransformersLinear`` with the Marlin
kernel on ``cuda`` (attention projections, shared experts, dense MLPs: the model's non-expert
format, int4 Marlin for the int4 files); ``mlp.experts`` run ``KExpertsCPU`` (routed experts in
host memory, except the GPU experts a placement asks for); ``model.embed_tokens`` stays on the
CPU. Modules no rule matches load on the GPU in 16 bits: ``kv_b_proj``, ``lm_head``, the routers
(``MoEGate``) and the norms. The KV cache is the MLA latent (16-bit). Compute workspace and CUDA
context are the runtime's ``workspace_gib`` and ``reserved_gib``.

``kv_b_proj``'s share of an MLA layer's attention weights is DeepSeek-V3's (config.json:
512 x 128 x (128 + 128) = 16.8 M of 187.1 M); other families have none.
"""
from __future__ import annotations

from sim.machine.quant import bytes_per_weight
from sim.machine.vram.options import MemoryOptions
from sim.machine.vram.shapes import shapes
from sim.machine.vram.terms import GIB, VramTerms

KV_B_SHARE = 16777216 / 187105280
HALF = 2.0                 # bytes of a 16-bit weight


def ktransformers_terms(hw, m, draft, context: int, opts: MemoryOptions) -> VramTerms:
    """kTransformers' VRAM terms for ``m`` (``opts`` is accepted for a common signature: its KV cache
    is 16-bit and its micro-batch does not size a buffer here)."""
    s = shapes(m)
    lin = bytes_per_weight(m.dense_quant)
    kvb = KV_B_SHARE if m.attention == "mla" else 0.0
    attn = s.layers * m.attn_params_per_layer * ((1 - kvb) * lin + kvb * HALF)
    parts = [("attention, norms, router", attn + s.small_params * HALF)]
    if m.n_shared_experts:
        parts.append(("shared experts", m.n_layers * m.shared_params * lin))
    if m.n_dense_layers:
        parts.append(("dense layers", s.dense_ffn_params * lin))
    parts.append(("output head", m.lm_head_params * HALF))
    return VramTerms(
        model=tuple(parts), kv=float(m.kv_bytes(context)), compute=hw.workspace_gib * GIB,
        context=hw.reserved_gib * GIB, draft=draft.weight_bytes, draft_kv=context * draft.kv_bytes_per_token,
        draft_workspace=hw.draft_workspace_gib * GIB if draft.params > 0 else 0.0,
        host_weights=(m.embed_params or m.lm_head_params) * HALF)
