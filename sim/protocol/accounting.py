"""Bookkeeping shared by both executors (:mod:`sim.engine.decode` and :mod:`real.offload`).

What counts as a hit, a useful prefetch or an invalid placement must be identical in the simulator
and on real hardware, or their decision counts could not be compared; so it lives here, once.
"""
from __future__ import annotations

import numpy as np

from sim.protocol.expert_cache import CacheError
from sim.protocol.metrics import Counters
from sim.policies.base import CPU, GPU

MAX_PREFETCH_TRIES = 256  # entries a policy may hand back that need no copy before the link idles
_CODES: dict = {}   # dtype -> (GPU, CPU) as scalars of that dtype: an array compares faster with them


class PrefetchTracker:
    """Which resident experts arrived by prefetch and have not been requested since.

    A prefetch is *useful* when its expert is requested before it is evicted (prefetch precision =
    useful / prefetches landed). The flags are one bit mask of experts per layer (Python ints):
    the per-copy updates are bit operations, not numpy scalar writes; :attr:`flags` gives them as
    an array.
    """

    def __init__(self, n_layers: int, n_experts: int):
        self.bits = [0] * n_layers
        self.n_experts = n_experts
        self.n = 0

    @property
    def flags(self) -> np.ndarray:
        """``[L, E]`` bool array of the flags (a copy, for inspection)."""
        return np.array([[m >> e & 1 for e in range(self.n_experts)] for m in self.bits], dtype=bool)

    def landed(self, layer: int, expert: int) -> None:
        """A prefetch landed."""
        self.bits[layer] |= 1 << expert
        self.n += 1

    def evicted(self, layers, experts) -> None:
        """Experts left VRAM (one or many)."""
        if self.n:
            for layer, expert in zip(np.ravel(layers).tolist(), np.ravel(experts).tolist()):
                self.evicted_one(layer, expert)

    def evicted_one(self, layer: int, expert: int) -> None:
        """One expert left VRAM (the scalar form of :meth:`evicted`, on the per-copy path)."""
        m = self.bits[layer]
        if m >> expert & 1:
            self.n -= 1
            self.bits[layer] = m ^ (1 << expert)

    def used(self, layer: int, experts: np.ndarray) -> int:
        """Resident experts of ``layer`` were requested (distinct ids); returns how many were
        unused prefetches."""
        m = self.bits[layer]
        if not m:
            return 0
        useful = 0
        for e in experts.tolist():
            if m >> e & 1:
                useful += 1
                m ^= 1 << e
        if useful:
            self.n -= useful
            self.bits[layer] = m
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
    if tracker.bits[layer]:              # no unused prefetch of this layer: none can be used now
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
