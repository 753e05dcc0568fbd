"""The routed-expert math, exactly as transformers' eager experts implementation computes it.

Qwen3-MoE and DeepSeek-V2 (transformers 5.x) store a layer's experts as fused 3-D parameters:
``gate_up_proj [E, 2I, H]`` (gate rows first, then up rows) and ``down_proj [E, H, I]``. One
expert's contribution to the tokens routed to it is ``down(act(gate(x)) * up(x)) * weight``,
added into the output in ascending expert order. Keeping the same operations, the same row order
(top-k position major, token minor) and the same accumulation order makes the offloaded layer
bit-identical to the reference on the same device and dtype.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F


def expert_forward(x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor, act,
                   weights: torch.Tensor) -> torch.Tensor:
    """One expert on the rows ``x [n, H]``: ``down(act(gate) * up) * weights[:, None]``."""
    gate, up = F.linear(x, gate_up).chunk(2, dim=-1)
    h = F.linear(act(gate) * up, down)
    return h * weights[:, None]


def routed_rows(top_k_index: np.ndarray, expert: int) -> tuple[np.ndarray, np.ndarray]:
    """``(top_k_pos, token_idx)`` of the rows routed to ``expert``, in the eager order.

    The eager code takes ``torch.where`` over the ``[k, T]`` one-hot mask of the expert, i.e.
    positions sorted by top-k slot first, then by token.
    """
    pos, tok = np.nonzero(top_k_index.T == expert)
    return pos, tok


class LayerRouting:
    """The routing of one MoE layer's forward, on the host, split per requested expert.

    ``counts[e]`` is the number of tokens that chose ``e`` (uint8, like the simulator's schedule);
    :meth:`rows` gives the token rows and top-k positions of one expert as device index tensors
    (built with one host->device copy for the whole layer).
    """

    def __init__(self, top_k_index: torch.Tensor, n_experts: int):
        self.index = top_k_index.detach().to("cpu").numpy()
        full = np.bincount(self.index.ravel(), minlength=n_experts)
        self.counts = full.astype(np.uint8)
        self.requested = np.flatnonzero(full)   # from the full counts: a prompt may give an expert 256 tokens
        self._host: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._device: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def host_rows(self, expert: int) -> tuple[np.ndarray, np.ndarray]:
        """``(pos, tok)`` numpy arrays of ``expert``'s rows."""
        if expert not in self._host:
            self._host[expert] = routed_rows(self.index, expert)
        return self._host[expert]

    def to_device(self, device: torch.device) -> None:
        """Move every requested expert's index rows to ``device`` in one copy."""
        parts = [self.host_rows(int(e)) for e in self.requested]
        sizes = [p[0].size for p in parts]
        flat = np.concatenate([np.concatenate([p[0], p[1]]) for p in parts]) if parts else np.zeros(0, np.int64)
        dev = torch.from_numpy(flat.astype(np.int64)).to(device, non_blocking=False)
        at = 0
        for e, n in zip(self.requested.tolist(), sizes):
            self._device[e] = (dev[at:at + n], dev[at + n:at + 2 * n])
            at += 2 * n

    def rows(self, expert: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pos, tok)`` index tensors of ``expert`` on the device given to :meth:`to_device`."""
        return self._device[expert]

    def slot_order(self) -> np.ndarray:
        """Row of ``cat(outputs in ascending expert order)`` holding token ``t``'s ``j``-th smallest
        expert, at ``t * k + j``."""
        T, k = self.index.shape
        cat_rows = np.argsort(self.index.T.ravel(), kind="stable")   # (expert, pos, tok) order
        pos, tok = np.divmod(cat_rows, T)
        rank = np.argsort(np.argsort(self.index, axis=1, kind="stable"), axis=1, kind="stable")
        order = np.empty(T * k, dtype=np.int64)
        order[tok * k + rank[tok, pos]] = np.arange(T * k)
        return order

    def combine(self, outs: dict, like: torch.Tensor) -> torch.Tensor:
        """The layer output: per token, its experts' contributions added to zero in ascending expert
        order (each ``outs[e]`` holds ``e``'s rows in :meth:`rows` order)."""
        T, k = self.index.shape
        cat = torch.cat([outs[int(e)].to(like.dtype) for e in self.requested])
        order = torch.from_numpy(self.slot_order()).to(like.device, non_blocking=False)
        contrib = cat[order].view(T, k, -1)
        final = torch.zeros_like(like)
        for j in range(k):
            final += contrib[:, j]
        return final
