"""Bookkeeping shared by both executors (:mod:`sim.engine` and :mod:`real.offload`).

What counts as a hit, a useful prefetch or an invalid placement must be identical in the simulator
and on real hardware, or their decision counts could not be compared; so it lives here, once.
"""
from __future__ import annotations

import numpy as np

from sim.expert_cache import CacheError
from sim.metrics import Counters
from sim.policies.base import CPU, GPU

MAX_PREFETCH_TRIES = 256  # entries a policy may hand back that need no copy before the link idles
_CODES: dict = {}   # dtype -> (GPU, CPU) as scalars of that dtype: an array compares faster with them


class PrefetchTracker:
    """Which resident experts arrived by prefetch and have not been requested since.

    A prefetch is *useful* when its expert is requested before it is evicted (prefetch precision =
    useful / prefetches landed).
    """

    def __init__(self, n_layers: int, n_experts: int):
        self.flags = np.zeros((n_layers, n_experts), dtype=bool)
        self.n = 0

    def landed(self, layer: int, expert: int) -> None:
        """A prefetch landed."""
        self.flags[layer, expert] = True
        self.n += 1

    def evicted(self, layers, experts) -> None:
        """Experts left VRAM (one or many)."""
        if self.n:
            hit = self.flags[layers, experts]
            self.n -= int(np.count_nonzero(hit))
            self.flags[layers, experts] = False

    def evicted_one(self, layer: int, expert: int) -> None:
        """One expert left VRAM (the scalar form of :meth:`evicted`, on the per-copy path)."""
        if self.n and self.flags.item(layer, expert):
            self.n -= 1
            self.flags[layer, expert] = False

    def used(self, layer: int, experts: np.ndarray) -> int:
        """Resident experts of ``layer`` were requested; returns how many were unused prefetches."""
        if not self.n:
            return 0
        row = self.flags[layer]
        useful = int(np.count_nonzero(row[experts]))
        if useful:
            self.n -= useful
            row[experts] = False
        return useful


def tally_requests(c: Counters, cache, tracker: PrefetchTracker, layer: int, req: np.ndarray,
                   where: np.ndarray, policy_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Count a layer's requests, hits and useful prefetches; check GPU placements are resident.

    ``req`` are the requested experts, ``where`` their placement codes; returns the GPU and CPU
    masks over ``req``.
    """
    res = cache.resident[layer][req]
    c.requests += req.size
    c.hits += int(np.count_nonzero(res))
    c.prefetch_useful += tracker.used(layer, req[res])
    codes = _CODES.get(where.dtype)
    if codes is None:
        codes = _CODES[where.dtype] = (where.dtype.type(GPU), where.dtype.type(CPU))
    on_gpu, on_cpu = where == codes[0], where == codes[1]
    if np.count_nonzero(on_gpu > res):     # on the GPU but not resident
        bad = req[on_gpu & ~res][0]
        raise CacheError(f"policy {policy_name!r} placed expert ({layer}, {bad}) on the GPU but it is not resident")
    return on_gpu, on_cpu


def next_prefetch(policy, cache, reserve) -> tuple[int, int] | None:
    """The link is idle: the policy's next prefetch that needs a copy and got a slot, or None.

    Entries already resident or in flight are skipped; ``reserve(layer, expert)`` reserves a slot
    (asking the policy for a victim) and returns False when the policy names none.
    """
    for _ in range(MAX_PREFETCH_TRIES):
        item = policy.next_transfer(cache)
        if item is None:
            return None
        layer, expert = int(item[0]), int(item[1])
        if not cache.present(layer, expert) and reserve(layer, expert):
            return layer, expert
    return None
