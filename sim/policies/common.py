"""Small pieces shared by the baseline policies: eligibility tests and demand bookkeeping.

Nothing here decides anything by itself; each policy module states its own mechanism.
"""
from __future__ import annotations

import numpy as np

from sim.policies.base import CPU, FETCH, GPU, STREAM, Policy


def requested(counts: np.ndarray) -> np.ndarray:
    """Expert ids with at least one token routed to them (ascending)."""
    return (np.asarray(counts) > 0).ravel().nonzero()[0]


def evictable_mask(cache) -> np.ndarray:
    """``[L, E]`` mask of experts that may be evicted now."""
    return cache.resident & ~cache.pinned[:, None]


def present_row(cache, layer: int) -> np.ndarray:
    """``[E]`` mask of experts of ``layer`` resident or in flight."""
    return cache.resident[layer] | cache.inflight[layer]


# ``where`` codes by lookup: index 2 * on_gpu + resident (gpu_where), resident (fetch_all_where)
_SPLIT_CODES = np.array([CPU, CPU, FETCH, GPU], dtype=np.int8)
_FETCH_CODES = np.array([FETCH, GPU], dtype=np.int8)
_SPLIT_CODES.flags.writeable = False
_FETCH_CODES.flags.writeable = False
_STATIC_CODES = {CPU: np.array([CPU, GPU], dtype=np.int8), STREAM: np.array([STREAM, GPU], dtype=np.int8)}
for _codes in _STATIC_CODES.values():
    _codes.flags.writeable = False


def gpu_where(cache, layer: int, counts: np.ndarray, on_gpu: np.ndarray) -> np.ndarray:
    """``where`` array from a GPU/CPU decision: GPU if resident, FETCH if not (in flight: wait), else CPU."""
    code = np.asarray(on_gpu, dtype=bool).view(np.uint8) * np.uint8(2) + cache.resident[layer].view(np.uint8)
    return _SPLIT_CODES.take(code)


def fetch_all_where(cache, layer: int, counts: np.ndarray) -> np.ndarray:
    """``where`` for GPU-only policies: GPU when resident, otherwise FETCH (demand fetch, or wait)."""
    return _FETCH_CODES.take(cache.resident[layer].view(np.uint8))


def static_where(cache, layer: int, other: int) -> np.ndarray:
    """``where`` for static placements: GPU when resident, otherwise ``other`` (CPU or STREAM)."""
    return _STATIC_CODES[other].take(cache.resident[layer].view(np.uint8))


class OffloadPolicy(Policy):
    """Base for policies that move experts: counts prefetches offered and dropped (for :meth:`metrics`).

    :meth:`victim` is called for both demand fetches and prefetches (its ``demand`` argument says
    which); a policy usually refuses to evict a more useful expert for a prefetch, but must find
    room for a demand fetch.
    """

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self._n_offered = 0
        self._n_dropped = 0

    def offer(self, item):
        """Count and return a prefetch candidate (or None) from :meth:`next_transfer`."""
        if item is not None:
            self._n_offered += 1
        return item

    def refuse(self, demand: bool):
        """Count a dropped prefetch when :meth:`victim` finds nothing worth evicting; returns None."""
        if not demand:
            self._n_dropped += 1
        return None

    def metrics(self) -> dict[str, float]:
        return {"prefetch_offered": float(self._n_offered), "prefetch_dropped": float(self._n_dropped)}


__all__ = ["CPU", "FETCH", "GPU", "OffloadPolicy", "evictable_mask", "fetch_all_where",
           "gpu_where", "present_row", "requested", "static_where"]
