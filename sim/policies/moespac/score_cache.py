"""The eviction index: resident experts ordered by (score, layer, expert).

Scores (the authors' cache states): -1 empty slot or transfer in flight, 0 used and released,
1..K the utility level, K+1 pinned while the expert's layer computes. The index holds the resident
experts only; -1 entries are the slots outside it (``score[l, e] == -1``). The authors keep an
ordered tree keyed by (score, layer, expert); here the same order is kept as one bit mask of
experts per (score, layer) plus one bit mask of non-empty layers per score (Python ints): an
insert or removal is two bit operations, the smallest or largest (layer, expert) of a score is a
``bit_length``, and the ordered walks below visit exactly the keys a tree walk would, in the same
order, so every decision is the tree's.

Two shortcuts keep a layer's release cheap (the decisions are the same as with an eagerly
re-keyed index):

* Pinning is a flag per layer: while it is set every resident expert of the layer reads as score
  K+1 and is never a victim. Re-keying the layer in and out of K+1 would cost ~40 index operations
  per pass for no change in any decision.
* Raising a score is lazy: :attr:`score` always holds the true score, the index key may lag
  *below* it (``key <= score``); lowering is eager. The victim search meets keys in ascending order,
  and an entry whose key is below its score is re-keyed when met, before its bucket's successors
  are considered -- so every expert is seen at its true score before any larger score is.
  Utilities mostly oscillate by one level, so most releases touch the index not at all.

Victim search (only an expert whose score is below its layer's threshold may go):

* ``"id"`` (the authors' release): the smallest (score, layer, expert).
* ``"cyclic"`` (ours): the smallest score, and among equal scores the expert whose layer runs
  furthest in the future -- the layers just computed (the current layer, then the ones before it)
  before the ones about to run, the largest expert id first within a layer. Decode visits the
  layers cyclically, so this is Belady's choice among equally useful experts.
"""
from __future__ import annotations

import numpy as np

ORDERS = ("id", "cyclic")


def _descending(mask: int):
    """Set bit positions of ``mask``, highest first."""
    while mask:
        top = mask.bit_length() - 1
        yield top
        mask ^= 1 << top


