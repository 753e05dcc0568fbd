"""Recording what each MoE layer's router chose, through forward hooks on the gate modules.

In transformers 5.x every MoE block of the supported families (Qwen3-MoE, DeepSeek-V2, Mixtral,
OLMoE, ...) has a ``mlp.gate`` router that returns ``(logits, top_k_weights, top_k_index)``; a hook
on it sees exactly the ids and weights the block uses. Dense layers have no gate and are skipped.

Next-layer prediction signal (``next_pred``): inside layer ``l``'s gate hook we apply the gate of
the next MoE layer to the hidden state entering layer ``l``'s gate (the post-attention, normed MoE
input of layer ``l``) and keep its top-k ids. This is the cheap cross-layer guess that
Mixtral-offloading ("speculative expert loading") and Fate use: it is available one layer early,
before layer ``l+1``'s attention has run. The last MoE layer has no successor; its row is -1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class ForwardRouting:
    """Routing of the ``n`` positions of one forward: ids, weights and next-layer predictions."""

    ids: np.ndarray  # int16 [n, L, k]
    weights: np.ndarray  # float32 [n, L, k]
    next_pred: np.ndarray  # int16 [n, L, k], row L-1 is -1


def find_moe_layers(model) -> list[tuple[int, torch.nn.Module]]:
    """``(decoder layer index, gate module)`` of every MoE layer; dense layers are skipped."""
    layers = getattr(getattr(model, "model", model), "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__} has no decoder layers at model.model.layers")
    found = []
    for i, layer in enumerate(layers):
        mlp = getattr(layer, "mlp", None)
        gate = getattr(mlp, "gate", None)
        if isinstance(gate, torch.nn.Module) and hasattr(mlp, "experts"):
            found.append((i, gate))
    return found


class RouterRecorder:
    """Hooks every MoE gate of ``model``; :meth:`pop` returns the routing of the last forward(s).

    Use as a context manager (hooks are removed on exit). Rows of several forwards between two
    :meth:`pop` calls are concatenated in order, so a caller normally pops after every forward.
    """

    def __init__(self, model, predict_next: bool = True):
        self.moe_layers = find_moe_layers(model)
        if not self.moe_layers:
            raise ValueError(f"{type(model).__name__} has no MoE layers (no mlp.gate router found)")
        self.predict_next = predict_next
        self._handles: list = []
        self._rows: list[list[tuple]] = [[] for _ in self.moe_layers]
        self._predicting = False

    @property
    def n_layers(self) -> int:
        """Number of MoE layers recorded."""
        return len(self.moe_layers)

    def __enter__(self) -> "RouterRecorder":
        for pos, (_, gate) in enumerate(self.moe_layers):
            self._handles.append(gate.register_forward_hook(self._hook(pos)))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, pos: int):
        def hook(module, args, out):
            if self._predicting:
                return
            idx, weights = out[2], out[1]
            k = idx.shape[-1]
            pred = self._predict(pos, args[0], k)
            self._rows[pos].append((idx.reshape(-1, k).detach().to("cpu", torch.int16),
                                    weights.reshape(-1, k).detach().to("cpu", torch.float32), pred))
        return hook

    def _predict(self, pos: int, hidden: torch.Tensor, k: int) -> torch.Tensor:
        """Top-k ids that the next MoE layer's gate picks from this layer's gate input."""
        n = hidden.reshape(-1, hidden.shape[-1]).shape[0]
        if not self.predict_next or pos + 1 >= len(self.moe_layers):
            return torch.full((n, k), -1, dtype=torch.int16)
        self._predicting = True
        try:
            out = self.moe_layers[pos + 1][1](hidden)
        finally:
            self._predicting = False
        return out[2].reshape(-1, k).detach().to("cpu", torch.int16)

    def pop(self) -> ForwardRouting:
        """Routing recorded since the last pop, as arrays ``[n, L, k]``; clears the buffer."""
        counts = {sum(r[0].shape[0] for r in rows) for rows in self._rows}
        if len(counts) != 1:
            raise RuntimeError(f"MoE layers saw different numbers of positions: {sorted(counts)}")
        parts = [tuple(torch.cat([r[j] for r in rows]) if rows else None for j in range(3))
                 for rows in self._rows]
        self._rows = [[] for _ in self.moe_layers]
        if counts == {0}:
            raise RuntimeError("no routing recorded since the last pop (did the target run?)")
        ids, weights, pred = (torch.stack([p[j] for p in parts], dim=1).numpy() for j in range(3))
        return ForwardRouting(ids=ids, weights=weights, next_pred=pred)

    def clear(self) -> None:
        """Drop anything recorded so far (e.g. left over from an interrupted forward)."""
        self._rows = [[] for _ in self.moe_layers]
