"""``python -m real profile``: measure this machine and write a hardware YAML for the cost model.

Measured: host->device bandwidth by transfer size (pinned and pageable) and one expert's transfer;
device and CPU time of one expert versus the tokens routed to it (n = 0..max_tokens, the model's
expert shape, the exact math of the offloaded layer); the draft's one-token forward; the target's
per-layer and per-forward overheads without experts; device and host memory bandwidth and matmul
rate. The YAML holds every :class:`sim.machine.specs.HardwareSpec` field plus ``tables`` (``gpu_expert_us``,
``cpu_expert_us``, ``transfer_us``: they override the cost model's roofline) and
``tables.measured`` (date, machine, torch version, raw measurements). Roofline fields that the
tables do not cover (``gpu_kernel_us``, ``step_overhead_us``) are fitted so that the cost model's
expert-free speculative step (draft tokens, target layers, lm_head) matches the measured one.
Without CUDA the "GPU" numbers are measured on the CPU device and labelled so.
"""
from __future__ import annotations

import datetime
import os
import platform

import numpy as np
import torch

from real.offload import measure as M
from real.offload.expert_math import LayerRouting

KIB, MIB, GIB = 2 ** 10, 2 ** 20, 2 ** 30


def _null_experts(self, hidden_states, top_k_index, top_k_weights):
    """Experts whose outputs are zero: what remains is the offloaded layer's fixed work (routing
    to the host, index rows to the device, combining the per-expert outputs)."""
    routing = LayerRouting(top_k_index, self.num_experts)
    routing.to_device(hidden_states.device)
    zeros = hidden_states.new_zeros(top_k_index.numel(), hidden_states.shape[-1])
    starts = [0] + np.cumsum(routing.counts[routing.requested].astype(np.int64)).tolist()
    outs = {int(e): zeros[a:b] for e, a, b in zip(routing.requested.tolist(), starts[:-1], starts[1:])}
    return routing.combine(outs, hidden_states)


def _forward_s(model, device, n: int, context: int, reps: int) -> float:
    """Seconds of one cached forward of ``n`` tokens after ``context`` tokens."""
    from transformers import DynamicCache
    vocab = model.get_input_embeddings().weight.shape[0]
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(input_ids=torch.randint(0, vocab, (1, context), device=device), cache=cache, use_cache=True,
              logits_to_keep=1)
        x = torch.randint(0, vocab, (1, n), device=device)

        def one():
            model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1)
            cache.crop(-n)
        return M.timed(one, device, reps)


def _head_s(model, device, n: int, reps: int) -> float:
    hidden = model.get_input_embeddings().weight.shape[1]
    h = torch.randn(1, n, hidden, dtype=next(model.parameters()).dtype, device=device)
    with torch.inference_mode():
        return M.timed(lambda: model.lm_head(model.model.norm(h[:, -1:])), device, reps)


def _experts(host, device, dtype, count: int):
    """``count`` distinct experts (gate_up, down lists) on ``device`` and on the host."""
    pairs = [host.expert(l, e) for l in range(host.n_layers) for e in range(host.n_experts)][:count]
    on_dev = ([g.to(device) for g, _ in pairs], [d.to(device) for _, d in pairs])
    return on_dev, ([g for g, _ in pairs], [d for _, d in pairs])


def measure_all(opts) -> dict:
    """Every measurement of the profile, as a flat dict of numbers and lists."""
    from real.offload.experts_fn import moe_modules, take_model_experts
    from real.offload.models import load_models
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    models = load_models(opts)
    device, target = models.device, models.target
    dtype = next(target.parameters()).dtype
    reps = 5 if opts.fast else 20
    host = take_model_experts(target, device)
    target.to(device)
    ALL_EXPERTS_FUNCTIONS.register("profile_null", _null_experts)
    target.set_experts_implementation("profile_null")
    act = moe_modules(target)[1][0].act_fn
    n = 4 if opts.fast else 16
    (dg, dd), (hg, hd) = _experts(host, device, dtype, n)
    sizes = [64 * KIB, MIB, 4 * MIB] if opts.fast else [64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB]
    pinned = [M.h2d(s, device, True, reps) for s in sizes]
    expert_pinned = [t.pin_memory() if device.type == "cuda" else t for t in (hg[0], hd[0])]
    buf = [torch.empty_like(t, device=device) for t in expert_pinned]
    transfer = M.timed(lambda: [b.copy_(t, non_blocking=True) for b, t in zip(buf, expert_pinned)], device, reps)
    big = 32 * MIB if opts.fast else 512 * MIB
    mm = 256 if opts.fast else (8192 if device.type == "cuda" else 1024)
    layers_total = len(target.model.layers)
    out = {
        "device": device, "dtype": str(dtype), "models": models, "host": host, "sizes": sizes,
        "h2d_pinned_s": pinned, "h2d_pageable_s": [M.h2d(s, device, False, reps) for s in sizes],
        "transfer_s": transfer, "expert_bytes": host.expert_bytes,
        "gpu_expert_us": M.expert_table(dg, dd, act, device, opts.max_tokens, reps, dtype),
        "cpu_expert_us": M.cpu_expert_table(hg, hd, act, opts.max_tokens, reps, dtype, opts.cpu_workers),
        "gpu_bw_gbs": M.bandwidth(device, big, reps),
        "gpu_gemv_gbs": M.gemv_bandwidth(device, dtype, 4096 if not opts.fast else 512, host.expert_shapes[0][1], reps),
        "gpu_tflops": M.matmul_tflops(device, dtype, mm, reps),
        "cpu_bw_gbs": M.bandwidth(torch.device("cpu"), big, reps),
        "cpu_gemv_gbs": M.gemv_bandwidth(torch.device("cpu"), dtype, 4096 if not opts.fast else 512,
                                         host.expert_shapes[0][1], reps),
        "cpu_tflops": M.matmul_tflops(torch.device("cpu"), torch.float32, 256 if opts.fast else 1024, reps),
        "verify_s": _forward_s(target, device, opts.gamma + 1, opts.context, reps),
        "head_s": _head_s(target, device, opts.gamma + 1, reps),
        "layers_total": layers_total,
        "draft_s": _forward_s(models.draft, device, 1, opts.context, reps) if models.draft is not None else None,
        "sync_s": _sync_s(device, reps),
    }
    return out


def _sync_s(device, reps: int) -> float:
    """A layer's join: routing to the host, a CPU-tier round trip, a small result back."""
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(1)
    small = torch.zeros(64, device=device)

    def one():
        small.to("cpu")
        pool.submit(lambda: None).result()
        small.copy_(torch.zeros(64))
    try:
        return M.timed(one, device, reps)
    finally:
        pool.shutdown()


def host_ram_gib() -> float:
    """Physical memory of this machine (GiB)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    except (ValueError, OSError, AttributeError):
        return 16.0


def machine_names(device: torch.device) -> tuple[str, str]:
    """``(gpu, cpu)`` descriptions; without CUDA the GPU tier is the CPU, and says so."""
    cpu = f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs"
    if device.type == "cuda":
        return torch.cuda.get_device_name(device), cpu
    return "none: no CUDA device, the GPU tier was measured on the CPU", cpu


def stamp() -> str:
    """Local date and time, ISO 8601 with the UTC offset."""
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")
