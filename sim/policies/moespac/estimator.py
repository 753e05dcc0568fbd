"""Speculative Utility Estimator: verify-window counts -> discrete utility levels 0..K.

Each (layer, expert) holds a level ``s`` in ``0..K``. After a verify pass of layer ``l`` the
window's counts ``c`` (tokens among the ``n`` verified that chose the expert, ``0..n``) move every
level by at most one (the "inertial transition" of the authors' release)::

    s <- min(K, s + 1)   if c - s >= U
    s <- max(0, s - 1)   elif s - c >= D
    s <- s               otherwise

Read as a filter, ``U`` is an admission threshold (a cold expert becomes level 1 only when at
least ``U`` of the window's tokens chose it) and a level settles in ``[c - U + 1, c]``; with
``D = 1`` an expert loses a level whenever fewer tokens than its level chose it.

Modes:

* ``"static"`` -- the authors' setting: ``U`` and ``D`` fixed (5 and 1).
* ``"adaptive"`` -- adaptive boundary calibration (ours; the paper's rule is unpublished).
  ``U_l = clip(ceil(f_l * n), 1, n)``: the up-boundary is a fraction ``f_l`` of the verified window
  length ``n``, so "up" means the same share of the window whether 1, 5 or 17 tokens were verified
  (``f = 0.5``, the default start, gives U = 5 for n = 9: a majority-ish share, the authors' value).
  A per-layer feedback term holds the layer's hot set ``|{s >= 1}|`` near its share of the slots
  (``hot_target * n_slots / L``): after each update ``f_l <- f_l * exp(gain * err)`` with
  ``err = clip((hot - target) / target, -1, 1)``, so an overfull layer raises its admission bar and
  an underfull one lowers it; ``f_l`` is clamped to ``[0.5 / n_max, 1]`` (just below U = 1, so it
  cannot wind up). ``D`` stays 1 for every ``n``: the rule compares ``c`` with the level itself, so
  the down-boundary is already scale-free, and any ``D > 1`` would make the levels below ``D``
  absorbing (``s - c <= s`` can never reach ``D`` there), freezing stale experts hot.
* ``"binary"`` -- the no-estimator ablation: level K if the expert was requested in the last
  window, else 0 (no counts, no inertia).
"""
from __future__ import annotations

import numpy as np

MODES = ("static", "adaptive", "binary")


class UtilityEstimator:
    """Levels ``[L, E]`` (int16) updated one layer at a time from verify counts (vectorised)."""

    def __init__(self, n_layers: int, n_experts: int, *, K: int = 5, mode: str = "adaptive",
                 up: int = 5, down: int = 1, u_frac0: float = 0.5, gain: float = 0.3,
                 target: float = 1.0, n_max: int = 9):
        if mode not in MODES:
            raise ValueError(f"estimator mode {mode!r} is not one of {MODES}")
        if K < 1 or up < 1 or down < 1:
            raise ValueError(f"need K, up, down >= 1 (got {K}, {up}, {down})")
        self.K, self.mode, self.up, self.down, self.gain = K, mode, up, down, gain
        self.target = float(target)              # hot experts wanted per layer
        self.f_min = 0.5 / max(1, n_max)
        self.levels = np.zeros((n_layers, n_experts), dtype=np.int16)
        self.frac = np.full(n_layers, float(np.clip(u_frac0, self.f_min, 1.0)))
        self.last_up = np.full(n_layers, up if mode == "static" else 0, dtype=np.int64)

    def boundaries(self, layer: int, n: int) -> tuple[int, int]:
        """(U, D) for ``layer`` after a window of ``n`` verified tokens."""
        if self.mode == "adaptive":
            n = max(1, n)
            return int(min(n, max(1, np.ceil(self.frac[layer] * n - 1e-9)))), 1
        return self.up, self.down

    def update(self, layer: int, counts: np.ndarray, n: int) -> np.ndarray:
        """Apply one window's counts to ``layer``; returns the layer's new levels (a view)."""
        s = self.levels[layer]
        if self.mode == "binary":
            s[:] = np.where(counts > 0, self.K, 0)
            return s
        U, D = self.boundaries(layer, n)
        self.last_up[layer] = U
        c = counts.astype(np.int16)
        up = (c - s >= U) & (s < self.K)
        down = (s - c >= D) & ~up
        s += up
        s -= down
        if self.mode == "adaptive":
            self._calibrate(layer, int(np.count_nonzero(s)))
        return s

    def _calibrate(self, layer: int, hot: int) -> None:
        """Feedback: nudge the layer's up-fraction towards holding ``target`` hot experts."""
        t = max(self.target, 1.0)
        err = min(1.0, max(-1.0, (hot - t) / t))
        self.frac[layer] = min(1.0, max(self.f_min, self.frac[layer] * float(np.exp(self.gain * err))))
