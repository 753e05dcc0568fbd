"""Bringing a static placement back after a switch from a dynamic cache (pure bookkeeping).

After :class:`sim.policies.auto.policy.SpacAuto` switches to a static strategy, the slots still hold
what the dynamic cache left there. :class:`Restore` prefetches the static set's missing experts in
the strategy's own order (most popular first) and names as victims only experts outside the set,
never one of a pinned layer; once the set is back, the static strategy runs as loaded.
"""
from __future__ import annotations

import numpy as np
from sim.policies.common import evictable_mask


class Restore:
    """Prefetch picks and victims that turn the current residency into the static set ``wanted``."""

    def __init__(self, wanted) -> None:
        self.wanted = [(int(l), int(e)) for l, e in wanted]
        self.pos = 0
        self.mask: np.ndarray | None = None

    def _mask(self, cache) -> np.ndarray:
        if self.mask is None:
            self.mask = np.zeros(cache.resident.shape, dtype=bool)
            for l, e in self.wanted:
                self.mask[l, e] = True
        return self.mask

    def next(self, cache):
        """The next missing expert of the set (each is offered once), or None."""
        while self.pos < len(self.wanted):
            l, e = self.wanted[self.pos]
            self.pos += 1
            if not cache.present(l, e):
                return (l, e)
        return None

    def victim(self, cache):
        """A resident expert outside the set and outside pinned layers (lowest layer, then id), or None."""
        free = evictable_mask(cache) & ~self._mask(cache)
        idx = np.flatnonzero(free)
        if not idx.size:
            return None
        l, e = divmod(int(idx[0]), cache.resident.shape[1])
        return (l, e)
