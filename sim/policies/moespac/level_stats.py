"""What a utility level is worth, learned online: per level, P(requested) and tokens when requested.

After each verify pass of a layer, the levels the estimator had predicted for that pass are scored
against the pass's counts: for every level ``s`` we accumulate how many experts sat at ``s``, how
many of them were requested and how many tokens they received. The sums decay geometrically
(``decay`` per layer pass: 0.999 keeps about 20 steps of a 48-layer model), so the estimates
follow a workload whose locality drifts. From them the expected GPU and CPU seconds of one expert
at each level follow from the cost table (linear interpolation between integer token counts).
"""
from __future__ import annotations

import numpy as np


class LevelStats:
    """Decayed per-level sums; :meth:`expected_costs` turns them into seconds per expert."""

    def __init__(self, K: int, n_max: int, gpu_table: np.ndarray, cpu_table: np.ndarray,
                 decay: float = 0.999):
        self.K, self.decay = K, decay
        lv = np.arange(K + 1, dtype=float)
        # weak prior (one pseudo-expert per level): higher levels are more likely to be used
        self.n = np.ones(K + 1)
        self.req = (lv + 1.0) / (K + 2.0)
        self.tok = self.req * (1.0 + lv * max(0, n_max - 1) / K)
        self.grid = np.arange(len(gpu_table), dtype=float)
        self.gpu_table, self.cpu_table = np.asarray(gpu_table, float), np.asarray(cpu_table, float)
        self._costs = None

    def observe(self, levels: np.ndarray, counts: np.ndarray, requested: np.ndarray) -> None:
        """Score one pass: ``levels`` were the predictions, ``counts`` what the pass asked for."""
        m = self.K + 1
        d = self.decay
        self.n *= d
        self.n += np.bincount(levels, minlength=m)
        self.req *= d
        self.req += np.bincount(levels, weights=requested, minlength=m)
        self.tok *= d
        self.tok += np.bincount(levels, weights=counts, minlength=m)
        self._costs = None

    def p_requested(self) -> np.ndarray:
        return self.req / np.maximum(self.n, 1e-12)

    def tokens_when_requested(self) -> np.ndarray:
        return np.maximum(1.0, self.tok / np.maximum(self.req, 1e-12))

    def expected_costs(self) -> tuple[np.ndarray, np.ndarray]:
        """(GPU s, CPU s) expected for one expert at each level 0..K (memoised until next observe)."""
        if self._costs is None:
            p, m = self.p_requested(), self.tokens_when_requested()
            g = p * np.interp(m, self.grid, self.gpu_table)
            c = p * np.interp(m, self.grid, self.cpu_table)
            self._costs = (g, c)
        return self._costs
