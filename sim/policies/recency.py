"""Recency (LRU bookkeeping) of every (layer, expert), as the tick of its last use."""
from __future__ import annotations

import numpy as np

_NEVER_OLDEST = np.iinfo(np.int64).max


class StampLRU:
    """``stamp[l, e]`` is the tick of the expert's last use (0: never used, hence oldest).

    :meth:`touch` marks experts as used now (several at once share a tick: ties go to the lower
    layer, then the lower expert id, as if touched in that order). :meth:`oldest` is the least
    recently used expert among a mask, in one vectorised pass (the mask is usually "evictable",
    built from the cache, so the order never holds stale entries).
    """

    def __init__(self, n_layers: int, n_experts: int) -> None:
        self.stamp = np.zeros((n_layers, n_experts), dtype=np.int64)
        self.tick = 0

    def touch(self, layer: int, experts) -> None:
        """Mark ``experts`` (an id or ids) of ``layer`` as used now."""
        self.tick += 1
        self.stamp[layer, experts] = self.tick

    def oldest(self, mask: np.ndarray) -> tuple[int, int] | None:
        """The least recently used (layer, expert) where ``mask`` ([L, E]) is True, or None."""
        if not mask.any():
            return None
        flat = int(np.argmin(np.where(mask, self.stamp, _NEVER_OLDEST)))
        return divmod(flat, self.stamp.shape[1])

    def oldest_in(self, layer: int, mask_row: np.ndarray) -> int | None:
        """The least recently used expert of ``layer`` where ``mask_row`` ([E]) is True, or None."""
        if not mask_row.any():
            return None
        return int(np.argmin(np.where(mask_row, self.stamp[layer], _NEVER_OLDEST)))

    def oldest_n(self, mask: np.ndarray, n: int) -> np.ndarray:
        """The ``n`` least recently used (layer, expert) under ``mask`` as rows of an [n, 2] array,
        in eviction order: the same sequence as ``n`` calls of :meth:`oldest`, each removing its
        answer from the mask."""
        cand = np.flatnonzero(mask)
        order = cand[np.argsort(self.stamp.ravel()[cand], kind="stable")][:max(0, n)]
        return np.stack(np.divmod(order, self.stamp.shape[1]), axis=1)


def _ascending(experts) -> list[int]:
    """``experts`` (an id, or ids) as a sorted list of distinct ints: the order in which experts
    touched at one tick rank (lower id first, as :meth:`StampLRU.oldest` breaks ties)."""
    if isinstance(experts, int):
        return [experts]
    if isinstance(experts, np.ndarray):
        ids = experts.ravel().tolist()
    elif isinstance(experts, (list, tuple)):
        ids = [int(e) for e in experts]
    else:
        return [int(experts)]
    if any(a >= b for a, b in zip(ids, ids[1:])):
        ids = sorted(set(ids))
    return ids


