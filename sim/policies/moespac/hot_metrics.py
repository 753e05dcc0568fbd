"""Hot/cold prediction quality: how well "hot for the next pass" matches what the pass requested.

After layer ``l``'s pass the policy predicts the hot set of the layer's next pass (level >= tau).
When that pass comes, precision is the share of the predicted experts it requested and recall the
share of its requested experts that were predicted (the paper quotes about 85% precision on
MMLU-Pro, layer 47; a third-party figure). Per layer and overall, summed over passes.
"""
from __future__ import annotations


class HotColdTracker:
    """Accumulates true positives, predictions and requests per layer.

    A prediction is kept as its threshold and size: the pass's histogram of (predicted level,
    count) pairs (:meth:`~sim.policies.moespac.level_stats.LevelStats.observe`) already tells,
    per predicted level, how many experts the pass did not request, which is all it takes."""

    def __init__(self, n_layers: int, n_experts: int):
        self.E = n_experts
        self.tau = [0] * n_layers           # threshold of each layer's standing prediction
        self.has_pred = [False] * n_layers
        self.pending = [0] * n_layers       # size of each layer's standing prediction
        self.tp = [0] * n_layers
        self.n_pred = [0] * n_layers
        self.n_req = [0] * n_layers

    def score(self, layer: int, unrequested: list) -> None:
        """The pass of ``layer`` happened: ``unrequested[s]`` of the experts predicted at level
        ``s`` got no token; compare with the standing prediction (levels >= its tau)."""
        if self.has_pred[layer]:
            self.tp[layer] += self.pending[layer] - sum(unrequested[self.tau[layer]:])
            self.n_pred[layer] += self.pending[layer]
            self.n_req[layer] += self.E - sum(unrequested)

    def predict(self, layer: int, tau: int, n_hot: int) -> None:
        """Record the hot set predicted for ``layer``'s next pass: the ``n_hot`` experts whose
        level is at least ``tau``."""
        self.tau[layer] = tau
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
