"""Micro-measurements for ``python -m real profile``: copies, expert math, matmuls, forwards.

Every function returns seconds per operation (the median of ``reps`` timed repetitions after a
warm-up); on CUDA the device is synchronised around each timed block so kernel time is included.
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from real.offload.expert_math import expert_forward


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device, reps: int, inner: int = 1, warmup: int = 2) -> float:
    """Median seconds of one call of ``fn`` (``inner`` calls per timed block)."""
    for _ in range(warmup):
        fn()
    sync(device)
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def h2d(nbytes: int, device: torch.device, pinned: bool, reps: int) -> float:
    """One host->device copy of ``nbytes`` (host->host on a CPU device)."""
    src = torch.empty(nbytes, dtype=torch.uint8)
    if pinned and device.type == "cuda":
        src = src.pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return timed(lambda: dst.copy_(src, non_blocking=pinned), device, reps)


def fit_link(sizes: list[int], seconds: list[float]) -> tuple[float, float]:
    """Least-squares ``t = latency + bytes / bandwidth``: returns ``(latency_us, GB/s)``."""
    slope, intercept = np.polyfit(np.asarray(sizes, float), np.asarray(seconds, float), 1)
    return max(0.1, float(intercept) * 1e6), 1.0 / max(float(slope), 1e-18) / 1e9


def expert_table(gate_up: list, down: list, act, device: torch.device, max_tokens: int, reps: int,
                 dtype: torch.dtype) -> list[float]:
    """Microseconds for one expert with n = 0..max_tokens tokens: gathering its rows, its math.

    ``gate_up`` / ``down`` hold several distinct experts, used in turn so that caches do not hold
    the weights between calls (as in decoding, where each expert is read once per layer).
    """
    hidden = gate_up[0].shape[1]
    table = [0.0]
    for n in range(1, max_tokens + 1):
        x = torch.randn(max(n, 16), hidden, dtype=dtype, device=device)
        w = torch.rand(n, dtype=dtype, device=device)
        tok = torch.arange(n, device=device)
        state = {"i": 0}

        def one():
            i = state["i"] = (state["i"] + 1) % len(gate_up)
            expert_forward(x[tok], gate_up[i], down[i], act, w)
        table.append(1e6 * timed(one, device, reps, inner=len(gate_up)))
    return table


def cpu_expert_table(gate_up: list, down: list, act, max_tokens: int, reps: int, dtype: torch.dtype,
                     workers: int = 1) -> list[float]:
    """Microseconds per expert on the CPU tier as the executor drives it: all of a layer's cold
    experts submitted to the worker pool at once, the layer waiting for the last one."""
    from real.offload.cpu_tier import CpuTier
    tier = CpuTier(workers)
    hidden = gate_up[0].shape[1]
    table = [0.0]
    try:
        for n in range(1, max_tokens + 1):
            inputs = (torch.randn(max(n, 16), hidden, dtype=dtype), torch.rand(max(n, 16), 1, dtype=dtype))
            rows = (np.arange(n), np.zeros(n, dtype=np.int64))

            def layer():
                futures = [tier.submit(i, inputs, rows, g, d, act) for i, (g, d) in enumerate(zip(gate_up, down))]
                for f in futures:
                    f.result()
            table.append(1e6 * timed(layer, torch.device("cpu"), reps) / len(gate_up))
    finally:
        tier.close()
    return table


def bandwidth(device: torch.device, nbytes: int, reps: int) -> float:
    """Device memory bandwidth in GB/s from a device-to-device copy (read + write)."""
    a = torch.empty(nbytes, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    return 2 * nbytes / timed(lambda: b.copy_(a), device, reps) / 1e9


def gemv_bandwidth(device: torch.device, dtype: torch.dtype, rows: int, cols: int, reps: int) -> float:
    """Achieved GB/s of a one-token matrix-vector product (decode's memory-bound kernel)."""
    m = torch.randn(rows, cols, dtype=dtype, device=device)
    v = torch.randn(cols, 1, dtype=dtype, device=device)
    return m.numel() * m.element_size() / timed(lambda: m @ v, device, reps) / 1e9


def matmul_tflops(device: torch.device, dtype: torch.dtype, size: int, reps: int) -> float:
    """Sustained TFLOP/s of a square matmul."""
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    return 2 * size ** 3 / timed(lambda: a @ b, device, reps) / 1e12
