"""Multi-level prefetch queue: K FIFO levels, the highest non-empty level is served first.

An entry ``(layer, expert, generation)`` asks for an expert of ``layer`` before that layer's next
pass. When layer ``l`` starts, every entry still queued for it is stale (too late to help this
pass; the next plan comes at the end of the pass). Dropping is O(1): :meth:`drop_layer` bumps the
layer's generation and :meth:`pop` discards entries of an older generation as it meets them (the
authors' ``grouped_clean_queue`` purges the head of each level the same way). A compaction keeps
the deques from growing without bound when the link falls behind.
"""
from __future__ import annotations

from collections import deque


class PrefetchQueue:
    """Levels ``1..K``; ``push_levels`` appends, ``pop`` takes from the highest level, FIFO within it."""

    def __init__(self, n_layers: int, n_experts: int, K: int):
        self.K = K
        self.levels = [deque() for _ in range(K + 1)]   # index 0 unused (level 0 is never queued)
        self.gen = [0] * n_layers
        self.size = 0
        self.stale_dropped = 0
        self.limit = 4 * n_layers * n_experts

    def push_levels(self, layer: int, experts: list, levels: list) -> None:
        """Queue ``experts[i]`` of ``layer`` at ``levels[i]`` (FIFO within each level)."""
        g, qs = self.gen[layer], self.levels
        for e, s in zip(experts, levels):
            qs[s].append((layer, e, g))
        self.size += len(experts)
        if self.size > self.limit:
            self._compact()

    def drop_layer(self, layer: int) -> None:
        """Layer ``layer`` starts: its queued entries become stale."""
        self.gen[layer] += 1

    def pop(self, min_level: int = 1) -> tuple[int, int, int] | None:
        """The next live entry ``(layer, expert, level)`` at ``level >= min_level``, or None."""
        gen, levels = self.gen, self.levels
        level, lo = self.K, min_level if min_level > 1 else 1
        while level >= lo:
            q = levels[level]
            while q:
                layer, e, g = q.popleft()
                self.size -= 1
                if g == gen[layer]:
                    return layer, e, level
                self.stale_dropped += 1
            level -= 1
        return None

    def push_front(self, layer: int, expert: int, level: int) -> None:
        """Give back an entry that :meth:`pop` returned but could not be served yet."""
        self.levels[level].appendleft((layer, expert, self.gen[layer]))
        self.size += 1

    def live(self) -> list[tuple[int, int, int]]:
        """All live entries, in pop order (for tests and inspection)."""
        return [(l, e, lv) for lv in range(self.K, 0, -1) for (l, e, g) in self.levels[lv]
                if g == self.gen[l]]

    def _compact(self) -> None:
        gen = self.gen
        for lv in range(1, self.K + 1):
            q = self.levels[lv]
            keep = [x for x in q if x[2] == gen[x[0]]]
            self.stale_dropped += len(q) - len(keep)
            self.levels[lv] = deque(keep)
        self.size = sum(len(q) for q in self.levels)
        self.limit = max(self.limit, 2 * self.size)
