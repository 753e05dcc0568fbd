"""Fiddler's per-expert CPU/GPU rule as its code runs: resident experts always on the GPU.

Source: github.com/efeslab/fiddler ``src/fiddler/mixtral.py`` (``FiddlerMixtral.mixtral_forward``,
the ``cpu_offload`` branch; the same in commits 00e70f09 and f2c111c2). For each expert of a layer
it sets ``cost_per_expert[e, 0] = n_tokens * latency_cpu`` (CPU) and
``cost_per_expert[e, 1] = latency_gpu`` (a copy into ``expert_placeholder``), or ``0`` when
``is_expert_in_gpu(i_layer, e)``; then it enumerates all 2^8 configurations keeping the one of
least ``sum_cost`` (the comment says ``max(CPU, GPU)``, the code sums). A sum decomposes per
expert, so each expert independently takes its cheaper side, and the first configuration found
(bit 0 = GPU) wins ties: a resident expert always runs on the GPU (cost 0); a non-resident one is
copied when ``latency_gpu <= n * latency_cpu`` (70 <= 7 n: 10 tokens or more), else runs on the CPU.

Here the two latencies come from the cost table rather than Fiddler's constants (its own
``# TODO: find this value based on device config``): a copy costs ``transfer_s + gpu(n)``, the CPU
``cpu(n)``.
"""
from __future__ import annotations

import numpy as np

from sim.machine.cost_table import CostTable
from sim.policies.split_times import ExpertTimes


def resident_first(counts: np.ndarray, present: np.ndarray, costs: CostTable, max_fetch: int,
                   times: ExpertTimes | None = None) -> np.ndarray:
    """``[E]`` bool, True = GPU: every requested present expert, plus the requested non-present
    ones whose copy (``transfer_s + gpu(n)``) costs no more than ``cpu(n)``, at most ``max_fetch``
    of them (largest saving first, then expert id); experts with no tokens stay off the GPU."""
    counts = np.asarray(counts)
    present = np.asarray(present, dtype=bool)
    req = counts > 0
    on_gpu = req & present
    miss = np.flatnonzero(req & ~present)
    if max_fetch <= 0 or not miss.size:
        return on_gpu
    ns = counts[miss].astype(np.int64).tolist()
    times = times if times is not None else ExpertTimes(costs)
    saving = [c - (costs.transfer_s + g) for c, g in zip(times.cpu(ns), times.gpu(ns))]
    worth = sorted((i for i, s in enumerate(saving) if s >= 0), key=lambda i: (-saving[i], int(miss[i])))
    on_gpu[miss[worth[:max_fetch]]] = True
    return on_gpu
