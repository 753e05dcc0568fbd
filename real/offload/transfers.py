"""Slots and transfers of the live executor: the protocol core's copies on real buffers.

Reservation, eviction and landing are :class:`sim.protocol.ProtocolCore`'s (the same code the
simulator runs); this module only turns the core's :class:`sim.protocol.Copy` requests into
:class:`real.offload.copier.Transfer` jobs on the copy engine, keeps the slot pool in step with
the cache (:class:`PoolSlots`), and blocks on copies. Core calls run under the executor's lock
(the copy engine's thread calls :meth:`TransferMixin.start_prefetch` and
:meth:`TransferMixin.transfer_landed`); a failed copy frees its slots, and whoever waited for it
computes the expert on the CPU instead.
"""
from __future__ import annotations

import time

from real.offload.copier import STREAM, Transfer
from sim.protocol import Copy, SlotObserver


class PoolSlots(SlotObserver):
    """Keeps the :class:`real.offload.slots.SlotPool`'s buffer assignment in step with the cache."""

    def __init__(self, pool):
        self.pool = pool

    def taken(self, layer: int, expert: int) -> None:
        self.pool.take((layer, expert))

    def released(self, layer: int, expert: int) -> None:
        self.pool.release((layer, expert))


class TransferMixin:
    """The transfer half of :class:`real.offload.executor.OffloadExecutor`."""

    def transfer(self, copy: Copy) -> Transfer:
        """A :class:`Transfer` for the core's ``copy``, its destinations (slots, or a staging buffer
        for a stream) bound and registered as in flight (locked)."""
        pool = self.pool
        if copy.kind == STREAM:
            wheres = (("stage", pool.acquire_stage()),)
        else:
            wheres = tuple(("slot", pool.slot((copy.layer, e))) for e in copy.experts)
        job = Transfer(copy, wheres, tuple(pool.guard(w) for w in wheres))
        if copy.kind != STREAM:
            for e in copy.experts:
                self.jobs[(copy.layer, e)] = job
        return job

    def start_prefetch(self) -> Transfer | None:
        """The link is idle: the policy's next valid prefetch, its slot reserved, or None."""
        with self.lock:
            copy = self.core.next_prefetch()
            return None if copy is None else self.transfer(copy)

    def transfer_landed(self, job: Transfer) -> None:
        """Called by the copy engine after every copy (failed copies free their slots)."""
        with self.lock:
            self.c.pcie_busy_s += job.seconds
            if job.kind != STREAM:
                for e in job.copy.experts:
                    self.jobs.pop((job.layer, e), None)
            self.core.landed(job.copy, job.ok)

    def drain(self) -> None:
        """Blocking prefetch (``overlap = False``): move every queued expert now, one after another."""
        while (job := self.start_prefetch()) is not None:
            self.copier.submit(job)
            self.copier.wait(job)

    def submit(self, copy: Copy) -> Transfer:
        """Start a demand (or stream) copy whose slots the core just reserved (locked)."""
        job = self.transfer(copy)
        self.copier.submit(job)
        return job

    def wait(self, job: Transfer) -> None:
        """Block on a transfer; the time counts as the device waiting."""
        t0 = time.perf_counter()
        self.copier.wait(job)
        self.wait_s += time.perf_counter() - t0