class LRUOrder(StampLRU):
    """:class:`StampLRU` that also keeps the resident experts in least-recently-used order, so the
    oldest *evictable* one is found without a pass over the whole ``[L, E]`` array.

    The order is :meth:`StampLRU.oldest`'s: stamp, then layer, then expert. It is a log of flat
    ids, oldest first: built from the cache at the first query (every resident expert in ``keep``,
    sorted by stamp), then :meth:`touch` appends (the expert's older entry goes stale); entries of
    experts found not resident are dropped when a scan meets them, and the log is compacted when
    mostly garbage. This relies on the executor protocol (:mod:`sim.policies.base`): once decoding
    has started an expert becomes resident only by landing, and the policy touches every expert
    that lands (in ``on_transfer_done``). ``keep`` ([L, E] bool, None = all) marks the experts that
    may ever be candidates (e.g. not the static ones); the others never enter the log.

    A scan resumes where the previous one stopped while the pinned layers and the ``avoid`` array
    (by identity: a caller must not change one in place after passing it) are the same, since the
    entries it passed stay ineligible until one of them changes or the expert is touched again.
    """

    def __init__(self, n_layers: int, n_experts: int, keep: np.ndarray | None = None) -> None:
        super().__init__(n_layers, n_experts)
        self.E = n_experts
        self._keep = None if keep is None else np.asarray(keep, dtype=bool).reshape(-1)
        self._keys: list[int] | None = None     # flat ids, oldest first
        self._ticks: list[int] = []             # the tick of each entry (stale when not the stamp)
        self._garbage = 0
        self._head = 0                          # entries before it are all stale
        self._resume: tuple | None = None       # (avoid, pinned bytes, cursor, fallback cursor)

    def touch(self, layer: int, experts) -> None:
        self.tick += 1
        self.stamp[layer, experts] = self.tick
        if self._keys is None:
            return
        base, keep, tick = layer * self.E, self._keep, self.tick
        for e in _ascending(experts):
            k = base + e
            if keep is None or keep[k]:
                self._keys.append(k)
                self._ticks.append(tick)
                self._garbage += 1         # the older entry of k, if any (an estimate)
        if self._garbage > 64 and 2 * self._garbage > len(self._keys):
            self._compact()

    def _build(self, cache) -> None:
        cand = cache.resident.reshape(-1)
        if self._keep is not None:
            cand = cand & self._keep
        idx = np.flatnonzero(cand)
        idx = idx[np.argsort(self.stamp.reshape(-1)[idx], kind="stable")]
        self._keys = idx.tolist()
        self._ticks = self.stamp.reshape(-1)[idx].tolist()
        self._garbage = 0
        self._head = 0

    def _compact(self) -> None:
        """Drop stale entries (the log keeps its order); scans restart from the front."""
        stamp = self.stamp.reshape(-1).tolist()
        live = [(k, t) for k, t in zip(self._keys, self._ticks) if stamp[k] == t]
        self._keys = [k for k, _ in live]
        self._ticks = [t for _, t in live]
        self._garbage = 0
        self._head = 0
        self._resume = None

    def _first(self, i: int, cache, avoid) -> int:
        """Index of the first live, evictable entry from ``i`` that ``avoid`` does not mark (or
        ``len``); marks the entries of experts no longer resident stale."""
        keys, ticks = self._keys, self._ticks
        stamp = self.stamp.reshape(-1)
        res = cache.resident.reshape(-1)
        pinned = cache.pinned
        E, n = self.E, len(keys)
        i = max(i, self._head)
        while i < n:
            k = keys[i]
            if ticks[i] == stamp[k]:
                if res[k]:
                    if not pinned[k // E] and (avoid is None or not avoid[k]):
                        return i
                    i += 1
                    continue
                ticks[i] = -1                    # dropped: a later landing appends it again
                self._garbage += 1
            if i == self._head:
                self._head += 1
            i += 1
        return n

    def oldest_evictable(self, cache, avoid: np.ndarray | None = None,
                         fallback: bool = False) -> tuple[int, int] | None:
        """The least recently used evictable expert (resident, layer not pinned, in ``keep``) that
        ``avoid`` ([L, E] bool) does not mark; with ``fallback``, when every evictable expert is
        avoided, the least recently used evictable one. None when there is none."""
        if self._keys is None:
            self._build(cache)
        pins = cache.pinned.tobytes()
        r = self._resume
        if r is not None and r[0] is avoid and r[1] == pins:
            start, start_any = r[2], r[3]
        else:
            start = start_any = 0
        av = None if avoid is None else avoid.reshape(-1)
        i = self._first(start, cache, av)
        j = start_any
        found = i
        if i == len(self._keys) and fallback and av is not None:
            j = self._first(start_any, cache, None)
            found = j
        self._resume = (avoid, pins, i, j)
        if found == len(self._keys):
            return None
        return divmod(self._keys[found], self.E)

    def evictable_count(self, cache) -> int:
        """How many experts are evictable now (resident, layer not pinned, in ``keep``)."""
        if self._keys is None:
            self._build(cache)
        count, i, n = 0, 0, len(self._keys)
        while True:
            i = self._first(i, cache, None)
            if i == n:
                return count
            count += 1
            i += 1


class LayerLRUOrder(StampLRU):
    """:class:`LRUOrder` with one order per layer, for policies that evict within a layer: the
    least recently used evictable expert of a given layer (:meth:`StampLRU.oldest_in` over the
    evictable mask of that layer). Same construction and the same reliance on the protocol."""

    def __init__(self, n_layers: int, n_experts: int) -> None:
        super().__init__(n_layers, n_experts)
        self._orders: list[dict[int, None]] | None = None

    def touch(self, layer: int, experts) -> None:
        self.tick += 1
        self.stamp[layer, experts] = self.tick
        if self._orders is None:
            return
        order = self._orders[layer]
        for e in _ascending(experts):
            order.pop(e, None)
            order[e] = None

    def oldest_evictable_in(self, layer: int, cache) -> int | None:
        """The least recently used evictable expert of ``layer``, or None (also when it is pinned)."""
        if self._orders is None:
            self._orders = []
            for l in range(self.stamp.shape[0]):
                idx = np.flatnonzero(cache.resident[l])
                idx = idx[np.argsort(self.stamp[l, idx], kind="stable")]
                self._orders.append(dict.fromkeys(idx.tolist()))
        if cache.pinned[layer]:
            return None
        order = self._orders[layer]
        res = cache.resident[layer]
        found = None
        dead = []
        for e in order:
            if res[e]:
                found = e
                break
            dead.append(e)
        for e in dead:
            del order[e]
        return found
