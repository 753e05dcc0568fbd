"""The eviction index: resident experts in an ordered tree keyed by (score, layer, expert).

Scores (the authors' cache states): -1 empty slot or transfer in flight, 0 used and released,
1..K the utility level, K+1 pinned while the expert's layer computes. The tree
(:class:`sortedcontainers.SortedList`, O(log n) insert/remove/bisect) holds the resident experts
only; -1 entries are the slots outside it (``score[l, e] == -1``). Keys are packed into one int,
``score * L * E + layer * E + expert``, which orders exactly like the tuple and compares faster.

Two shortcuts keep a layer's release cheap (the decisions are the same as with an eagerly
re-keyed tree):

* Pinning is a flag per layer: while it is set every resident expert of the layer reads as score
  K+1 and is never a victim. Re-keying the layer in and out of K+1 would cost ~40 tree operations
  per pass for no change in any decision.
* Raising a score is lazy: :attr:`score` always holds the true score, the tree key may lag
  *below* it (``key <= score``); lowering is eager. The victim search meets keys in ascending order,
  and an entry whose key is below its score is re-keyed when met, before its bucket's successors
  are considered -- so every expert is seen at its true score before any larger score is.
  Utilities mostly oscillate by one level, so most releases touch the tree not at all.

Victim search (only an expert whose score is below its layer's threshold may go):

* ``"id"`` (the authors' release): the smallest (score, layer, expert).
* ``"cyclic"`` (ours): the smallest score, and among equal scores the expert whose layer runs
  furthest in the future -- the layers just computed (the current layer, then the ones before it)
  before the ones about to run. Decode visits the layers cyclically, so this is Belady's choice
  among equally useful experts: two reversed range scans per score, O(log n) to start.
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
        self.score = np.full((n_layers, n_experts), -1, dtype=np.int64)   # true scores
        self.key = np.full((n_layers, n_experts), -1, dtype=np.int64)     # score part of tree key
        self.tree = SortedList()
        self.pinned = [False] * n_layers

    # --- membership -------------------------------------------------------------------------
    def insert(self, layer: int, expert: int, score: int) -> None:
        """A transfer landed (or an expert was preloaded): it enters with ``score``."""
        if self.key.item(layer, expert) >= 0:
            self.set(layer, expert, score)
            return
        self.score[layer, expert] = self.key[layer, expert] = score
        self.tree.add(score * self.LE + layer * self.E + expert)

    def remove(self, layer: int, expert: int) -> None:
        """The expert was evicted: its slot is empty (-1)."""
        k = self.key.item(layer, expert)
        if k >= 0:
            self.tree.remove(k * self.LE + layer * self.E + expert)
            self.score[layer, expert] = self.key[layer, expert] = -1

    def set(self, layer: int, expert: int, score: int) -> None:
        """New score of a resident expert (raised lazily, lowered at once)."""
        k = self.key.item(layer, expert)
        if k < 0:
            return
        self.score[layer, expert] = score
        if score < k:
            self._rekey(layer, expert, score)

    def set_layer(self, layer: int, scores: np.ndarray, resident: np.ndarray) -> None:
        """Give every ``resident`` expert of ``layer`` its new score."""
        np.copyto(self.score[layer], scores, where=resident)
        krow = self.key[layer]
        lower = np.flatnonzero(scores < krow)               # absent experts have key -1
        if lower.size:
            base = lower + layer * self.E
            new = scores[lower]
            tree = self.tree
            for old_key, new_key in zip((krow[lower] * self.LE + base).tolist(),
                                        (new * self.LE + base).tolist()):
                tree.remove(old_key)
                tree.add(new_key)
            krow[lower] = new

    def _rekey(self, layer: int, expert: int, score: int) -> None:
        base = layer * self.E + expert
        self.tree.remove(self.key.item(layer, expert) * self.LE + base)
        self.tree.add(score * self.LE + base)
        self.key[layer, expert] = score

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
        """(effective score, layer, expert) of every resident expert, smallest first."""
        ls, es = np.nonzero(self.score >= 0)
        return sorted((self.score_of(l, e), l, e) for l, e in zip(ls.tolist(), es.tolist()))

    # --- victims ------------------------------------------------------------------------------
    def victim(self, tau: list, tau_min: int, tau_max: int, current: int,
               blocked: np.ndarray) -> tuple[int, int] | None:
        """The resident expert to evict: true score < ``tau[its layer]``, its layer neither pinned
        here nor ``blocked`` (the executor's pins); None if no expert may go."""
        top = min(self.K + 1, tau_max)
        LE, E = self.LE, self.E
        for s in range(top):
            lo = s * LE
            if self.order == "id":
                ranges = ((lo, lo + LE - 1, False),)
            else:
                cut = lo + (current + 1) * E
                ranges = ((lo, cut - 1, True), (cut, lo + LE - 1, True))
            if self.order == "id" or s < tau_min:
                found = self._scan(s, ranges, tau, blocked)
            else:
                found = self._cyclic_layers(s, tau, current, blocked)
            if found is not None:
                return found
        return None

    def _scan(self, s: int, ranges, tau: list, blocked: np.ndarray):
        """Walk bucket ``s`` in the given ranges; lagging keys are re-keyed after the walk."""
        lo, E, pinned, score = s * self.LE, self.E, self.pinned, self.score
        lagging, found = [], None
        for a, b, rev in ranges:
            for key in self.tree.irange(a, b, reverse=rev):
                l, e = divmod(key - lo, E)
                if pinned[l]:
                    continue
                if score.item(l, e) != s:
                    lagging.append((l, e))
                elif s < tau[l] and not blocked[l]:
                    found = (l, e)
                    break
            if found is not None:
                break
        for l, e in lagging:
            self._rekey(l, e, score.item(l, e))
        return found

    def _cyclic_layers(self, s: int, tau: list, current: int, blocked: np.ndarray):
        """Some layers may not give up score ``s``: visit the eligible ones in cyclic-distance
        order and take each one's largest-id score-``s`` expert (one bisect per layer)."""
        tree, E, lo, L = self.tree, self.E, s * self.LE, self.L
        for i in range(L):
            l = (current - i) % L
            if tau[l] <= s or self.pinned[l] or blocked[l]:
                continue
            while True:
                j = tree.bisect_left(lo + (l + 1) * E) - 1
                if j < 0 or tree[j] < lo + l * E:
                    break
                e = tree[j] - lo - l * E
                true = self.score.item(l, e)
                if true == s:
                    return l, e
                self._rekey(l, e, true)
        return None
