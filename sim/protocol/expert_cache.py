"""The expert cache: VRAM slots and the residency of every (layer, expert).

One object, owned and mutated by the executor (a transfer begins, lands, an expert is evicted, a
layer is pinned while it computes); policies read it to decide. It enforces the invariants that
make results trustworthy: never more resident + in-flight experts than slots, no eviction of a
pinned or in-flight expert, no double transfer.
"""
from __future__ import annotations

import numpy as np


class CacheError(RuntimeError):
    """An executor or policy asked the cache for something impossible (a bug, never bad input)."""


class ExpertCache:
    """Residency of ``n_layers x n_experts`` experts in ``n_slots`` VRAM slots.

    Attributes (read-only for policies): ``resident[l, e]`` (weights in a slot, usable),
    ``inflight[l, e]`` (slot reserved, transfer under way), ``pinned[l]`` (layer ``l`` is computing:
    its resident experts may not be evicted), ``n_used`` (resident + in flight).
    """

    def __init__(self, n_layers: int, n_experts: int, n_slots: int):
        if n_slots < 0:
            raise CacheError(f"n_slots must be >= 0, got {n_slots}")
        self.n_layers, self.n_experts, self.n_slots = n_layers, n_experts, n_slots
        self.resident = np.zeros((n_layers, n_experts), dtype=bool)
        self.inflight = np.zeros((n_layers, n_experts), dtype=bool)
        self.pinned = np.zeros(n_layers, dtype=bool)
        self.n_used = 0

    @property
    def n_free(self) -> int:
        return self.n_slots - self.n_used

    def present(self, layer: int, expert: int) -> bool:
        """Resident or on its way."""
        return self.resident.item(layer, expert) or self.inflight.item(layer, expert)

    def load(self, layer: int, expert: int) -> None:
        """Place an expert at once: :meth:`begin` and :meth:`land` in one (a static placement
        before decoding starts, or a copy that lands within the same call)."""
        resident = self.resident
        if resident.item(layer, expert) or self.inflight.item(layer, expert):
            raise CacheError(f"expert ({layer}, {expert}) is already resident or in flight")
        if self.n_used >= self.n_slots:
            raise CacheError("no free slot: evict first")
        resident[layer, expert] = True
        self.n_used += 1

    def begin(self, layer: int, expert: int) -> None:
        """Reserve a free slot for a transfer of (layer, expert)."""
        if self.resident.item(layer, expert) or self.inflight.item(layer, expert):
            raise CacheError(f"expert ({layer}, {expert}) is already resident or in flight")
        if self.n_used >= self.n_slots:
            raise CacheError("no free slot: evict first")
        self.inflight[layer, expert] = True
        self.n_used += 1

    def begin_many(self, layer: int, experts) -> None:
        """Reserve free slots for several experts of one layer at once (a block copy)."""
        experts = np.asarray(experts, dtype=np.int64)
        if np.count_nonzero(self.resident[layer, experts] | self.inflight[layer, experts]):  # (faster than any())
            raise CacheError(f"some of layer {layer}'s experts {experts.tolist()} are already present")
        if self.n_used + experts.size > self.n_slots:
            raise CacheError("not enough free slots: evict first")
        self.inflight[layer, experts] = True
        self.n_used += experts.size

    def land_many(self, layer: int, experts) -> None:
        """Several transfers of one layer finished together."""
        experts = np.asarray(experts, dtype=np.int64)
        if np.count_nonzero(self.inflight[layer, experts]) != experts.size:
            raise CacheError(f"some of layer {layer}'s experts {experts.tolist()} were not in flight")
        self.inflight[layer, experts] = False
        self.resident[layer, experts] = True

    def land(self, layer: int, expert: int) -> None:
        """A transfer finished: the expert becomes resident."""
        inflight = self.inflight
        if not inflight.item(layer, expert):
            raise CacheError(f"expert ({layer}, {expert}) was not in flight")
        inflight[layer, expert] = False
        self.resident[layer, expert] = True

    def cancel(self, layer: int, expert: int) -> None:
        """A transfer failed or was abandoned: free its slot."""
        if not self.inflight[layer, expert]:
            raise CacheError(f"expert ({layer}, {expert}) was not in flight")
        self.inflight[layer, expert] = False
        self.n_used -= 1

    def evict(self, layer: int, expert: int) -> None:
        """Free the slot of a resident, unpinned expert."""
        if not self.resident.item(layer, expert):
            raise CacheError(f"cannot evict ({layer}, {expert}): not resident")
        if self.pinned.item(layer):
            raise CacheError(f"cannot evict ({layer}, {expert}): layer {layer} is pinned while it computes")
        self.resident[layer, expert] = False
        self.n_used -= 1

    def evict_many(self, layers, experts) -> None:
        """Free the slots of several resident, unpinned experts at once."""
        layers, experts = np.asarray(layers, dtype=np.int64), np.asarray(experts, dtype=np.int64)
        if np.count_nonzero(self.resident[layers, experts]) != layers.size:
            raise CacheError("cannot evict: some experts are not resident")
        if np.count_nonzero(self.pinned[layers]):
            raise CacheError("cannot evict: a pinned layer's expert was named")
        self.resident[layers, experts] = False
        self.n_used -= layers.size

    def check(self) -> None:
        """Assert the slot-accounting invariant (used by tests)."""
        used = int(self.resident.sum() + self.inflight.sum())
        if used != self.n_used or used > self.n_slots or (self.resident & self.inflight).any():
            raise CacheError(f"slot accounting broken: counted {used}, tracked {self.n_used}, slots {self.n_slots}")
