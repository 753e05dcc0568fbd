"""The PCIe host-to-device link: one copy engine, demand fetches before prefetches.

A SimPy process owns the link. Demand copies (a layer is waiting) are served first, in request
order; when none waits and prefetching is enabled, the link asks the protocol core for the
policy's next prefetch. Copies are not preempted: a demand copy that arrives during a prefetch
waits for it to finish. Each copy holds the link for its ``duration`` (the cost model's
``transfer_s``, or ``bulk_transfer_s`` for a block). The link keeps its own busy time.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import simpy

from sim.protocol import PREFETCH, STREAM_COPY, Copy


@dataclass
class LinkJob:
    """One copy on the link: when it will land (``land_at``, known when it is queued for a demand
    copy, when it starts for a prefetch) and the event that fires when it has landed."""

    copy: Copy
    duration: float
    event: simpy.Event
    land_at: float = float("nan")
    start: float = float("nan")


class Link:
    """The PCIe link process of one :class:`sim.engine.Engine` run.

    ``core`` is the run's :class:`sim.protocol.ProtocolCore` (prefetch choice and landing);
    ``transfer_s`` one expert's copy time; ``on_landed(job)`` is told after each landing."""

    def __init__(self, env: simpy.Environment, core, transfer_s: float, on_landed=None):
        self.env, self.core, self.transfer_s = env, core, transfer_s
        self.on_landed = on_landed
        self.demand: deque[LinkJob] = deque()
        self.busy_s = 0.0
        self.landing: dict[tuple[int, int], LinkJob] = {}
        self._idle: simpy.Event | None = None
        self.prefetch_enabled = True
        self.busy_until = 0.0   # end of the job on the link (in the past when idle)
        self.demand_tail = 0.0  # when the last queued demand job will land
        env.process(self._run())

    def wake(self) -> None:
        """Tell an idle link that new work may exist."""
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    def submit(self, copy: Copy, duration: float) -> LinkJob:
        """Queue a demand copy (slots already reserved unless it streams); returns its job.

        Demand jobs run back to back, first after the job now on the link (no preemption), so
        the landing time is known when asked."""
        self.demand_tail = max(self.env.now, self.busy_until, self.demand_tail) + duration
        job = LinkJob(copy, duration, self.env.event(), land_at=self.demand_tail)
        self.demand.append(job)
        self._register(job)
        self.wake()
        return job

    def _register(self, job: LinkJob) -> None:
        if job.copy.kind != STREAM_COPY:
            for e in job.copy.experts:
                self.landing[(job.copy.layer, e)] = job

    def _next(self) -> LinkJob | None:
        if self.demand:
            return self.demand.popleft()
        if not self.prefetch_enabled:
            return None
        copy = self.core.next_prefetch()
        if copy is None:
            return None
        job = LinkJob(copy, self.transfer_s, self.env.event(), land_at=self.env.now + self.transfer_s)
        self._register(job)
        return job

    def _run(self):
        env = self.env
        while True:
            job = self._next()
            if job is None:
                self._idle = env.event()
                yield self._idle
                self._idle = None
                continue
            job.start = env.now
            self.busy_until = job.start + job.duration
            yield env.timeout(job.duration)
            self.busy_s += job.duration
            self._land(job)

    def _land(self, job: LinkJob) -> None:
        copy, now = job.copy, self.env.now
        if copy.kind != STREAM_COPY:
            for e in copy.experts:
                del self.landing[(copy.layer, e)]
        if abs(now - job.land_at) > 1e-9 * max(1.0, now):
            raise RuntimeError(f"link: job L{copy.layer}{copy.experts} landed at {now}, expected {job.land_at}")
        self.core.landed(copy)
        if self.on_landed is not None:
            self.on_landed(job)
        job.event.succeed()


def job_label(copy: Copy) -> str:
    """Timeline label of a copy on the PCIe lane."""
    if len(copy.experts) > 1:
        return f"block L{copy.layer} x{len(copy.experts)}"
    kind = "prefetch" if copy.kind == PREFETCH else "stream" if copy.kind == STREAM_COPY else "fetch"
    return f"{kind} L{copy.layer}E{copy.experts[0]}"
