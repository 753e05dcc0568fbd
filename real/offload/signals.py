"""Prediction signals of the live executor (the counterpart of :mod:`sim.protocol.signals`).

* ``next_pred`` (MixtralOffload, Fate): the next MoE layer's router applied to this layer's MoE
  input, the cross-layer guess those systems use; computed only when a policy reads it (the
  gate's ``forward`` is called directly, so router-recording hooks do not see it).
* ``router_scores`` (HybriMoE): each expert's summed top-k gate weight over this layer's tokens,
  divided by the number of tokens (the mean gate weight; it sums to 1 with normalised top-k).
* ``draft_pred`` (SP-MoE): the verify counts of the previous step, per layer. SP-MoE feeds the
  draft's hidden states to the target's gates; a separate dense draft of another width has no
  such states, so the last verify window stands in for the coming one (stated here, and it is
  why the simulator's accuracy-parameterised prediction and this one differ).
"""
from __future__ import annotations

import numpy as np
import torch

from sim.policies.base import Signals


class RealSignals(Signals):
    """Signals of one decode step; the executor sets :meth:`at_layer` before each ``place``."""

    def __init__(self, gates: list, n_experts: int, last_window: np.ndarray | None):
        self._gates, self._E, self._last = gates, n_experts, last_window
        self.layer = 0
        self._hidden = self._routing = self._weights = None

    def at_layer(self, layer: int, hidden: torch.Tensor, routing, weights: torch.Tensor) -> None:
        """Point the signals at ``layer``'s MoE input, host routing and gate weights."""
        self.layer, self._hidden, self._routing, self._weights = layer, hidden, routing, weights

    @property
    def draft_pred(self) -> np.ndarray | None:
        """``[L, E]`` counts of the previous verify window (None at the first step)."""
        return None if self._last is None else self._last.copy()

    @property
    def next_pred(self) -> np.ndarray | None:
        """``[E]`` counts the next layer's router picks from this layer's input (None at the last layer)."""
        nxt = self.layer + 1
        if self._hidden is None or nxt >= len(self._gates):
            return None
        with torch.inference_mode():
            ids = self._gates[nxt].forward(self._hidden)[2]
        return np.bincount(ids.reshape(-1).to("cpu").numpy(), minlength=self._E)

    @property
    def router_scores(self) -> np.ndarray | None:
        """``[E]`` mean top-k gate weight per expert over this layer's tokens."""
        if self._routing is None:
            return None
        idx = self._routing.index
        w = self._weights.detach().float().to("cpu").numpy().reshape(idx.shape)
        return np.bincount(idx.ravel(), weights=w.ravel(), minlength=self._E) / max(1, idx.shape[0])
