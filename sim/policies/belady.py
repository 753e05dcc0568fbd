"""Next-use index over a known future (the oracle's perfect knowledge).

Positions number the (step, layer) pairs in execution order: ``pos = step * L + layer``. An
expert ``(l, e)`` is used at position ``s * L + l`` when ``future_counts[s, l, e] > 0``.
"""
from __future__ import annotations

import heapq

import numpy as np

NEVER = 1 << 62  # next use of an expert that is not used again


class NextUse:
    """Per (step, layer, expert) the next step it is used, and the requested experts of every
    position, both built at once from the whole future."""

    def __init__(self, future_counts: np.ndarray):
        fc = np.asarray(future_counts)
        self.S, self.L, self.E = fc.shape
        self.end = self.S * self.L
        self._next = _next_steps(fc != 0)
        self._uses = _uses_by_position(fc)

    def next_use(self, layer: int, expert: int, pos: int) -> int:
        """First position >= ``pos`` where ``(layer, expert)`` is used, or :data:`NEVER`."""
        first_step = -((layer - pos) // self.L)   # ceil((pos - layer) / L)
        if first_step >= self.S:
            return NEVER
        s = self._next.item(first_step, layer, expert)
        return s * self.L + layer if s < self.S else NEVER

    def next_uses(self, layer: int, experts: list[int], pos: int) -> list[int]:
        """:meth:`next_use` of several experts of ``layer``."""
        first_step = -((layer - pos) // self.L)
        if first_step >= self.S:
            return [NEVER] * len(experts)
        S, L = self.S, self.L
        return [s * L + layer if s < S else NEVER for s in self._next[first_step, layer, experts].tolist()]

    def uses_at(self, pos: int) -> list[int]:
        """Experts requested at position ``pos``, most tokens first (ties: expert id). The list is
        kept (shared by later calls for the same position): do not modify it."""
        return self._uses[pos]

    def first_uses(self, n: int) -> list[tuple[int, int]]:
        """The ``n`` experts with the earliest first use (Belady's best initial content)."""
        if self.S == 0:
            return []
        first = self._next[0]
        layers, experts = np.nonzero(first < self.S)
        pos = first[layers, experts].astype(np.int64) * self.L + layers
        order = np.lexsort((layers * self.E + experts, pos))[:max(0, n)]
        return list(zip(layers[order].tolist(), experts[order].tolist()))


def _next_steps(used: np.ndarray) -> np.ndarray:
    """``[S, L, E]``: the first step ``>= s`` where ``used[., l, e]``, or ``S`` when none."""
    S = used.shape[0]
    dtype = np.int16 if S < np.iinfo(np.int16).max else np.int32
    steps = np.where(used, np.arange(S, dtype=dtype)[:, None, None], np.array(S, dtype=dtype))
    return np.minimum.accumulate(steps[::-1], axis=0)[::-1]


def _uses_by_position(fc: np.ndarray) -> list[list[int]]:
    """Per position ``s * L + l``: the experts requested there, most tokens first (ties: id)."""
    S, L, E = fc.shape
    flat = fc.reshape(S * L, E)
    pos, e = np.nonzero(flat > 0)
    order = np.lexsort((e, -flat[pos, e], pos))
    ids = e[order].tolist()
    bounds = np.searchsorted(pos[order], np.arange(S * L + 1)).tolist()
    return [ids[a:b] for a, b in zip(bounds, bounds[1:])]


class FarthestHeap:
    """Max-heap of resident experts by next use, kept lazily correct.

    Entries are ``(-next_use, layer, expert)``. A key can only be too small (next uses grow as
    positions pass), and whoever advances past a use pushes a fresh entry (:meth:`push`), so
    :meth:`farthest` re-keys stale tops and skips entries of experts no longer resident.
    """

    def __init__(self, index: NextUse):
        self.index = index
        self._heap: list[tuple[int, int, int]] = []

    def push(self, layer: int, expert: int, pos: int) -> None:
        heapq.heappush(self._heap, (-self.index.next_use(layer, expert, pos), layer, expert))

    def push_many(self, layer: int, experts: list[int], pos: int) -> None:
        """:meth:`push` for several experts of one layer, in order."""
        heap = self._heap
        for e, nu in zip(experts, self.index.next_uses(layer, experts, pos)):
            heapq.heappush(heap, (-nu, layer, e))

    def rebuild(self, cache, pos: int) -> None:
        """Rebuild from every resident expert of ``cache``."""
        self._heap = [(-self.index.next_use(int(l), int(e), pos), int(l), int(e))
                      for l, e in zip(*np.nonzero(cache.resident))]
        heapq.heapify(self._heap)

    def farthest(self, cache, pos: int) -> tuple[int, int, int] | None:
        """``(next_use, layer, expert)`` of the evictable expert used farthest in the future."""
        held = []
        found = None
        while self._heap:
            neg, l, e = self._heap[0]
            if not cache.resident[l, e]:
                heapq.heappop(self._heap)
                continue
            nu = self.index.next_use(l, e, pos)
            if nu != -neg:
                heapq.heapreplace(self._heap, (-nu, l, e))
                continue
            if cache.pinned[l]:
                held.append(heapq.heappop(self._heap))
                continue
            found = (nu, l, e)
            break
        for item in held:
            heapq.heappush(self._heap, item)
        return found
