"""Hot/cold prediction quality: how well "hot for the next pass" matches what the pass requested.

After layer ``l``'s pass the policy predicts the hot set of the layer's next pass (level >= tau).
When that pass comes, precision is the share of the predicted experts it requested and recall the
share of its requested experts that were predicted (the paper quotes about 85% precision on
MMLU-Pro, layer 47; a third-party figure). Per layer and overall, summed over passes.
"""
from __future__ import annotations

import numpy as np


class HotColdTracker:
    """Accumulates true positives, predictions and requests per layer."""

    def __init__(self, n_layers: int, n_experts: int):
        self.pred = [np.zeros(n_experts, dtype=bool)] * n_layers
        self.has_pred = [False] * n_layers
        self.pending = [0] * n_layers       # size of each layer's standing prediction
        self.tp = [0] * n_layers
        self.n_pred = [0] * n_layers
        self.n_req = [0] * n_layers

    def score(self, layer: int, requested: np.ndarray) -> None:
        """The pass of ``layer`` happened: compare its requests with the standing prediction."""
        if self.has_pred[layer]:
            self.tp[layer] += np.count_nonzero(self.pred[layer] & requested)
            self.n_pred[layer] += self.pending[layer]
            self.n_req[layer] += np.count_nonzero(requested)

    def predict(self, layer: int, hot: np.ndarray, n_hot: int) -> None:
        """Record the hot set (``n_hot`` experts) predicted for ``layer``'s next pass (kept, not
        copied: the caller hands over a fresh array)."""
        self.pred[layer] = hot
        self.pending[layer] = n_hot
        self.has_pred[layer] = True

    def metrics(self) -> dict:
        def ratio(a, b):
            return float(a) / float(b) if b else float("nan")
        return {
            "hot_precision": ratio(sum(self.tp), sum(self.n_pred)),
            "hot_recall": ratio(sum(self.tp), sum(self.n_req)),
            "hot_precision_by_layer": [ratio(a, b) for a, b in zip(self.tp, self.n_pred)],
            "hot_recall_by_layer": [ratio(a, b) for a, b in zip(self.tp, self.n_req)],
        }
