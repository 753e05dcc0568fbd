"""A recency order (LRU bookkeeping) over hashable keys, usually ``(layer, expert)``."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, Iterator


class LRUOrder:
    """Keys from least to most recently used; :meth:`oldest` finds the LRU key that passes a test.

    ``touch`` is O(1); ``oldest`` scans from the least recent end and drops keys that ``stale``
    says no longer belong (e.g. experts evicted behind the policy's back), so the scan stays short.
    """

    def __init__(self) -> None:
        self._order: OrderedDict[Hashable, None] = OrderedDict()

    def touch(self, key: Hashable) -> None:
        """Mark ``key`` as the most recently used (inserting it if new)."""
        self._order[key] = None
        self._order.move_to_end(key)

    def discard(self, key: Hashable) -> None:
        """Forget ``key`` (no error if absent)."""
        self._order.pop(key, None)

    def oldest(self, accept: Callable[[Hashable], bool],
               stale: Callable[[Hashable], bool] | None = None) -> Hashable | None:
        """The least recently used key with ``accept(key)``; keys with ``stale(key)`` are dropped."""
        dead = []
        found = None
        for key in self._order:
            if stale is not None and stale(key):
                dead.append(key)
                continue
            if accept(key):
                found = key
                break
        for key in dead:
            del self._order[key]
        return found

    def __contains__(self, key: Hashable) -> bool:
        return key in self._order

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[Hashable]:
        """Least recent first."""
        return iter(self._order)
