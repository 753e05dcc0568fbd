"""Loading the target and draft of a live run (tiny, synthetic or checkpoint) and offloading it.

:func:`load_models` resolves names (reusing :mod:`real.model_loading`), builds or loads the
models, and reports bad names before weights load. :func:`offload` then moves the target's
routed experts to host memory, the rest of the target to the device, and installs the executor.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from real.model_loading import (CaptureModels, normalize_device, is_tiny, load_model, moe_summary, resolve_device,
                                resolve_dtype)


@dataclass
class LoadedModels:
    """A target/draft pair ready to offload, with what the run records about them."""

    target: torch.nn.Module
    draft: torch.nn.Module | None
    target_name: str
    draft_name: str | None
    device: torch.device
    precision: str
    n_shared: int
    eos: list
    vocab: int
    encode: object = None   # text -> ids, for text prompts (None: only tiny:N prompts)


def load_models(opts) -> LoadedModels:
    """Build or load ``opts``' models (target on the host unless synthetic on a GPU)."""
    device = normalize_device(resolve_device(opts.device))
    precision = opts.dtype if opts.dtype != "auto" else ("float32" if device.type == "cpu" else "bfloat16")
    dtype = resolve_dtype(precision)
    if opts.synthetic:
        from real.offload.synthetic_model import SyntheticSpec, build_synthetic
        spec = SyntheticSpec(opts.synthetic, opts.layers, opts.draft_layers, opts.hidden,
                             opts.moe_intermediate, opts.vocab, opts.residual_gain, opts.seed)
        target, draft = build_synthetic(spec, str(device), dtype)
        return LoadedModels(target, draft, spec.name(), spec.name() + ":draft", device, precision,
                            0, [], int(target.config.vocab_size))
    if not opts.target:
        raise ValueError("set target=NAME (tiny:qwen3_moe, a checkpoint) or synthetic=qwen3_30b_a3b")
    names = CaptureModels(opts.target, opts.draft, opts.tokenizer, precision, str(device), opts.seed, opts.chat)
    target = load_model(opts.target, dtype, "cpu", opts.seed)     # experts go to host memory anyway
    draft = load_model(opts.draft, dtype, str(device), opts.seed) if opts.draft else None
    names.target = target
    encode = None if is_tiny(opts.target) and not opts.tokenizer else names.encode
    return LoadedModels(target, draft, opts.target, opts.draft, device, precision,
                        moe_summary(target)["n_shared_experts"], names.eos(), names.vocab, encode)


def offload(models: LoadedModels, cpu_workers: int = 1, faults=None, api=None):
    """Experts to host memory, the rest of the target to the device, executor installed (``api``:
    the device API, default :func:`real.offload.device_api.device_api` of the device; tests pass
    a CPU stand-in)."""
    from real.offload.device_api import device_api
    from real.offload.executor import OffloadExecutor
    from real.offload.experts_fn import install, moe_modules, take_model_experts
    api = api if api is not None else device_api(models.device)
    host = take_model_experts(models.target, models.device, api)
    models.target.to(models.device)
    if models.device.type == "cuda":
        torch.cuda.empty_cache()   # the experts' device copies (synthetic models are built there) are gone
    _, experts, gates = moe_modules(models.target)
    executor = OffloadExecutor(host, [m.act_fn for m in experts], gates, models.device, cpu_workers, faults, api)
    install(models.target, executor)
    return executor
