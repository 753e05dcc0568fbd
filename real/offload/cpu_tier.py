"""The CPU tier: a thread pool computing cold experts from host weights while the device works.

Each task computes one expert with :func:`real.offload.expert_math.expert_forward` on host
tensors and reports when it finished, so the executor can measure the CPU's busy time and the
per-layer imbalance (the bubble) between the CPU and the device.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from real.offload.expert_math import expert_forward


class CpuTier:
    """``workers`` threads (default 1: one expert at a time, each using torch's intra-op threads)."""

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise ValueError(f"cpu_workers must be >= 1, got {workers}")
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cpu-experts")
        self.busy_s = 0.0
        self._lock = threading.Lock()

    def submit(self, expert: int, inputs: tuple, rows: tuple, gate_up: torch.Tensor, down: torch.Tensor,
               act) -> Future:
        """Compute one expert on its rows ``(tok, pos)`` (numpy) of the host ``inputs = (hidden,
        top_k_weights)``; the future gives ``(expert, output, finished_at)``."""
        return self.pool.submit(self._task, expert, inputs, rows, gate_up, down, act)

    def _task(self, expert, inputs, rows, gate_up, down, act):
        t0 = time.perf_counter()
        with torch.inference_mode():
            hidden, weights = inputs
            tok, pos = (torch.from_numpy(r) for r in rows)
            out = expert_forward(hidden[tok], gate_up, down, act, weights[tok, pos])
        t1 = time.perf_counter()
        with self._lock:
            self.busy_s += t1 - t0
        return expert, out, t1

    def close(self) -> None:
        """Finish queued experts and stop the threads."""
        self.pool.shutdown(wait=True)
