"""Random-weight models of a real MoE's shape, so validation needs no download.

``synthetic=qwen3_30b_a3b`` builds a Qwen3-MoE with Qwen3-30B-A3B's routing and expert shape
(hidden 2048, 128 experts, top-8, moe_intermediate 768, 32/4 heads of 128, vocabulary 151936;
48 layers, fewer with ``layers=N``) and a dense draft of Qwen3-1.7B's shape (hidden 2048, 28
layers). Weights are drawn from one seed on the target device (fast on a GPU). As for the tiny
models (:mod:`real.tiny_models`), target and draft share their embedding and output tables and
their residual branches are calibrated so that, on random tokens, what the layers add to the
residual stream is ``RESIDUAL_RATIO x residual_gain`` of the embedding's norm (the tiny models' own
ratio, about 0.06), whatever the width and depth: drafts are often but not always accepted. CPU tests shrink ``hidden`` / ``moe_intermediate`` / ``vocab`` (the attention then uses
4 heads of ``hidden // 4``, 2 of them for keys and values).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

SHAPES = {
    "qwen3_30b_a3b": dict(hidden_size=2048, num_hidden_layers=48, num_attention_heads=32,
                          num_key_value_heads=4, head_dim=128, intermediate_size=6144,
                          moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
                          norm_topk_prob=True, vocab_size=151936, max_position_embeddings=40960,
                          rms_norm_eps=1e-6),
}
DRAFT_SHAPE = dict(hidden_size=2048, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                   head_dim=128, intermediate_size=6144)   # Qwen3-1.7B
RESIDUAL = ("o_proj.weight", "down_proj.weight", "experts.down_proj")
RESIDUAL_RATIO = 0.06
CALIBRATION_TOKENS = 32


@dataclass
class SyntheticSpec:
    """A synthetic target/draft pair: the real shape, optionally shrunk."""

    shape: str = "qwen3_30b_a3b"
    layers: int | None = None          # MoE layers of the target (default: the real count)
    draft_layers: int | None = None    # draft layers (default: Qwen3-1.7B's 28)
    hidden: int | None = None
    moe_intermediate: int | None = None
    vocab: int | None = None
    residual_gain: float = 1.0
    seed: int = 0

    def name(self) -> str:
        """The model name recorded in rows and traces (shape plus what was shrunk)."""
        parts = [f"synthetic:{self.shape}"] + [f"{k}{v}" for k, v in (
            ("L", self.layers), ("H", self.hidden), ("I", self.moe_intermediate), ("V", self.vocab)) if v]
        return ":".join(parts)


def _configs(spec: SyntheticSpec):
    from transformers import Qwen3Config, Qwen3MoeConfig
    if spec.shape not in SHAPES:
        raise ValueError(f"unknown synthetic shape {spec.shape!r}; choose one of {', '.join(SHAPES)}")
    t, d = dict(SHAPES[spec.shape]), dict(DRAFT_SHAPE)
    common = dict(vocab_size=spec.vocab or t["vocab_size"], tie_word_embeddings=False, eos_token_id=None,
                  bos_token_id=None, pad_token_id=None, max_position_embeddings=t["max_position_embeddings"])
    t.update(common, num_hidden_layers=spec.layers or t["num_hidden_layers"])
    d.update(common, num_hidden_layers=spec.draft_layers or d["num_hidden_layers"])
    if spec.moe_intermediate:
        t["moe_intermediate_size"] = spec.moe_intermediate
    if spec.hidden and spec.hidden != t["hidden_size"]:
        small = dict(hidden_size=spec.hidden, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=max(8, spec.hidden // 4), intermediate_size=2 * spec.hidden)
        t.update(small)
        d.update(small)
    return Qwen3MoeConfig(**t), Qwen3Config(**d)


def build_synthetic(spec: SyntheticSpec, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """``(target, draft)`` in eval mode on ``device``, drawn from ``spec.seed``."""
    from transformers import AutoModelForCausalLM
    t_cfg, d_cfg = _configs(spec)
    t_cfg._experts_implementation = "eager"
    models = []
    for cfg, offset in ((t_cfg, 1), (d_cfg, 2)):
        with _no_init(), torch.device(device):   # every weight is drawn below: skip the library's init
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        _fill(model.to(device), spec.seed * 1000 + offset)
        models.append(model.eval())
    _share_tables(*models, spec.seed)
    for model in models:
        _calibrate(model, RESIDUAL_RATIO * spec.residual_gain, spec.seed)
    return models[0], models[1]


def _no_init():
    """transformers' context that skips weight initialisation (a no-op context if it is absent)."""
    from contextlib import nullcontext
    try:
        from transformers.initialization import no_init_weights
    except ImportError:
        return nullcontext()
    return no_init_weights()


def _generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


@torch.no_grad()
def _fill(model, seed: int) -> None:
    """Norms 1, every other weight N(0, 0.02)."""
    gen = _generator(next(model.parameters()).device, seed)
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.fill_(1.0)
            continue
        p.normal_(0.0, 0.02, generator=gen)


@torch.no_grad()
def _share_tables(target, draft, seed: int) -> None:
    """One embedding table (std 1) and one output table (std 0.5) for both models."""
    gen = _generator(next(target.parameters()).device, seed)
    embed, head = target.get_input_embeddings().weight, target.get_output_embeddings().weight
    embed.normal_(0.0, 1.0, generator=gen)
    head.normal_(0.0, 0.5, generator=gen)
    draft.get_input_embeddings().weight.copy_(embed)
    draft.get_output_embeddings().weight.copy_(head)


@torch.no_grad()
def _residual_ratio(model, tokens: torch.Tensor) -> float:
    """|final residual - embedding| / |embedding| on ``tokens`` (input of the final norm)."""
    seen = {}
    handle = model.model.norm.register_forward_hook(lambda m, args, out: seen.setdefault("x", args[0]))
    try:
        model(input_ids=tokens, use_cache=False)
    finally:
        handle.remove()
    embed = model.get_input_embeddings()(tokens)
    return float((seen["x"].float() - embed.float()).norm() / embed.float().norm())


@torch.no_grad()
def _calibrate(model, ratio: float, seed: int, rounds: int = 3) -> None:
    """Scale the residual-branch projections until the layers add ``ratio`` of the embedding."""
    device = model.get_input_embeddings().weight.device
    vocab = model.get_input_embeddings().weight.shape[0]
    tokens = torch.randint(0, vocab, (1, CALIBRATION_TOKENS), generator=_generator(device, seed + 17),
                           device=device)
    branches = [p for name, p in model.named_parameters() if name.endswith(RESIDUAL)]
    for _ in range(rounds):
        scale = ratio / max(_residual_ratio(model, tokens), 1e-12)
        for p in branches:
            p.mul_(scale)
