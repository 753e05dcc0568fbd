"""What a utility level is worth, learned online: per level, P(requested) and tokens when requested.

After each verify pass of a layer, the levels the estimator had predicted for that pass are scored
against the pass's counts: for every level ``s`` we accumulate how many experts sat at ``s``, how
many of them were requested and how many tokens they received. The sums decay geometrically
(``decay`` per layer pass, applied once per step: 0.999 keeps about 20 steps of a 48-layer model),
so the estimates
follow a workload whose locality drifts. From them the expected GPU and CPU seconds of one expert
at each level follow from the cost table (linear interpolation between integer token counts).
"""
from __future__ import annotations

import numpy as np


class LevelStats:
    """Decayed histogram ``H[s, c]`` of (predicted level, observed count) pairs; costs per level.

    :meth:`observe` takes the estimator's ``idx = s * W + c`` of the pass (one ``bincount``);
    :meth:`expected_costs` reduces ``H`` to P(requested), mean tokens when requested, and seconds.
    """

    def __init__(self, K: int, W: int, n_max: int, gpu_table: np.ndarray, cpu_table: np.ndarray,
                 decay: float = 0.999):
        self.K, self.W, self.decay = K, W, decay
        self.size = (K + 1) * W
        self.hist = np.zeros((K + 1, W))
        # weak prior, one pseudo-expert per level: level s is requested with probability
        # (s+1)/(K+2), by a share s/K of the window (at least one token) when it is
        for lv in range(K + 1):
            p = (lv + 1.0) / (K + 2.0)
            tokens = min(W - 1, max(1, round(lv * n_max / K)))
            self.hist[lv, 0] += 1.0 - p
            self.hist[lv, tokens] += p
        self.flat = self.hist.reshape(-1)
        self.cgrid = np.arange(W, dtype=float)
        self.grid = np.arange(len(gpu_table), dtype=float)
        self.gpu_table, self.cpu_table = np.asarray(gpu_table, float), np.asarray(cpu_table, float)

    def observe(self, idx: np.ndarray) -> list:
        """Score one pass: ``idx[e] = predicted level * W + count`` (from the estimator). Returns,
        per predicted level, the experts the pass did not request (count 0)."""
        b = np.bincount(idx, minlength=self.size)
        self.flat += b
        return b[::self.W].tolist()

    def decay_step(self, passes: int) -> None:
        """Age the histogram by ``passes`` layer passes (applied once per step, not per pass)."""
        self.flat *= self.decay ** passes

    def p_requested(self) -> np.ndarray:
        n = self.hist.sum(axis=1)
        return (n - self.hist[:, 0]) / np.maximum(n, 1e-12)

    def tokens_when_requested(self) -> np.ndarray:
        req = self.hist[:, 1:].sum(axis=1)
        return np.maximum(1.0, (self.hist @ self.cgrid) / np.maximum(req, 1e-12))

    def expected_costs(self) -> tuple[np.ndarray, np.ndarray]:
        """(GPU s, CPU s) expected for one expert at each level 0..K."""
        p, m = self.p_requested(), self.tokens_when_requested()
        g = p * np.interp(m, self.grid, self.gpu_table)
        c = p * np.interp(m, self.grid, self.cpu_table)
        return g, c
