"""Per-layer extremes of a priority array, kept up to date between whole-array passes.

MoE-Infinity (:mod:`sim.policies.moe_infinity`) asks two questions many times per layer: the
lowest-priority resident expert of an unpinned layer (its victim) and the highest-priority seen,
absent expert ahead (its next prefetch). Both are argmin/argmax passes over the whole ``[L, E]``
array; this module answers them from one value and index per row instead. A row's answer is
recomputed when its priorities change; when only its answer leaves (the victim is evicted, the
prefetch reserved), the next one is found by walking the row's experts in priority order. The
answers equal the whole-array ones, ties included (the first index in flat order: the lowest row,
then the row's first index).
"""
from __future__ import annotations

import numpy as np


class _Walk:
    """One row's experts in search order (``order``), ``rank`` its inverse, ``at`` the position of
    the row's answer: every expert before it is ineligible (not resident, or not a candidate)."""

    __slots__ = ("order", "rank", "at")

    def __init__(self, keys: np.ndarray, answer: int) -> None:
        order = np.argsort(keys, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        self.order, self.rank = order.tolist(), rank.tolist()
        self.at = self.rank[answer]


class RowExtremes:
    """``low[l]`` / ``low_at[l]``: the lowest priority among layer ``l``'s resident experts (inf when
    none); ``best[l]`` / ``best_at[l]``: the highest among its seen, absent ones (-inf when none).

    Changes are announced: the priorities or ``seen`` of a row (:meth:`row_changed`) or of every
    row (:meth:`all_stale`), a landing (:meth:`landed`), the victim the core evicts now
    (:meth:`evicting`), an expert the core may reserve now (:meth:`offered`); :meth:`sync` applies
    them from the cache. This relies on the executor protocol (:mod:`sim.policies.base`): after the
    first query an expert becomes resident only by landing, leaves only as a named victim, and only
    the current layer's demand fetches (never searched ahead) are reserved otherwise.
    """

    def __init__(self, n_layers: int, candidates: bool = True) -> None:
        self.candidates = candidates          # False: only the lowest resident is kept (no ``seen``)
        self.low = np.full(n_layers, np.inf)
        self.low_at = np.zeros(n_layers, dtype=np.int64)
        self.best = np.full(n_layers, -np.inf)
        self.best_at = np.zeros(n_layers, dtype=np.int64)
        self._all = True
        self._stale: set[int] = set()             # rows to recompute whole
        self._low_walk: dict[int, _Walk] = {}
        self._best_walk: dict[int, _Walk] = {}
        self._low_once: set[int] = set()          # rows searched once since their last recompute
        self._best_once: set[int] = set()
        self._evicted: list[tuple[int, int]] = []
        self._offered: set[int] = set()
        self._memo: tuple | None = None           # (pinned bytes, layer, value) of the last lowest()

    def all_stale(self) -> None:
        """Every row's priorities changed."""
        self._all = True
        self._memo = None

    def row_changed(self, layer: int) -> None:
        """``layer``'s priorities or seen experts changed."""
        self._stale.add(layer)
        self._memo = None

    def offered(self, layer: int) -> None:
        """An expert of ``layer`` may be reserved now (it leaves the candidates)."""
        self._offered.add(layer)

    def evicting(self, layer: int, expert: int) -> None:
        """(layer, expert), the row's lowest resident, is evicted now (it may become a candidate)."""
        self._evicted.append((layer, expert))
        self._memo = None

    def landed(self, prio: np.ndarray, layer: int, expert: int) -> None:
        """(layer, expert) became resident: it may be its row's new lowest."""
        if self._all or layer in self._stale:
            return
        if not _enters(self._low_walk, self.low, self.low_at, layer, expert, prio.item(layer, expert), 1.0):
            return
        self.low[layer], self.low_at[layer] = prio.item(layer, expert), expert
        self._memo = None

    def lowest(self, pinned: np.ndarray) -> tuple[int, float]:
        """The unpinned row holding the lowest resident priority, and that priority (inf: none)."""
        key = pinned.tobytes()
        if self._memo is not None and self._memo[0] == key:
            return self._memo[1], self._memo[2]
        low = np.where(pinned, np.inf, self.low)
        l = int(low.argmin())
        self._memo = (key, l, low.item(l))
        return l, self._memo[2]

    def best_from(self, first: int) -> tuple[int, float]:
        """The row ``>= first`` holding the highest candidate priority, and that priority."""
        l = first + int(self.best[first:].argmax())
        return l, self.best.item(l)

    # --- applying the changes ------------------------------------------------------------------
    def sync(self, cache, prio: np.ndarray, seen: np.ndarray) -> None:
        """Bring every row's answers up to date with the cache."""
        if not (self._all or self._evicted or self._offered or self._stale):
            return                                # nothing announced since the last sync
        if self._all:
            self._all = False
            self._stale.clear()
            self._evicted.clear()
            self._offered.clear()
            self._low_walk.clear()
            self._best_walk.clear()
            self._low_once.clear()
            self._best_once.clear()
            self._fill_all(cache, prio, seen)
            return
        resident, inflight = cache.resident, cache.inflight
        if self._evicted:
            for layer, e in self._evicted:
                if layer not in self._stale:
                    self._after_evict(layer, e, resident, inflight, prio, seen)
            self._evicted.clear()
        if self._offered:
            for layer in self._offered:
                e = self.best_at.item(layer)
                if layer not in self._stale and (resident.item(layer, e) or inflight.item(layer, e)):
                    self._walk_best(layer, resident, inflight, prio, seen)
            self._offered.clear()
        if self._stale:
            for layer in self._stale:
                self._fill_row(layer, cache, prio, seen)
            self._stale.clear()

    def _after_evict(self, layer: int, e: int, resident, inflight, prio, seen) -> None:
        """The row's lowest walks on past the evicted expert; the expert may be a candidate now."""
        if not resident.item(layer, self.low_at.item(layer)):
            self._walk_low(layer, resident, prio)
        if not self.candidates or not seen.item(layer, e) or resident.item(layer, e) or inflight.item(layer, e):
            return
        if not _enters(self._best_walk, self.best, self.best_at, layer, e, prio.item(layer, e), -1.0):
            return
        self.best[layer], self.best_at[layer] = prio.item(layer, e), e

    def _walk_low(self, layer: int, resident, prio) -> None:
        walk = self._low_walk.get(layer)
        if walk is None:
            if layer not in self._low_once:      # the first time: one pass over the row is cheaper
                self._low_once.add(layer)
                low = np.where(resident[layer], prio[layer], np.inf)
                self.low_at[layer] = at = int(low.argmin())
                self.low[layer] = low.item(at)
                return
            walk = self._low_walk[layer] = _Walk(prio[layer], self.low_at.item(layer))
        order, i, n = walk.order, walk.at, len(walk.order)
        while i < n and not resident.item(layer, order[i]):
            i += 1
        walk.at = i
        if i < n:
            self.low[layer], self.low_at[layer] = prio.item(layer, order[i]), order[i]
        else:
            self.low[layer] = np.inf

    def _walk_best(self, layer: int, resident, inflight, prio, seen) -> None:
        walk = self._best_walk.get(layer)
        if walk is None:
            if layer not in self._best_once:
                self._best_once.add(layer)
                self._best_row(layer, resident, inflight, prio, seen)
                return
            walk = self._best_walk[layer] = _Walk(-prio[layer], self.best_at.item(layer))
        order, i, n = walk.order, walk.at, len(walk.order)
        while i < n and (not seen.item(layer, order[i]) or resident.item(layer, order[i])
                         or inflight.item(layer, order[i])):
            i += 1
        walk.at = i
        if i < n:
            self.best[layer], self.best_at[layer] = prio.item(layer, order[i]), order[i]
        else:
            self.best[layer] = -np.inf

    def _best_row(self, layer: int, resident, inflight, prio, seen) -> None:
        best = np.where(seen[layer] & ~(resident[layer] | inflight[layer]), prio[layer], -np.inf)
        self.best_at[layer] = at = int(best.argmax())
        self.best[layer] = best.item(at)

    def _fill_row(self, layer: int, cache, prio: np.ndarray, seen: np.ndarray) -> None:
        low = np.where(cache.resident[layer], prio[layer], np.inf)
        self.low_at[layer] = at = int(low.argmin())
        self.low[layer] = low.item(at)
        if self.candidates:
            self._best_row(layer, cache.resident, cache.inflight, prio, seen)
        self._low_walk.pop(layer, None)
        self._best_walk.pop(layer, None)
        self._low_once.discard(layer)
        self._best_once.discard(layer)

    def _fill_all(self, cache, prio: np.ndarray, seen: np.ndarray) -> None:
        resident, rows = cache.resident, np.arange(len(self.low))
        low = np.where(resident, prio, np.inf)
        self.low_at = at = low.argmin(axis=1)
        self.low = low[rows, at]
        if not self.candidates:
            return
        best = np.where(seen & ~(resident | cache.inflight), prio, -np.inf)
        self.best_at = at = best.argmax(axis=1)
        self.best = best[rows, at]


def _enters(walks: dict, value: np.ndarray, at: np.ndarray, layer: int, e: int, p: float, sign: float) -> bool:
    """Whether expert ``e`` of priority ``p`` becomes its row's extreme (the lowest for ``sign`` 1,
    the highest for -1; ties to the smaller expert id). A row being walked in priority order moves its
    walk back to ``e``'s rank instead."""
    walk = walks.get(layer)
    if walk is not None:
        r = walk.rank[e]
        if r >= walk.at:
            return False
        walk.at = r
        return True
    cur = value.item(layer)
    return sign * p < sign * cur or (p == cur and e < at.item(layer))
