"""Prediction signals an executor hands to policies, built lazily from the schedule.

Real systems predict experts from hidden states: the next layer's gate applied to this layer's
input (MixtralOffload, Fate, HybriMoE) or the draft model's correspondence with the target
(SP-MoE). A captured trace may carry such a prediction (``next_pred``); otherwise the prediction
is the true routing with each requested expert replaced, with probability ``1 - accuracy``, by a
random expert that was not requested. Signals are computed only when a policy reads them.
"""
from __future__ import annotations

import numpy as np

from sim.policies.base import DRAFT_ACCURACY, NEXT_LAYER_ACCURACY, Signals

__all__ = ["DRAFT_ACCURACY", "LazySignals", "NEXT_LAYER_ACCURACY", "noisy_counts"]


def noisy_counts(true: np.ndarray, accuracy: float, rng: np.random.Generator) -> np.ndarray:
    """Counts with each requested expert kept w.p. ``accuracy``, else moved to an unrequested one."""
    pred = true.copy()
    req = np.flatnonzero(true)
    if accuracy >= 1.0 or req.size == 0:
        return pred
    lost = req[rng.random(req.size) >= accuracy]
    free = np.flatnonzero(true == 0)
    if lost.size and free.size:
        dest = rng.choice(free, size=min(lost.size, free.size), replace=False)
        pred[dest] = true[lost[: dest.size]]
        pred[lost[: dest.size]] = 0
    return pred


class LazySignals(Signals):
    """:class:`Signals` whose fields are computed from the schedule on first access.

    ``recorded`` (optional) holds a captured trace's own signals per step: ``next_pred`` rows
    ``[n, L, k]`` (the next layer's gate on this layer's hidden state) and ``weights`` /
    ``experts`` rows (gate weights and ids); when present they replace the simulated prediction
    and the count share, exactly as the live executor computes them (:mod:`real.offload.signals`).
    """

    def __init__(self, counts: np.ndarray, step: int, rng: np.random.Generator,
                 next_acc: float, draft_acc: float, recorded: dict | None = None):
        self._counts, self._step, self._rng = counts, step, rng
        self._next_acc, self._draft_acc = next_acc, draft_acc
        self._rec = recorded or {}
        self._rows = self._rec.get("next_pred")
        self.layer = 0
        self._draft = None
        self._next: dict[int, np.ndarray | None] = {}

    @property
    def draft_pred(self) -> np.ndarray:
        if self._draft is None:
            c = self._counts[self._step]
            self._draft = np.stack([noisy_counts(c[l], self._draft_acc, self._rng) for l in range(c.shape[0])])
        return self._draft

    @property
    def next_pred(self) -> np.ndarray | None:
        """The prediction for layer ``layer + 1``, drawn once per layer (reading it again returns the same)."""
        if self.layer not in self._next:
            self._next[self.layer] = self._predict_next()
        return self._next[self.layer]

    def _predict_next(self) -> np.ndarray | None:
        c = self._counts[self._step]
        nxt = self.layer + 1
        if nxt >= c.shape[0]:
            return None
        if self._rows is not None:  # recorded prediction: next-layer gate on this layer's hidden state
            rows = self._rows[self._step][:, self.layer]
            return np.bincount(rows[rows >= 0].ravel(), minlength=c.shape[1])
        return noisy_counts(c[nxt], self._next_acc, self._rng)

    @property
    def router_scores(self) -> np.ndarray:
        """This layer's mean gate weight per expert (recorded), else each expert's share of the counts."""
        c = self._counts[self._step, self.layer]
        if "weights" in self._rec:
            ids = self._rec["experts"][self._step][:, self.layer]
            w = self._rec["weights"][self._step][:, self.layer]
            return np.bincount(ids.ravel(), weights=w.ravel(), minlength=c.shape[0]) / max(1, ids.shape[0])
        return c / max(1, int(c.sum()))
