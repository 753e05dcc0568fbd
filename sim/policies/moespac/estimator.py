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
  ``U = clip(ceil(f * n), 1, n)``: the up-boundary is a fraction ``f`` of the verified window
  length ``n``, so "up" asks the same share of the window whether 1, 9 or 17 tokens were verified
  (f = 5/9 would be the authors' U = 5 at n = 9). A feedback term holds the hot set (``s >= 1``)
  near a target: ``f <- f * exp(gain * err)`` per step (spread over the step's layer updates)
  with ``err = clip((hot - target) / target, -1, 1)`` -- an overfull hot set raises the admission
  bar, an underfull one lowers it (``f`` clamped to ``[0.5 / n_max, 1]``: just below U = 1, so
  it cannot wind up). ``f`` starts at the bottom (U = 1): the cache starts empty, so admitting
  every requested expert costs nothing until the hot set outgrows the target (starting at the
  authors' U = 5 instead costs 2% mean TPS over a 512-token run: the warm-up).

  - Scope ``"global"`` (default): one ``f`` for all layers, fed by the total hot set against
    ``L * target``. One admission bar means the marginal hot expert has the same count in every
    layer, so slots go where they buy the most hits; ``"layer"`` runs one loop per layer against
    the layer's share (measured: within 0.5% of each other).
  - The target (set by the policy) is ``hot_target x`` what the cache can serve per step, per
    layer: its slots plus the experts the PCIe link can swap in per step -- a slot freed after its
    layer ran is refilled for a later layer, so holding the hot set at the bare slot share leaves
    the link idle (measured at cache ratio 0.17 over seven workloads: 4.5% lower mean TPS).
  - ``D`` stays 1 for every ``n``: the rule compares ``c`` with the level itself, so the
    down-boundary is already scale-free, and any ``D > 1`` would make the levels below ``D``
    absorbing (``s - c <= s`` can never reach ``D`` there), freezing stale experts hot.
* ``"binary"`` -- the no-estimator ablation: level K if the expert was requested in the last
  window, else 0 (no counts, no inertia).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MODES = ("static", "adaptive", "binary")


def transition_table(K: int, W: int, U: int, D: int, binary: bool = False) -> np.ndarray:
    """New level for every (old level s, count c), flattened as ``table[s * W + c]`` (int64)."""
    s = np.arange(K + 1)[:, None]
    c = np.arange(W)[None, :]
    if binary:
        new = np.where(c > 0, K, 0) + 0 * s
    else:
        up = (c - s >= U) & (s < K)
        down = (s - c >= D) & ~up
        new = s + up - down
    return new.astype(np.int64).ravel()


@dataclass(frozen=True)
class EstimatorConfig:
    """The estimator's settings: levels ``K``; ``mode`` (one of :data:`MODES`); the inertial
    thresholds ``up``/``down``; the initial hot fraction ``u_frac0`` and calibration ``gain``; the
    hot experts wanted per layer (``target``); the largest verify count ``n_max``; the calibration
    ``scope`` (``global`` or ``layer``)."""

    K: int = 5
    mode: str = "adaptive"
    up: int = 5
    down: int = 1
    u_frac0: float = 0.5
    gain: float = 0.3
    target: float = 1.0
    n_max: int = 9
    scope: str = "global"

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"estimator mode {self.mode!r} is not one of {MODES}")
        if self.K < 1 or self.up < 1 or self.down < 1:
            raise ValueError(f"need K, up, down >= 1 (got {self.K}, {self.up}, {self.down})")
        if self.scope not in ("global", "layer"):
            raise ValueError(f"calibration scope must be 'global' or 'layer', got {self.scope!r}")


class UtilityEstimator:
    """Levels of every (layer, expert), updated one layer at a time from verify counts.

    The transition is a table lookup vectorised over the layer's experts: ``idx = s * W + c``
    indexes a precomputed ``(K+1) x W`` table per (U, D); the same ``idx`` (kept in
    :attr:`last_idx`) feeds :class:`~sim.policies.moespac.level_stats.LevelStats`.
    """

    def __init__(self, n_layers: int, n_experts: int, cfg: EstimatorConfig = EstimatorConfig()):
        K, mode, up, down, gain, scope = cfg.K, cfg.mode, cfg.up, cfg.down, cfg.gain, cfg.scope
        target, n_max, u_frac0 = cfg.target, cfg.n_max, cfg.u_frac0
        self.K, self.mode, self.up, self.down, self.gain = K, mode, up, down, gain
        self.scope, self.L = scope, n_layers
        self.hot = [0] * n_layers                # |{s >= 1}| per layer after its last update
        self.hot_total = 0
        self.W = max(64, n_max + 1)             # counts 0..W-1 are tabulated
        self.target = max(1.0, float(target))    # hot experts wanted per layer
        self.f_min = 0.5 / max(1, n_max)
        self.rows = [np.zeros(n_experts, dtype=np.int64) for _ in range(n_layers)]  # levels by layer
        self.frac = [min(1.0, max(self.f_min, float(u_frac0)))] * n_layers   # scope "layer"
        self.f_glob = self.frac[0]                                            # scope "global"
        self.last_up = [up if mode == "static" else 0] * n_layers
        self.last_idx = np.zeros(n_experts, dtype=np.int64)
        self._tables: dict[int, np.ndarray] = {}
        self._scaled: dict[int, np.ndarray] = {}     # W x table, per U: the next update's s * W
        self._rows_w = [np.zeros(n_experts, dtype=np.int64) for _ in range(n_layers)]  # rows x W

    @property
    def levels(self) -> np.ndarray:
        """All levels as an ``[L, E]`` array (a copy, for inspection)."""
        return np.stack(self.rows)

    def boundaries(self, layer: int, n: int) -> tuple[int, int]:
        """(U, D) for ``layer`` after a window of ``n`` verified tokens."""
        if self.mode == "adaptive":
            n = max(1, n)
            f = self.f_glob if self.scope == "global" else self.frac[layer]
            return min(n, max(1, math.ceil(f * n - 1e-9))), 1
        return self.up, self.down

    def table(self, U: int) -> np.ndarray:
        t = self._tables.get(U)
        if t is None:
            t = transition_table(self.K, self.W, U, self.down if self.mode == "static" else 1,
                                 binary=self.mode == "binary")
            self._tables[U] = t
            self._scaled[U] = t * self.W
        return t

    def update(self, layer: int, counts: np.ndarray, n: int) -> np.ndarray:
        """Apply one window's counts to ``layer``; returns the layer's new levels (a new array).

        ``idx = s * W + c`` adds the counts to the layer's levels kept pre-scaled by ``W`` (looked
        up in a ``W x table`` alongside the levels), one array operation instead of two."""
        U = self.boundaries(layer, n)[0]
        self.last_up[layer] = U
        if n >= self.W:                          # counts never exceed n (top-k ids are distinct)
            counts = np.minimum(counts, self.W - 1)
        table = self._tables.get(U)
        if table is None:
            table = self.table(U)
        idx = self._rows_w[layer] + counts
        self.last_idx = idx
        s = self.rows[layer] = table.take(idx)
        self._rows_w[layer] = self._scaled[U].take(idx)
        if self.mode == "adaptive":
            self._calibrate(layer, int(np.count_nonzero(s)))
        return s

    def _calibrate(self, layer: int, hot: int) -> None:
        """Feedback: nudge the up-fraction towards holding ``target`` hot experts per layer."""
        self.hot_total += hot - self.hot[layer]
        self.hot[layer] = hot
        t = self.target
        if self.scope == "layer":
            err = min(1.0, max(-1.0, (hot - t) / t))
            self.frac[layer] = min(1.0, max(self.f_min, self.frac[layer] * math.exp(self.gain * err)))
            return
        T = t * self.L
        err = min(1.0, max(-1.0, (self.hot_total - T) / T))
        self.f_glob = min(1.0, max(self.f_min, self.f_glob * math.exp(self.gain * err / self.L)))
