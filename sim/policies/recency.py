"""Recency (LRU bookkeeping) of every (layer, expert), as the tick of its last use."""
from __future__ import annotations

import numpy as np

_NEVER_OLDEST = np.iinfo(np.int64).max


class StampLRU:
    """``stamp[l, e]`` is the tick of the expert's last use (0: never used, hence oldest).

    :meth:`touch` marks experts as used now (several at once share a tick: ties go to the lower
    layer, then the lower expert id, as if touched in that order). :meth:`oldest` is the least
    recently used expert among a mask, in one vectorised pass (the mask is usually "evictable",
    built from the cache, so the order never holds stale entries).
    """

    def __init__(self, n_layers: int, n_experts: int) -> None:
        self.stamp = np.zeros((n_layers, n_experts), dtype=np.int64)
        self.tick = 0

    def touch(self, layer: int, experts) -> None:
        """Mark ``experts`` (an id or ids) of ``layer`` as used now."""
        self.tick += 1
        self.stamp[layer, experts] = self.tick

    def oldest(self, mask: np.ndarray) -> tuple[int, int] | None:
        """The least recently used (layer, expert) where ``mask`` ([L, E]) is True, or None."""
        if not mask.any():
            return None
        flat = int(np.argmin(np.where(mask, self.stamp, _NEVER_OLDEST)))
        return divmod(flat, self.stamp.shape[1])

    def oldest_in(self, layer: int, mask_row: np.ndarray) -> int | None:
        """The least recently used expert of ``layer`` where ``mask_row`` ([E]) is True, or None."""
        if not mask_row.any():
            return None
        return int(np.argmin(np.where(mask_row, self.stamp[layer], _NEVER_OLDEST)))

    def oldest_n(self, mask: np.ndarray, n: int) -> np.ndarray:
        """The ``n`` least recently used (layer, expert) under ``mask`` as rows of an [n, 2] array,
        in eviction order: the same sequence as ``n`` calls of :meth:`oldest`, each removing its
        answer from the mask."""
        cand = np.flatnonzero(mask)
        order = cand[np.argsort(self.stamp.ravel()[cand], kind="stable")][:max(0, n)]
        return np.stack(np.divmod(order, self.stamp.shape[1]), axis=1)
