"""The prefill crossover: the micro-batch size at which copying a layer's touched experts to the GPU
beats computing them on the CPU (the number llama.cpp issue #27425 asks for; reference/user-needs.md need 5).

For a micro-batch size ``U``, ``samples`` consecutive micro-batches of a synthetic prompt are priced
layer by layer with :class:`sim.prefill.costs.PrefillCosts` (every expert in host memory unless
``resident`` says otherwise), at the KV position ``context``: the experts' time under each choice,
and the prefill speed each choice gives (attention and head included). The crossover is the
smallest ``U`` from which copying is cheaper for every larger size of the table, refined to one
token by bisection between the two table sizes that bracket it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.prefill.costs import PrefillCosts
from sim.prefill.routing import ubatch_counts


@dataclass(frozen=True)
class CrossoverRow:
    """One micro-batch size: mean per-layer numbers over the sampled micro-batches and layers."""

    ubatch: int
    touched: float          # host experts a layer's micro-batch touches
    copy_ms: float          # experts' part of a layer when copied (PCIe + GPU)
    cpu_ms: float           # ... when the host experts run on the CPU
    copy_tok_s: float       # prefill speed with every layer copied
    cpu_tok_s: float        # ... with every layer on the CPU

    @property
    def winner(self) -> str:
        return "copy" if self.copy_ms < self.cpu_ms else "cpu"


def price(costs: PrefillCosts, experts: np.ndarray, resident: np.ndarray, ubatch: int, context: int,
          samples: int) -> CrossoverRow:
    """The :class:`CrossoverRow` of micro-batches of ``ubatch`` tokens (``experts``: ``[P, L, k]``)."""
    L, E = resident.shape
    n_sampled = max(1, min(samples, experts.shape[0] // ubatch))
    touched, t_copy, t_cpu, fixed = 0.0, 0.0, 0.0, 0.0
    for u in range(n_sampled):
        counts = ubatch_counts(experts, u * ubatch, (u + 1) * ubatch, E)
        fixed += costs.head_s(ubatch, last=False) + L * costs.attention_s(ubatch, context)
        for layer in range(L):
            idx = np.flatnonzero(counts[layer])
            host, res = idx[~resident[layer, idx]], idx[resident[layer, idx]]
            hn, rn = counts[layer, host], counts[layer, res]
            touched += host.size
            t_copy += costs.layer_s(True, hn, rn)
            t_cpu += costs.layer_s(False, hn, rn)
    per = n_sampled * L
    tokens = n_sampled * ubatch
    return CrossoverRow(ubatch, touched / per, 1e3 * t_copy / per, 1e3 * t_cpu / per,
                        tokens / (fixed + t_copy), tokens / (fixed + t_cpu))


def crossover(rows: list[CrossoverRow], refine=None) -> int | None:
    """The smallest table size from which copying wins at every larger size (None if it never does);
    ``refine(lo, hi)`` narrows it between the bracketing sizes."""
    best = None
    for row in reversed(rows):
        if row.winner != "copy":
            break
        best = row.ubatch
    if best is None or refine is None:
        return best
    below = [r.ubatch for r in rows if r.ubatch < best]
    return refine(below[-1], best) if below else best


def bisect(wins, lo: int, hi: int) -> int:
    """The smallest ``n`` in ``(lo, hi]`` with ``wins(n)``, given ``wins(hi)`` and not ``wins(lo)``."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if wins(mid):
            hi = mid
        else:
            lo = mid
    return hi


def crossover_table(hw, m, workload: str, sizes: list[int], context: int, samples: int, seed: int):
    """The rows for every size in ``sizes`` and the refined crossover, every routed expert in host
    memory (llama.cpp ``--cpu-moe``), for machine ``hw`` and model ``m``."""
    from sim.machine import specs as config
    from sim.machine.cost_model import CostModel
    from sim.prefill.routing import prompt_routing
    from sim.run.workload import routing_shape

    costs = PrefillCosts.build(CostModel(hw, m, config.draft("none")), max(sizes))
    experts = prompt_routing(m.name, workload, max(sizes) * samples, seed, routing_shape(m))
    resident = np.zeros((m.n_layers, m.n_experts), dtype=bool)
    rows = [price(costs, experts, resident, u, context, samples) for u in sizes]

    def wins(n: int) -> bool:
        return price(costs, experts, resident, n, context, samples).winner == "copy"

    return rows, crossover(rows, lambda lo, hi: bisect(wins, lo, hi))
