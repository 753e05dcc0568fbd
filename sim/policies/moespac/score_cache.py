"""The eviction index: resident experts in an ordered tree keyed by (score, layer, expert).

Scores (the authors' cache states): -1 empty slot or transfer in flight, 0 used and released,
1..K the utility level, K+1 pinned while the expert's layer computes. The tree
(:class:`sortedcontainers.SortedList`, O(log n) insert/remove/bisect) holds the resident experts
only; -1 entries are the slots outside it (``score[l, e] == -1``). Keys are packed into one int,
``score * L * E + layer * E + expert``, which orders exactly like the tuple and compares faster.

Pinning is kept out of the tree: :meth:`pin` marks the layer, and while it is marked every resident
expert of the layer reads as score K+1 and is never a victim. Re-keying a whole layer twice per pass
would cost ~40 tree operations per layer for no change in any decision (a pinned layer is skipped
by the victim search either way); its stored scores change only where the next release changes them.

Victim search (only an expert whose score is below its layer's threshold may go):

* ``"id"`` (the authors' release): the smallest (score, layer, expert).
* ``"cyclic"`` (ours): the smallest score, and among equal scores the expert whose layer runs
  furthest in the future -- the layers just computed (the current layer, then the ones before it)
  before the ones about to run. Decode visits the layers cyclically, so this is Belady's choice
  among equally useful experts; it is two reversed range scans per score, O(log n) to start.
"""
from __future__ import annotations

import numpy as np
from sortedcontainers import SortedList

ORDERS = ("id", "cyclic")


class ScoreTree:
    """Scores of every (layer, expert) plus the ordered tree of the resident ones."""

    def __init__(self, n_layers: int, n_experts: int, K: int, order: str = "cyclic"):
        if order not in ORDERS:
            raise ValueError(f"eviction order {order!r} is not one of {ORDERS}")
        self.L, self.E, self.K, self.order = n_layers, n_experts, K, order
        self.LE = n_layers * n_experts
        self.score = np.full((n_layers, n_experts), -1, dtype=np.int16)
        self.tree = SortedList()
        self.pinned = np.zeros(n_layers, dtype=bool)

    # --- membership -------------------------------------------------------------------------
    def insert(self, layer: int, expert: int, score: int) -> None:
        """A transfer landed (or an expert was preloaded): it enters with ``score``."""
        if self.score[layer, expert] >= 0:
            self.set(layer, expert, score)
            return
        self.score[layer, expert] = score
        self.tree.add(score * self.LE + layer * self.E + expert)

    def remove(self, layer: int, expert: int) -> None:
        """The expert was evicted: its slot is empty (-1)."""
        s = int(self.score[layer, expert])
        if s >= 0:
            self.tree.remove(s * self.LE + layer * self.E + expert)
            self.score[layer, expert] = -1

    def set(self, layer: int, expert: int, score: int) -> None:
        """Re-key a resident expert (no-op when the score is unchanged)."""
        old = int(self.score[layer, expert])
        if old == score or old < 0:
            return
        base = layer * self.E + expert
        self.tree.remove(old * self.LE + base)
        self.tree.add(score * self.LE + base)
        self.score[layer, expert] = score

    def set_layer(self, layer: int, scores: np.ndarray) -> None:
        """Give every resident expert of ``layer`` its new score (re-keys only the changed ones)."""
        row = self.score[layer]
        changed = np.flatnonzero((row >= 0) & (row != scores))
        if changed.size:
            base, LE, tree = layer * self.E, self.LE, self.tree
            for e, old, new in zip(changed.tolist(), row[changed].tolist(), scores[changed].tolist()):
                tree.remove(old * LE + base + e)
                tree.add(new * LE + base + e)
            row[changed] = scores[changed]

    # --- pinning ------------------------------------------------------------------------------
    def pin(self, layer: int) -> None:
        self.pinned[layer] = True

    def unpin(self, layer: int) -> None:
        self.pinned[layer] = False

    def score_of(self, layer: int, expert: int) -> int:
        """The effective score: K+1 while the layer is pinned, -1 when not resident."""
        s = int(self.score[layer, expert])
        return self.K + 1 if s >= 0 and self.pinned[layer] else s

    def entries(self) -> list[tuple[int, int, int]]:
        """(effective score, layer, expert) of every resident expert, in eviction-key order."""
        out = [(k // self.LE, (k % self.LE) // self.E, k % self.E) for k in self.tree]
        return sorted((self.K + 1 if self.pinned[l] else s, l, e) for s, l, e in out)

    # --- victims ------------------------------------------------------------------------------
    def victim(self, tau: np.ndarray, current: int, blocked: np.ndarray) -> tuple[int, int] | None:
        """The resident expert to evict: score < ``tau[its layer]``, layer not pinned/``blocked``."""
        top = min(self.K + 1, int(tau.max()))
        LE, E = self.LE, self.E
        if self.order == "id":
            for key in self.tree.irange(None, top * LE - 1):
                s, rest = divmod(key, LE)
                l = rest // E
                if s < tau[l] and not self.pinned[l] and not blocked[l]:
                    return l, rest - l * E
            return None
        tau_min = int(tau.min())
        for s in range(top):
            lo = s * LE
            if s < tau_min:     # every layer may give up a score-s expert: scan the bucket
                for a, b in ((lo, lo + (current + 1) * E - 1), (lo + (current + 1) * E, lo + LE - 1)):
                    for key in self.tree.irange(a, b, reverse=True):
                        rest = key - lo
                        l = rest // E
                        if not self.pinned[l] and not blocked[l]:
                            return l, rest - l * E
                continue
            found = self._cyclic_layers(s, np.flatnonzero(tau > s), current, blocked)
            if found is not None:
                return found
        return None

    def _cyclic_layers(self, s: int, layers: np.ndarray, current: int, blocked: np.ndarray):
        """Largest-id score-``s`` expert of the first eligible layer in cyclic-distance order."""
        tree, E, lo = self.tree, self.E, s * self.LE
        order = np.concatenate((layers[layers <= current][::-1], layers[layers > current][::-1]))
        for l in order.tolist():
            if self.pinned[l] or blocked[l]:
                continue
            i = tree.bisect_left(lo + (l + 1) * E) - 1
            if i >= 0:
                key = tree[i]
                if key >= lo + l * E:
                    return l, key - lo - l * E
        return None
