"""Next-use index over a known future (the oracle's perfect knowledge).

Positions number the (step, layer) pairs in execution order: ``pos = step * L + layer``. An
expert ``(l, e)`` is used at position ``s * L + l`` when ``future_counts[s, l, e] > 0``.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left

import numpy as np

NEVER = 1 << 62  # next use of an expert that is not used again


class NextUse:
    """Per-expert sorted use steps, and the requested experts of every position."""

    def __init__(self, future_counts: np.ndarray):
        fc = np.asarray(future_counts)
        self.S, self.L, self.E = fc.shape
        self.end = self.S * self.L
        s_idx, l_idx, e_idx = np.nonzero(fc)
        order = np.lexsort((s_idx, e_idx, l_idx))
        s_idx, l_idx, e_idx = s_idx[order], l_idx[order], e_idx[order]
        keys = l_idx * self.E + e_idx
        bounds = np.flatnonzero(np.diff(keys)) + 1
        self._steps: dict[int, list[int]] = {
            int(k[0]): s.tolist() for k, s in zip(np.split(keys, bounds), np.split(s_idx, bounds)) if len(k)}
        self._counts = fc
        self._uses: dict[int, list[int]] = {}

    def next_use(self, layer: int, expert: int, pos: int) -> int:
        """First position >= ``pos`` where ``(layer, expert)`` is used, or :data:`NEVER`."""
        steps = self._steps.get(layer * self.E + expert)
        if not steps:
            return NEVER
        first_step = -((layer - pos) // self.L)   # ceil((pos - layer) / L)
        i = bisect_left(steps, first_step)
        return steps[i] * self.L + layer if i < len(steps) else NEVER

    def uses_at(self, pos: int) -> list[int]:
        """Experts requested at position ``pos``, most tokens first (ties: expert id). The list is
        kept (shared by later calls for the same position): do not modify it."""
        uses = self._uses.get(pos)
        if uses is None:
            s, l = divmod(pos, self.L)
            row = self._counts[s, l]
            req = np.flatnonzero(row > 0)
            uses = self._uses[pos] = [int(e) for e in req[np.lexsort((req, -row[req]))]]
        return uses

    def first_uses(self, n: int) -> list[tuple[int, int]]:
        """The ``n`` experts with the earliest first use (Belady's best initial content)."""
        firsts = sorted((steps[0] * self.L + k // self.E, k) for k, steps in self._steps.items())
        return [divmod(k, self.E) for _, k in firsts[:n]]


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
        index, heap = self.index, self._heap
        steps_of, L, base = index._steps, index.L, layer * index.E
        first_step = -((layer - pos) // L)       # as in NextUse.next_use
        for e in experts:
            steps = steps_of.get(base + e)
            nu = NEVER
            if steps:
                i = bisect_left(steps, first_step)
                if i < len(steps):
                    nu = steps[i] * L + layer
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
