"""Slots and transfers of the live executor: ``Engine._reserve``, ``start_prefetch``,
``transfer_landed`` and ``_drain`` of :mod:`sim.engine`, line by line, on real copies.

Reservation and landing run under the executor's lock (the copy engine's thread calls
:meth:`TransferMixin.start_prefetch` and :meth:`TransferMixin.transfer_landed`); a failed copy
cancels its reservation (``cache.cancel``) and frees the slot, and whoever waited for it computes
the expert on the CPU instead.
"""
from __future__ import annotations

import time

from real.offload.copier import DEMAND, PREFETCH, STREAM, Transfer
from sim.accounting import next_prefetch



class TransferMixin:
    """The slot and transfer half of :class:`real.offload.executor.OffloadExecutor`."""

    def reserve(self, layer: int, expert: int) -> bool:
        """Reserve a slot for (layer, expert), evicting the policy's victim if none is free (locked)."""
        cache = self.cache
        if cache.n_free <= 0:
            victim = self.policy.victim(layer, expert, cache)
            if victim is None:
                return False
            vl, ve = int(victim[0]), int(victim[1])
            cache.evict(vl, ve)
            self.pool.release((vl, ve))
            self.prefetched.evicted(vl, ve)
            self.c.evictions += 1
        cache.begin(layer, expert)
        self.pool.take((layer, expert))
        return True

    def transfer(self, layer: int, expert: int, kind: str) -> Transfer:
        """A copy into (layer, expert)'s reserved slot, registered as in flight (locked)."""
        where = ("slot", self.pool.slot((layer, expert)))
        job = Transfer(layer, expert, kind, where, guard=self.pool.guard(where))
        self.jobs[(layer, expert)] = job
        return job

    def stream(self, layer: int, expert: int) -> Transfer:
        """A copy into a staging buffer for a STREAM placement (no slot; locked)."""
        where = ("stage", self.pool.acquire_stage())
        return Transfer(layer, expert, STREAM, where, guard=self.pool.guard(where))

    def start_prefetch(self) -> Transfer | None:
        """The link is idle: the policy's next valid prefetch, its slot reserved, or None."""
        with self.lock:
            item = next_prefetch(self.policy, self.cache, self.reserve)
            return None if item is None else self.transfer(item[0], item[1], PREFETCH)

    def transfer_landed(self, job: Transfer) -> None:
        """Called by the copy engine after every copy (failed copies free their slot)."""
        with self.lock:
            c, key = self.c, (job.layer, job.expert)
            c.pcie_busy_s += job.seconds
            if job.kind != STREAM:
                self.jobs.pop(key, None)
            if not job.ok:
                self.failed += 1
                if job.kind != STREAM:
                    self.cache.cancel(*key)
                    self.pool.release(key)
                return
            c.pcie_bytes += self.host.expert_bytes
            if job.kind == STREAM:
                c.streams += 1
                return
            self.cache.land(*key)
            if job.kind == PREFETCH:
                c.prefetches += 1
                self.prefetched.landed(*key)
            else:
                c.demand_fetches += 1
            self.policy.on_transfer_done(job.layer, job.expert, self.cache)

    def drain(self) -> None:
        """Blocking prefetch (``overlap = False``): move every queued expert now, one after another."""
        while True:
            job = self.start_prefetch()
            if job is None:
                return
            self.copier.submit(job)
            self.copier.wait(job)

    def submit_demand(self, layer: int, expert: int) -> Transfer:
        """Start a demand fetch into the slot just reserved (locked)."""
        job = self.transfer(layer, expert, DEMAND)
        self.copier.submit(job)
        return job

    def wait(self, job: Transfer) -> None:
        """Block on a transfer; the time counts as the device waiting."""
        t0 = time.perf_counter()
        self.copier.wait(job)
        self.wait_s += time.perf_counter() - t0
