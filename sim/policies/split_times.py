"""Per-expert times as plain lists, and HybriMoE's greedy split (:mod:`sim.policies.split` re-exports both).

Time model: :mod:`sim.policies.split`'s docstring.
"""
from __future__ import annotations

import numpy as np

from sim.machine.cost_table import CostTable


class ExpertTimes:
    """``costs.gpu(n)`` and ``costs.cpu(n)`` as lists of floats over the tables' range (the same
    numbers, looked up without a numpy call per expert); beyond it, the cost table extrapolates."""

    def __init__(self, costs: CostTable) -> None:
        n = np.arange(max(len(costs.gpu_expert_s), len(costs.cpu_expert_s)))
        self.costs = costs
        self._gpu = np.asarray(costs.gpu(n), dtype=float).tolist()
        self._cpu = np.asarray(costs.cpu(n), dtype=float).tolist()

    def gpu(self, ns: list[int]) -> list[float]:
        """GPU time of one expert for each token count in ``ns``."""
        g, top = self._gpu, len(self._gpu)
        return [g[k] if k < top else float(self.costs.gpu(k)) for k in ns]

    def cpu(self, ns: list[int]) -> list[float]:
        """CPU time of one expert for each token count in ``ns``."""
        c, top = self._cpu, len(self._cpu)
        return [c[k] if k < top else float(self.costs.cpu(k)) for k in ns]


def two_ended(counts: np.ndarray, present: np.ndarray, costs: CostTable,
              times: ExpertTimes | None = None) -> np.ndarray:
    """HybriMoE's greedy two-ended queue (``HSS`` in its ``ktransformers/operators/experts.py``).

    Requested experts are queued present-first, each group by tokens descending (ties: expert id).
    The GPU takes from the head (a non-present head pays a transfer serialised on the link), the
    CPU from the tail; each round the side that would finish earlier takes its expert (ties go to
    the GPU), until the queue is empty. Returns ``[E]`` bool, True = GPU. ``times``: the same
    costs as an :class:`ExpertTimes` (faster for a caller that keeps one).
    """
    counts = np.asarray(counts)
    present = np.asarray(present, dtype=bool)
    on_gpu = np.zeros(len(counts), dtype=bool)
    req = (counts > 0).nonzero()[0]
    if not req.size:
        return on_gpu
    n = counts[req].astype(np.int64)
    pres = present[req]
    order = np.lexsort((req, -n, ~pres))           # present first, tokens descending, expert id
    ids = req[order].tolist()
    here = pres[order].tolist()
    if times is not None:
        ns = n[order].tolist()
        g, c = times.gpu(ns), times.cpu(ns)
    else:
        g = np.asarray(costs.gpu(n[order]), dtype=float).tolist()
        c = np.asarray(costs.cpu(n[order]), dtype=float).tolist()
    t_gpu = t_cpu = t_link = 0.0
    tau = costs.transfer_s
    head, tail = 0, len(ids) - 1                  # the queue is ids[head..tail]
    while head <= tail:
        start = t_gpu if here[head] else max(t_gpu, t_link + tau)
        gpu_end = start + g[head]
        cpu_end = t_cpu + c[tail]
        if gpu_end <= cpu_end:
            if not here[head]:
                t_link += tau
            t_gpu = gpu_end
            head += 1
        else:
            t_cpu = cpu_end
            tail -= 1
    on_gpu[ids[:head]] = True
    return on_gpu