class ScoreTree:
    """Scores of every (layer, expert) plus the ordered index of the resident ones.

    Scores and keys are kept as plain Python lists per layer (``rows`` and ``keys``): the index
    is walked and updated once per copy, where a numpy scalar access costs more than the logic;
    :attr:`score` and :attr:`key` give them as arrays for inspection."""

    def __init__(self, n_layers: int, n_experts: int, K: int, order: str = "cyclic"):
        if order not in ORDERS:
            raise ValueError(f"eviction order {order!r} is not one of {ORDERS}")
        self.L, self.E, self.K, self.order = n_layers, n_experts, K, order
        self.rows = [[-1] * n_experts for _ in range(n_layers)]    # true scores
        self.keys = [[-1] * n_experts for _ in range(n_layers)]    # score part of the index key
        self.bits = [[0] * n_layers for _ in range(K + 2)]   # bits[s][l]: experts of l keyed at s
        self.layers = [0] * (K + 2)                          # bit l set when bits[s][l] is not 0
        self.pinned = [False] * n_layers
        self.cyclic = order == "cyclic"

    @property
    def score(self) -> np.ndarray:
        """True scores as an ``[L, E]`` array (a copy)."""
        return np.array(self.rows, dtype=np.int64)

    @property
    def key(self) -> np.ndarray:
        """Index keys as an ``[L, E]`` array (a copy)."""
        return np.array(self.keys, dtype=np.int64)

    # --- membership -------------------------------------------------------------------------
    def __len__(self) -> int:
        """Resident experts in the index."""
        return sum(m.bit_count() for row in self.bits for m in row)

    def _add(self, s: int, layer: int, expert: int) -> None:
        row = self.bits[s]
        if not row[layer]:
            self.layers[s] |= 1 << layer
        row[layer] |= 1 << expert

    def _drop(self, s: int, layer: int, expert: int) -> None:
        row = self.bits[s]
        m = row[layer] = row[layer] & ~(1 << expert)
        if not m:
            self.layers[s] &= ~(1 << layer)

    def insert(self, layer: int, expert: int, score: int) -> None:
        """A transfer landed (or an expert was preloaded): it enters with ``score``."""
        krow = self.keys[layer]
        if krow[expert] >= 0:
            self.set(layer, expert, score)
            return
        self.rows[layer][expert] = krow[expert] = score
        row = self.bits[score]
        m = row[layer]
        if not m:
            self.layers[score] |= 1 << layer
        row[layer] = m | 1 << expert

    def remove(self, layer: int, expert: int) -> None:
        """The expert was evicted: its slot is empty (-1)."""
        krow = self.keys[layer]
        k = krow[expert]
        if k >= 0:
            row = self.bits[k]
            m = row[layer] = row[layer] & ~(1 << expert)
            if not m:
                self.layers[k] &= ~(1 << layer)
            self.rows[layer][expert] = krow[expert] = -1

    def set(self, layer: int, expert: int, score: int) -> None:
        """New score of a resident expert (raised lazily, lowered at once)."""
        k = self.keys[layer][expert]
        if k < 0:
            return
        self.rows[layer][expert] = score
        if score < k:
            self._rekey(layer, expert, score)

    def set_layer(self, layer: int, scores, resident: np.ndarray) -> None:
        """Give every ``resident`` expert of ``layer`` (a mask) its new score (``scores[e]``: a
        list, or an array). Lowered keys move between buckets with one mask update per bucket."""
        if isinstance(scores, np.ndarray):
            scores = scores.tolist()
        srow, krow = self.rows[layer], self.keys[layer]
        moved = None
        for e in resident.nonzero()[0].tolist():
            new = srow[e] = scores[e]
            old = krow[e]
            if new < old:                                   # absent experts have key -1
                krow[e] = new
                if moved is None:
                    moved = [0] * (self.K + 2), [0] * (self.K + 2)
                b = 1 << e
                moved[0][old] |= b
                moved[1][new] |= b
        if moved is not None:
            bit = 1 << layer
            for s, (out, into) in enumerate(zip(*moved)):
                if out or into:
                    row = self.bits[s]
                    m = row[layer] = (row[layer] & ~out) | into
                    if m:
                        self.layers[s] |= bit
                    else:
                        self.layers[s] &= ~bit

    def _rekey(self, layer: int, expert: int, score: int) -> None:
        krow = self.keys[layer]
        self._drop(krow[expert], layer, expert)
        self._add(score, layer, expert)
        krow[expert] = score

    # --- pinning ------------------------------------------------------------------------------
    def pin(self, layer: int) -> None:
        self.pinned[layer] = True

    def unpin(self, layer: int) -> None:
        self.pinned[layer] = False

    def score_of(self, layer: int, expert: int) -> int:
        """The effective score: K+1 while the layer is pinned, -1 when not resident."""
        s = self.rows[layer][expert]
        return self.K + 1 if s >= 0 and self.pinned[layer] else s

    def entries(self) -> list[tuple[int, int, int]]:
        """(effective score, layer, expert) of every resident expert, smallest first."""
        return sorted((self.score_of(l, e), l, e) for l, row in enumerate(self.rows)
                      for e, s in enumerate(row) if s >= 0)

    # --- victims ------------------------------------------------------------------------------
    def victim(self, tau: list, tau_min: int, tau_max: int, current: int,
               blocked: np.ndarray) -> tuple[int, int] | None:
        """The resident expert to evict: true score < ``tau[its layer]``, its layer neither pinned
        here nor ``blocked`` (the executor's pins); None if no expert may go."""
        layers, cyclic = self.layers, self.cyclic
        for s in range(tau_max if tau_max <= self.K else self.K + 1):
            ls = layers[s]
            if not ls:
                continue
            if cyclic and s < tau_min:      # the common case first: layers current..0, then L-1..current+1
                below = (2 << current) - 1
                found = self._scan(s, ls & below, ls & ~below, True, tau, blocked)
            elif not cyclic:
                found = self._scan(s, ls, 0, False, tau, blocked)
            else:
                found = self._cyclic_layers(s, tau, current, blocked)
            if found is not None:
                return found
        return None

    def _cyclic(self, s: int, current: int):
        """Layers holding score-``s`` keys, cyclic order: ``current`` down to 0, then L-1 down."""
        mask = self.layers[s]
        below = (2 << current) - 1
        yield from _descending(mask & below)
        yield from _descending(mask & ~below)

    def _scan(self, s: int, first: int, then: int, high_first: bool, tau: list, blocked: np.ndarray):
        """Walk bucket ``s``: the layers of mask ``first``, then of ``then``, and each layer's
        experts, highest bit first (``cyclic`` order) or lowest first (``id`` order); the first
        expert whose true score is still ``s`` in an eligible layer is the victim. Lagging keys met
        on the way are re-keyed after the walk. Written without generators: this is the per-copy
        victim search."""
        pinned, rows, row = self.pinned, self.rows, self.bits[s]
        lagging, found = None, None
        part = first
        while True:
            while part:
                l = part.bit_length() - 1 if high_first else (part & -part).bit_length() - 1
                part ^= 1 << l
                if pinned[l]:
                    continue
                ok = s < tau[l] and not blocked.item(l)
                srow = rows[l]
                m = row[l]
                while m:
                    e = m.bit_length() - 1 if high_first else (m & -m).bit_length() - 1
                    m ^= 1 << e
                    if srow[e] != s:
                        if lagging is None:
                            lagging = []
                        lagging.append((l, e))
                    elif ok:
                        found = (l, e)
                        break
                if found is not None:
                    break
            if found is not None or not then:
                break
            part, then = then, 0
        if lagging is not None:
            for l, e in lagging:
                self._rekey(l, e, rows[l][e])
        return found

    def _cyclic_layers(self, s: int, tau: list, current: int, blocked: np.ndarray):
        """Some layers may not give up score ``s``: visit the eligible ones in cyclic-distance
        order and take each one's largest-id score-``s`` expert."""
        row, rows = self.bits[s], self.rows
        for l in list(self._cyclic(s, current)):
            if tau[l] <= s or self.pinned[l] or blocked[l]:
                continue
            while row[l]:
                e = row[l].bit_length() - 1
                true = rows[l][e]
                if true == s:
                    return l, e
                self._rekey(l, e, true)
        return None
