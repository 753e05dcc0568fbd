"""What the policy knows about a live run, built exactly as :func:`sim.run.runner.run_one` builds it.

:func:`model_spec` / :func:`draft_spec` describe the loaded models in the simulator's terms
(``conf/model`` / ``conf/draft`` fields, as plain dicts that :mod:`sim.machine.specs` accepts and that a
simulated replay receives unchanged); :func:`policy_context` derives the slots (memory plan), the
cost table and the optional profile / future exactly like the simulator, so a policy given the
same trace makes the same decisions on both sides.
"""
from __future__ import annotations

import numpy as np

from sim.machine import specs as config
from sim.policies.base import PolicyContext
from sim.protocol import build_context
from sim.run.spec import RunSpec

PRECISIONS = {"torch.float32": "f32", "torch.bfloat16": "bf16", "torch.float16": "f16"}


def _precision(model) -> str:
    return PRECISIONS.get(str(next(model.parameters()).dtype), "f16")


def _kv_bytes_per_token(cfg, n_layers: int, bytes_per: float) -> int:
    if getattr(cfg, "kv_lora_rank", None):  # DeepSeek MLA caches the compressed latent
        return int(n_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * bytes_per)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    return int(n_layers * 2 * kv_heads * head_dim * bytes_per)


def model_spec(model, host, name: str, n_shared: int) -> dict:
    """``conf/model``-style fields of an offloaded target (``host``: its HostExperts)."""
    from real.offload.experts_fn import moe_modules
    cfg = model.config.get_text_config()
    precision = _precision(model)
    bytes_per = config.PRECISION_BYTES[precision]
    index, _, _ = moe_modules(model)
    (two_i, hidden), _ = host.expert_shapes
    expert_params = 3 * hidden * (two_i // 2)
    non_expert = sum(p.numel() for p in model.parameters())   # expert placeholders are empty
    layer = model.model.layers[index[0]]
    return {"name": name, "n_layers": len(index), "n_dense_layers": len(model.model.layers) - len(index),
            "n_experts": host.n_experts, "top_k": int(cfg.num_experts_per_tok), "n_shared_experts": n_shared,
            "hidden": hidden, "moe_intermediate": two_i // 2, "expert_params": expert_params,
            "non_expert_params": float(non_expert),
            "attn_params_per_layer": int(sum(p.numel() for p in layer.self_attn.parameters())),
            "lm_head_params": int(model.get_output_embeddings().weight.numel()),
            "kv_bytes_per_token": _kv_bytes_per_token(cfg, len(model.model.layers), bytes_per),
            "precision": precision, "dense_intermediate": _dense_intermediate(cfg, len(model.model.layers) - len(index))}


def _dense_intermediate(cfg, n_dense: int) -> int:
    """FFN width of the dense layers (HF ``intermediate_size``), 0 without dense layers."""
    return int(getattr(cfg, "intermediate_size", 0) or 0) if n_dense else 0


def draft_spec(draft, name: str) -> dict:
    """``conf/draft``-style fields of a dense draft model (``name: none`` without one)."""
    if draft is None:
        return dict(config.load_preset("draft", "none"))
    cfg = draft.config.get_text_config()
    bytes_per = config.PRECISION_BYTES[_precision(draft)]
    return {"name": name, "params": float(sum(p.numel() for p in draft.parameters())),
            "bytes_per_param": bytes_per, "n_layers": int(cfg.num_hidden_layers),
            "kv_bytes_per_token": _kv_bytes_per_token(cfg, cfg.num_hidden_layers, bytes_per)}


def policy_context(policy, spec: RunSpec, profile: np.ndarray | None = None,
                   future: np.ndarray | None = None) -> PolicyContext:
    """The :class:`PolicyContext` that ``run_one`` builds for the same run: the run's specification
    resolved as the simulator resolves it (:func:`sim.run.resolve.resolve`: runtime, gamma, draft,
    memory plan), its cost model (:func:`sim.run.resolve.run_cost_model`) and context
    (:func:`sim.protocol.build_context`) built for the live ``policy`` object by the functions the
    simulator uses; ``spec.run.table_tokens`` is the cost table's KV length."""
    from dataclasses import replace

    from sim.run.resolve import resolve, run_cost_model

    r = replace(resolve(spec), policy=policy)
    cost = run_cost_model(r)
    return build_context(policy, cost, r.plan.n_slots, r.gamma, spec.run.table_tokens, spec.run.seed, profile, future)
