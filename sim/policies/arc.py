"""Adaptive Replacement Cache bookkeeping (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead
Replacement Cache", FAST 2003, Fig. 4), over hashable keys.

``T1``/``T2`` hold the cached keys seen once / at least twice recently, ``B1``/``B2`` the ghosts
(keys recently evicted from T1 / T2); ``p`` is the adaptive target size of T1. The class keeps the
lists only; the caller owns the real cache. Two departures, both needed because an executor owns
the slots: whether the cache is full is told by the caller (``full``), and a victim must pass
``eligible`` (an expert of a computing layer or in flight cannot go): REPLACE takes the least
recent *eligible* key of the list the ARC rule names, else of the other list.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable


def _pop_lru(lst: OrderedDict, eligible: Callable[[Hashable], bool]):
    for key in lst:
        if eligible(key):
            del lst[key]
            return key
    return None


class ARC:
    """ARC lists for a cache of ``capacity`` entries. :meth:`request` runs the textbook algorithm."""

    def __init__(self, capacity: int) -> None:
        self.c = capacity
        self.p = 0.0
        self.t1: OrderedDict = OrderedDict()
        self.t2: OrderedDict = OrderedDict()
        self.b1: OrderedDict = OrderedDict()
        self.b2: OrderedDict = OrderedDict()

    def __contains__(self, key: Hashable) -> bool:
        return key in self.t1 or key in self.t2

    def __len__(self) -> int:
        return len(self.t1) + len(self.t2)

    def hit(self, key: Hashable) -> None:
        """Case I: a cached key is used again: it moves to the MRU end of T2."""
        self.t1.pop(key, None)
        self.t2.pop(key, None)
        self.t2[key] = None

    def forget(self, key: Hashable) -> None:
        """Drop ``key`` from the cached lists without a ghost (the caller lost it another way)."""
        self.t1.pop(key, None)
        self.t2.pop(key, None)

    def _replace_from(self, in_b2: bool, p: float) -> str:
        """The list REPLACE(x, p) evicts from: "t1" or "t2"."""
        n1 = len(self.t1)
        if n1 >= 1 and ((in_b2 and n1 == p) or n1 > p):
            return "t1"
        return "t2"

    def _replace(self, in_b2: bool, p: float, eligible) -> tuple[Hashable | None, str]:
        first = self._replace_from(in_b2, p)
        second = "t2" if first == "t1" else "t1"
        for name in (first, second):
            lst = self.t1 if name == "t1" else self.t2
            for key in lst:
                if eligible(key):
                    return key, name
        return None, ""

    def miss(self, key: Hashable, full: bool,
             eligible: Callable[[Hashable], bool] = lambda k: True) -> tuple[bool, Hashable | None]:
        """Admit a key that is not cached (cases II-IV). Returns ``(admitted, victim)``.

        When ``full``, a victim is chosen by REPLACE (or, in case IV-A with T1 of size c, the LRU
        of T1 is dropped with no ghost); if no eligible victim exists nothing changes and
        ``(False, None)`` is returned. ``victim`` is None when the cache had room.
        """
        c = self.c
        if key in self.b1:
            p = min(float(c), self.p + max(len(self.b2) / len(self.b1), 1.0))
            case = "b1"
        elif key in self.b2:
            p = max(0.0, self.p - max(len(self.b1) / len(self.b2), 1.0))
            case = "b2"
        else:
            p = self.p
            case = "new"
        victim, source, ghost_of_victim = None, "", True
        drop_b1 = drop_b2 = False
        if case == "new":
            l1 = len(self.t1) + len(self.b1)
            total = l1 + len(self.t2) + len(self.b2)
            if l1 >= c:
                if len(self.t1) < c:
                    drop_b1 = bool(self.b1)
                else:
                    ghost_of_victim = False
            elif total >= c and total >= 2 * c:
                drop_b2 = bool(self.b2)
        if full:
            if not ghost_of_victim:
                victim = next((k for k in self.t1 if eligible(k)), None)
                source = "t1" if victim is not None else ""
                if victim is None:
                    victim, source = self._replace(False, p, eligible)
                    ghost_of_victim = True
            else:
                victim, source = self._replace(case == "b2", p, eligible)
            if victim is None:
                return False, None
        self.p = p
        if drop_b1:
            self.b1.popitem(last=False)
        if drop_b2:
            self.b2.popitem(last=False)
        if victim is not None:
            (self.t1 if source == "t1" else self.t2).pop(victim)
            if ghost_of_victim:
                (self.b1 if source == "t1" else self.b2)[victim] = None
        if case == "new":
            self.t1[key] = None
        else:
            (self.b1 if case == "b1" else self.b2).pop(key)
            self.t2[key] = None
        return True, victim

    def request(self, key: Hashable) -> tuple[bool, Hashable | None]:
        """The textbook ARC step for a request of ``key``: ``(hit, evicted key or None)``."""
        if key in self:
            self.hit(key)
            return True, None
        _, victim = self.miss(key, full=len(self) >= self.c)
        return False, victim
