"""Recency (LRU bookkeeping) of every (layer, expert), as the tick of its last use."""
from __future__ import annotations

import heapq

import numpy as np

_NEVER_OLDEST = np.iinfo(np.int64).max
ELIGIBLE, STALE = -1, -2   # LRUOrder._held: the entry may be the victim / is dropped (else: the layer holding it)


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

    Scans resume: an entry before the cursor is garbage, or was skipped as pinned or avoided
    (kept per layer), or is pending a recheck. The state is the pinned layers and the ``avoid``
    array of the last query (compared by identity: a caller must not change an array in place
    after passing it). When a layer is unpinned or loses avoided experts, its skipped entries
    become pending; nothing else before the cursor can have become eligible. Pending entries are
    older than the cursor, so an eligible one is the answer.
    """

    def __init__(self, n_layers: int, n_experts: int, keep: np.ndarray | None = None) -> None:
        super().__init__(n_layers, n_experts)
        self.E = n_experts
        self._keep = None if keep is None else np.asarray(keep, dtype=bool).reshape(-1)
        self._keys: list[int] | None = None     # flat ids, oldest first
        self._ticks: list[int] = []             # the tick of each entry (stale when not the stamp)
        self._garbage = 0
        self._restart()

    def _restart(self) -> None:
        self._head = 0                          # entries before it are all stale
        self._cursor = 0                        # where the next scan goes on (see above)
        self._skipped: dict[int, list[int]] = {}   # layer -> its entries skipped before the cursor
        self._pending: list[int] = []           # a heap of entries before the cursor to recheck
        self._pins: np.ndarray | None = None    # the state the cursor holds for
        self._pin_bytes = b""
        self._pin_list: list[bool] = []
        self._avoid: np.ndarray | None = None
        self._avoid_set: set[int] | None = None

    def touch(self, layer: int, experts) -> None:
        self.tick += 1
        self.stamp[layer, experts] = self.tick
        if self._keys is None:
            return
        base, keep, tick, last = layer * self.E, self._keep, self.tick, self._last
        for e in _ascending(experts):
            k = base + e
            last[k] = tick
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
        self._last = self.stamp.reshape(-1).tolist()      # stamp as a list (kept by touch)
        self._garbage = 0
        self._restart()

    def _compact(self) -> None:
        """Drop stale entries (the log keeps its order); scans restart from the front."""
        last = self._last
        live = [(k, t) for k, t in zip(self._keys, self._ticks) if last[k] == t]
        self._keys = [k for k, _ in live]
        self._ticks = [t for _, t in live]
        self._garbage = 0
        self._restart()

    def _first(self, i: int, cache, avoid: set | None, skipped: dict | None, pinned=None) -> int:
        """Index of the first live, evictable entry from ``i`` whose flat id is not in ``avoid``
        (or ``len``); marks the entries of experts no longer resident stale, and appends to
        ``skipped`` (per layer) the entries passed for being pinned or avoided."""
        keys, res = self._keys, cache.resident.reshape(-1)
        if pinned is None:
            pinned = cache.pinned.tolist()
        n = len(keys)
        i = max(i, self._head)
        while i < n:
            held = self._held(i, res, pinned, avoid)
            if held == ELIGIBLE:
                return i
            if held >= 0:                        # live but held back: its layer is pinned or it is avoided
                if skipped is not None:
                    skipped.setdefault(held, []).append(i)
                i += 1
                continue
            if i == self._head:
                self._head += 1
            i += 1
        return n

    def _held(self, i: int, res, pinned, avoid) -> int:
        """What keeps entry ``i`` from being the victim: :data:`ELIGIBLE` (nothing), :data:`STALE`
        (a newer entry of its expert exists, or its expert left: then marked dropped, and a later
        landing appends it again), or the layer that holds it back (pinned, or the expert avoided)."""
        k = self._keys[i]
        if self._ticks[i] != self._last[k]:
            return STALE
        if not res[k]:
            self._ticks[i] = -1
            self._garbage += 1
            return STALE
        layer = k // self.E
        return ELIGIBLE if not pinned[layer] and (avoid is None or k not in avoid) else layer

    def _sync_state(self, cache, avoid) -> None:
        """Make pending the skipped entries of layers that may have become eligible since the last
        query (unpinned, or with fewer avoided experts)."""
        pins, old, gone = cache.pinned, self._avoid, None
        if old is not avoid and old is not None:
            gone = old if avoid is None else old & ~avoid
        if self._pins is None:
            self._cursor, self._skipped, self._pending = self._head, {}, []
        else:
            lifted = set((self._pins & ~pins).nonzero()[0].tolist())
            if gone is not None:
                lifted.update(gone.any(axis=1).nonzero()[0].tolist())
            for l in lifted:
                for i in self._skipped.pop(l, ()):
                    heapq.heappush(self._pending, i)
        self._pins = pins.copy()
        self._pin_bytes = self._pins.tobytes()
        self._pin_list = self._pins.tolist()
        if avoid is not old or self._avoid_set is None:
            self._avoid_set = self._avoided(avoid, old, gone)
        self._avoid = avoid

    def _avoided(self, avoid, old, gone) -> set[int] | None:
        """The flat ids ``avoid`` marks, as a set: the last query's set minus ``gone`` (what ``old``
        marked and ``avoid`` does not) when ``avoid`` marks nothing ``old`` did not, else built anew."""
        if avoid is None:
            return None
        have = self._avoid_set
        if have is None or gone is None or (avoid & ~old).any():
            return set(np.flatnonzero(avoid).tolist())
        have.difference_update(np.flatnonzero(gone).tolist())
        return have

    def _first_pending(self, cache) -> int | None:
        """The oldest pending entry that is eligible now; ineligible ones go back to ``skipped``
        and garbage is dropped."""
        pending, res = self._pending, cache.resident.reshape(-1)
        pinned, avoid = self._pin_list, self._avoid_set
        while pending:
            i = pending[0]
            held = self._held(i, res, pinned, avoid)
            if held == ELIGIBLE:
                return i
            if held >= 0:
                self._skipped.setdefault(held, []).append(i)
            heapq.heappop(pending)
        return None

    def oldest_evictable(self, cache, avoid: np.ndarray | None = None,
                         fallback: bool = False) -> tuple[int, int] | None:
        """The least recently used evictable expert (resident, layer not pinned, in ``keep``) that
        ``avoid`` ([L, E] bool) does not mark; with ``fallback``, when every evictable expert is
        avoided, the least recently used evictable one. None when there is none."""
        if self._keys is None:
            self._build(cache)
        if self._pins is None or avoid is not self._avoid or cache.pinned.tobytes() != self._pin_bytes:
            self._sync_state(cache, avoid)
        found = self._first_pending(cache)
        if found is None:
            found = self._cursor = self._first(self._cursor, cache, self._avoid_set, self._skipped,
                                               self._pin_list)
        if found == len(self._keys) and fallback and avoid is not None:
            found = self._first(self._head, cache, None, None, self._pin_list)
        if found == len(self._keys):
            return None
        return divmod(self._keys[found], self.E)

    def evictable_count(self, cache) -> int:
        """How many experts are evictable now (resident, layer not pinned, in ``keep``)."""
        if self._keys is None:
            self._build(cache)
        count, i, n = 0, self._head, len(self._keys)
        pinned = cache.pinned.tolist()
        while True:
            i = self._first(i, cache, None, None, pinned)
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

    def touch_each(self, layer: int, experts: list[int]) -> None:
        """Touch the distinct ``experts`` of ``layer`` one after another (one tick each): the same
        as calling :meth:`touch` for each, in order."""
        if not experts:
            return
        first = self.tick + 1
        self.tick += len(experts)
        self.stamp[layer, experts] = np.arange(first, self.tick + 1)
        if self._orders is not None:
            order = self._orders[layer]
            for e in experts:
                order.pop(e, None)
                order[e] = None

    def oldest_evictable_in(self, layer: int, cache) -> int | None:
        """The least recently used evictable expert of ``layer``, or None (also when it is pinned)."""
        if self._orders is None:
            self._orders = []
            for l in range(self.stamp.shape[0]):
                idx = cache.resident[l].nonzero()[0]
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
