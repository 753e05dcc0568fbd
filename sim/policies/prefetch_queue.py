"""A prefetch queue of ``(layer, expert)`` entries, best priority first, without duplicates."""
from __future__ import annotations

import heapq
import itertools

import numpy as np


class PrefetchQueue:
    """Min-heap on ``key`` (smaller = sooner); pushing an entry again replaces its key.

    :meth:`pop` skips entries already resident or in flight. :meth:`drop_layer` removes a layer's
    entries (they are stale once that layer starts: its misses are demand fetches then).
    """

    def __init__(self) -> None:
        self._heap: list = []
        self._live: dict[tuple[int, int], tuple] = {}
        self._seq = itertools.count()

    def push(self, layer: int, expert: int, key) -> None:
        """Queue ``(layer, expert)`` with priority ``key`` (any comparable; smaller first)."""
        entry = (key, next(self._seq), int(layer), int(expert))
        self._live[(int(layer), int(expert))] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 4 * len(self._live) + 64:
            self._heap = sorted(self._live.values())

    def push_absent(self, layer: int, ranked: np.ndarray, cache, keep: np.ndarray | None = None) -> None:
        """Queue the experts ``ranked`` (best first) of ``layer`` that are neither resident nor in
        flight (and that ``keep`` marks, if given), each keyed by its rank: a next-layer guess."""
        wanted = ~(cache.resident[layer][ranked] | cache.inflight[layer][ranked])
        if keep is not None:
            wanted &= keep
        for rank in np.flatnonzero(wanted).tolist():
            self.push(layer, int(ranked[rank]), rank)

    def push_many(self, items) -> None:
        """:meth:`push` of every ``(layer, expert, key)`` of ``items``, in order (one heap update:
        entries are totally ordered by key and push order, so the pops are the same)."""
        live, seq = self._live, self._seq
        entries = [(key, next(seq), int(layer), int(expert)) for layer, expert, key in items]
        for entry in entries:
            live[(entry[2], entry[3])] = entry
        heap = self._heap
        if 4 * len(entries) < len(heap):
            for entry in entries:
                heapq.heappush(heap, entry)
        else:
            heap.extend(entries)
            heapq.heapify(heap)
        if len(heap) > 4 * len(live) + 64:
            self._heap = sorted(live.values())

    def drop_layer(self, layer: int) -> None:
        """Forget every queued entry of ``layer``."""
        for item in [k for k in self._live if k[0] == layer]:
            del self._live[item]

    def clear(self) -> None:
        """Forget everything."""
        self._heap.clear()
        self._live.clear()

    def pop(self, cache) -> tuple[int, int] | None:
        """The best queued entry not already present in ``cache`` (removed from the queue), or None."""
        while self._heap:
            entry = heapq.heappop(self._heap)
            item = (entry[2], entry[3])
            if self._live.get(item) is not entry:
                continue
            del self._live[item]
            if not cache.present(*item):
                return item
        return None

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, item) -> bool:
        return tuple(item) in self._live
