"""The cost model's numbers a policy may use to decide: pure data, built by
:meth:`sim.machine.cost_model.CostModel.cost_table` (or by ``python -m real profile`` tables through it)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CostTable:
    """The cost model's numbers a policy may use to decide (seconds; pure data, no clock).

    ``gpu_expert_s[n]`` / ``cpu_expert_s[n]``: time for one expert with ``n`` tokens routed to it
    (index 0..len-1; beyond the end, extrapolate linearly from the last two entries).
    """

    gpu_expert_s: np.ndarray
    cpu_expert_s: np.ndarray
    transfer_s: float          # one expert host->device over PCIe
    layer_fixed_s: float       # non-expert GPU time of one layer (attention, router, shared experts)
    draft_phase_s: float       # the whole draft phase before a verify pass (0 in AR)
    expert_bytes: int
    step_fixed_s: float = 0.0  # per target forward outside the MoE layers (embeddings, lm_head, host)
    dram_left_bps: float = float("inf")  # host DRAM bytes/s left to CPU experts while a copy runs
    layer_fixed_by_n: tuple = ()   # layer_fixed for a forward of 1, 2, ... tokens (empty: layer_fixed_s for all)
    step_fixed_by_n: tuple = ()    # step_fixed for a forward of 1, 2, ... tokens (empty: step_fixed_s for all)

    def layer_fixed(self, n_tokens: int) -> float:
        """Non-expert GPU time of one layer for a forward of ``n_tokens`` tokens (an autoregressive
        step is 1, a verify pass of a draft of ``g`` tokens is ``g + 1``); ``layer_fixed_s`` (the
        run's largest verify window) beyond the table."""
        return _by_n(self.layer_fixed_by_n, n_tokens, self.layer_fixed_s)

    def step_fixed(self, n_tokens: int) -> float:
        """Per-forward time outside the MoE layers for ``n_tokens`` tokens (as :meth:`layer_fixed`)."""
        return _by_n(self.step_fixed_by_n, n_tokens, self.step_fixed_s)

    @staticmethod
    def _lookup(table: np.ndarray, n: np.ndarray | int) -> np.ndarray:
        n = np.asarray(n)
        last = len(table) - 1
        slope = table[last] - table[last - 1] if last >= 1 else 0.0
        inside = table[np.minimum(n, last)]
        return np.where(n <= last, inside, table[last] + (n - last) * slope)

    def gpu(self, n):
        """GPU time of one expert with ``n`` tokens (vectorised over ``n``)."""
        return self._lookup(self.gpu_expert_s, n)

    def cpu(self, n):
        """CPU time of one expert with ``n`` tokens (vectorised over ``n``)."""
        return self._lookup(self.cpu_expert_s, n)


def _by_n(table: tuple, n: int, default: float) -> float:
    return float(table[n - 1]) if 1 <= n <= len(table) else default
