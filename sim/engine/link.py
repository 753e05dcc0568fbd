"""The PCIe host-to-device link: one copy engine, demand fetches before prefetches.

A SimPy process owns the link. Demand copies (a layer is waiting) are served first, in request
order; when none waits and prefetching is enabled, the link asks the protocol core for the
policy's next prefetch. Copies are not preempted: a demand copy that arrives during a prefetch
waits for it to finish. Each copy holds the link for its ``duration`` (the cost model's
``transfer_s``, or ``bulk_transfer_s`` for a block). The link keeps its own busy time.

Coalesced runs. Between two events of the other processes nothing but the link touches the
cache or the policy, so the link need not sleep through each copy: it computes when each queued
copy lands (start = the previous landing, land = start + duration, the same float sums SimPy
would make), and lands every copy that lands *strictly before* the next scheduled event
(``env.peek()``) and that nobody waits on, without a SimPy event -- the policy sees the same
calls in the same order as with one timeout per copy. Such a run of prefetches is one call to
the core (:meth:`sim.protocol.ProtocolCore.prefetch_run`), which lands them in one loop and
returns the first prefetch that does not land in time. Only the copy in flight when another
process next runs, or one a process waits on, becomes a SimPy timeout, scheduled at exactly its
landing time (:func:`timeout_at`). A landing at the same instant as another event is never
coalesced (SimPy would run the earlier-scheduled event first), so ties resolve as before.

Waking. A process that gives an idle link new prefetch work (:meth:`Link.wake`) does not wake it
through a SimPy event: the link looks for work when that process next waits (:meth:`Link.settle`,
its next event then scheduled), which is exactly when the wake-up event would have run; only a
copy that does not land before the next event then takes an event (its landing). Demand copies
wake the process at once.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import simpy

from sim.protocol import PREFETCH, STREAM_COPY, Copy


@dataclass(slots=True)
class LinkJob:
    """One copy on the link: when it will land (``land_at``, known when it is queued for a demand
    copy, when it starts for a prefetch), when it started and ended, whether it has landed
    (``done``), and the event a waiting process sleeps on (made only when one waits)."""

    copy: Copy
    duration: float
    land_at: float = float("nan")
    start: float = float("nan")
    end: float = float("nan")
    done: bool = False
    waiter: simpy.Event | None = None


def timeout_at(env: simpy.Environment, at: float) -> simpy.Timeout:
    """A timeout that fires at exactly ``at`` (>= ``env.now``): the delay is nudged by ulps until
    ``env.now + delay == at`` in floating point (SimPy schedules at ``now + delay``)."""
    d = at - env.now
    while env.now + d < at:
        d = math.nextafter(d, math.inf)
    while env.now + d > at:
        d = math.nextafter(d, -math.inf)
    return env.timeout(d)


class Link:
    """The PCIe link process of one :class:`sim.engine.decode.Engine` run.

    ``core`` is the run's :class:`sim.protocol.ProtocolCore` (prefetch choice and landing);
    ``transfer_s`` one expert's copy time; ``on_landed(job)`` is told after each landing.
    ``coalesce=False`` gives every copy its own SimPy timeout (the reference the tests compare
    the coalesced runs with). ``prefetches=False`` (a policy that never prefetches:
    :meth:`sim.policies.base.Policy.prefetches`) lets the idle link sleep until a demand copy
    comes, without asking the core for prefetches it would never get."""

    def __init__(self, env: simpy.Environment, core, transfer_s: float, on_landed=None, coalesce: bool = True,
                 prefetches: bool = True):
        self.env, self.core, self.transfer_s = env, core, transfer_s
        self.on_landed = on_landed
        self.demand: deque[LinkJob] = deque()
        self.busy_s = 0.0
        self.landing: dict[tuple[int, int], LinkJob] = {}     # single copies in flight, by (layer, expert)
        self.blocks: dict[int, list[LinkJob]] = {}            # block copies in flight, by layer
        self._idle: simpy.Event | None = None
        self.prefetch_enabled = True
        self.busy_until = 0.0   # end of the job on the link (in the past when idle)
        self.demand_tail = 0.0  # when the last queued demand job will land
        self._job_start: float | None = None   # start of the job a SimPy timeout is running (None otherwise)
        self._woken = False     # woken while idle: settle() looks for prefetches
        self._started = None    # (job, landing, timeout) that settle() started for the sleeping process
        self.coalesced = 0      # copies landed without a SimPy event
        self.coalesce = coalesce
        self.prefetches = prefetches
        env.process(self._run())

    def wake(self) -> None:
        """Tell an idle link that new work may exist. A demand copy (or a link without coalesced
        runs) wakes the process at once; otherwise the link only notes it and looks for
        prefetches at the waking process's next wait (:meth:`settle`), without a SimPy event
        when it finds none."""
        idle = self._idle
        if idle is not None and not idle.triggered:
            if self.demand or not self.coalesce:
                idle.succeed()
            elif self.prefetches:
                self._woken = True

    def settle(self, horizon: float | None = None) -> None:
        """A process that woke the idle link is about to wait (its next event scheduled): do now
        what the link process would do first when its wake-up event ran -- land the prefetches
        that land before the next event and start the first that does not (its landing then is
        the process's next event). The same calls at the same simulated time: in between nothing
        but this link could act. ``horizon``: the next event when it is not yet scheduled (a
        process that ends now: its end is the next event)."""
        if not self._woken:
            return
        self._woken = False
        idle = self._idle
        if idle is None or idle.triggered:
            return
        if self.demand:
            idle.succeed()
            return
        if not self.prefetch_enabled:
            return
        copy, now = self._prefetch_run(self.env.now, horizon)
        if copy is None:
            return                          # still idle: the process sleeps on
        job = self._prefetch_job(copy, now)
        land = self.busy_until = now + job.duration     # lands at or after the next event
        self._job_start = now
        self._started = (job, land, timeout_at(self.env, land))
        idle.succeed()

    def submit(self, copy: Copy, duration: float) -> LinkJob:
        """Queue a demand copy (slots already reserved unless it streams); returns its job.

        Demand jobs run back to back, first after the job now on the link (no preemption), so
        the landing time is known when asked."""
        job = self._enqueue(copy, duration)
        self.wake()
        return job

    def _enqueue(self, copy: Copy, duration: float) -> LinkJob:
        """:meth:`submit` without the wake-up: the job queued behind the demand tail, indexed."""
        self.demand_tail = max(self.env.now, self.busy_until, self.demand_tail) + duration
        job = LinkJob(copy, duration, land_at=self.demand_tail)
        self.demand.append(job)
        self._register(job)
        return job

    def submit_waits(self, waits, block_s) -> list[LinkJob]:
        """The jobs of a layer's waits (:class:`sim.protocol.Wait`), in order: a new copy is queued
        as :meth:`submit` queues it (each after the last), an awaited copy already in flight is
        found (:meth:`job_of`). A copy's duration is ``transfer_s``, or ``block_s(n)`` for a block
        of ``n`` experts. One wake-up for all (the first would do it)."""
        jobs, queued = [], False
        for w in waits:
            copy = w.copy
            if copy is None:
                jobs.append(self.job_of(w.key))
                continue
            n = len(copy.experts)
            jobs.append(self._enqueue(copy, self.transfer_s if n == 1 else block_s(n)))
            queued = True
        if queued:
            self.wake()
        return jobs

    def busy_to(self, t: float) -> float:
        """Busy seconds of the link from its start up to ``t`` (now, or later within the job on the
        link): the landed jobs' durations plus the running job's part before ``t``. Coalesced copies
        all land before the next event of another process, so at any instant a process reads this
        they are in the past and in ``busy_s``."""
        if self._job_start is None:
            return self.busy_s
        return self.busy_s + max(0.0, min(t, self.busy_until) - self._job_start)

    def quiet_until(self) -> float:
        """When the link process next runs by itself: the landing of the job on the link, never
        (inf) when it sleeps idle and nobody woke it, now otherwise (woken, or about to start).
        Until then its state, :meth:`busy_to` included, changes only through other processes."""
        if self._job_start is not None:
            return self.busy_until
        idle = self._idle
        if idle is not None and not idle.triggered and not self._woken:
            return math.inf
        return self.env.now

    def until_landed(self, job: LinkJob) -> simpy.Event:
        """The event a process waits on until ``job`` has landed (already processed if it has)."""
        if job.waiter is None:
            job.waiter = self.env.event()
            if job.done:
                job.waiter.succeed()
        return job.waiter

    def job_of(self, key: tuple[int, int]) -> LinkJob:
        """The job in flight that moves expert ``key = (layer, expert)`` (a single copy, or a
        block copy of that layer naming it); KeyError if none does."""
        job = self.landing.get(key)
        if job is not None:
            return job
        layer, expert = key
        for job in self.blocks.get(layer, ()):
            if expert in job.copy.experts:
                return job
        raise KeyError(key)

    def _register(self, job: LinkJob) -> None:
        """Index a queued copy's job for :meth:`job_of` (a block under its layer, not per expert)."""
        copy = job.copy
        experts = copy.experts
        if copy.kind == STREAM_COPY:
            return
        if len(experts) == 1:
            self.landing[copy.layer, experts[0]] = job
        else:
            self.blocks.setdefault(copy.layer, []).append(job)

    def _run(self):
        env, core = self.env, self.core
        now = env.now
        while True:
            if self._started is not None:       # started by settle() while this process slept
                job, land, landing = self._started
                self._started = None
                yield landing
                self._job_start = None
                self.busy_s += job.duration
                self._land(job, land)
                now = land
                continue
            if self.demand:
                job = self.demand.popleft()
            else:
                copy = None
                if self.prefetch_enabled and self.prefetches:
                    if self.coalesce:
                        copy, now = self._prefetch_run(now)
                    else:
                        copy = core.next_prefetch()
                if copy is None:
                    self._idle = env.event()
                    yield self._idle
                    self._idle = None
                    now = env.now
                    continue
                job = self._prefetch_job(copy, now)
            job.start = now
            land = self.busy_until = now + job.duration
            if not self.coalesce or job.waiter is not None or land >= env.peek():
                self._job_start = now
                yield timeout_at(env, land)
                self._job_start = None
            else:
                self.coalesced += 1
            self.busy_s += job.duration
            self._land(job, land)
            now = land

    def _prefetch_job(self, copy: Copy, now: float) -> LinkJob:
        """The job of a prefetch that starts at ``now``, registered (someone may ask for it
        before it lands)."""
        job = LinkJob(copy, self.transfer_s, land_at=now + self.transfer_s, start=now)
        self._register(job)
        return job

    def drain_run(self) -> tuple[Copy | None, float]:
        """A blocking drain's copies on the idle link from now (:meth:`sim.engine.decode.Engine._drain`):
        the same coalesced run as :meth:`_prefetch_run`, landed before the next event of another
        process; returns the first copy that does not land in time (to submit once the link is
        free) or None, and when the link is free."""
        now = self.env.now
        if self.demand or self.busy_until > now:
            raise RuntimeError("link: a drain needs an idle link")
        return self._prefetch_run(now)

    def _prefetch_run(self, now: float, horizon: float | None = None):
        """Land every prefetch that lands before the next event of another process (one core
        call); returns the first one that does not (or None: the policy has none) and the time."""
        dt = self.transfer_s
        report = self._report if self.on_landed is not None else None
        copy, end, n = self.core.prefetch_run(now, dt, self.env.peek() if horizon is None else horizon, report)
        if n:
            busy = self.busy_s
            for _ in range(n):          # the same float sums as one addition per landed copy
                busy += dt
            self.busy_s, self.busy_until = busy, end
            self.coalesced += n
        return copy, end

    def _report(self, layer: int, expert: int, start: float, land: float) -> None:
        self.on_landed(LinkJob(Copy(layer, (expert,), PREFETCH), self.transfer_s, land, start, land, True))

    def _land(self, job: LinkJob, now: float) -> None:
        copy = job.copy
        if copy.kind != STREAM_COPY:
            experts = copy.experts
            if len(experts) == 1:
                del self.landing[copy.layer, experts[0]]
            else:
                jobs = self.blocks[copy.layer]
                jobs.remove(job)
                if not jobs:
                    del self.blocks[copy.layer]
        if abs(now - job.land_at) > 1e-9 * max(1.0, now):
            raise RuntimeError(f"link: job L{copy.layer}{copy.experts} landed at {now}, expected {job.land_at}")
        job.end, job.done = now, True
        self.core.landed(copy)
        if self.on_landed is not None:
            self.on_landed(job)
        if job.waiter is not None:
            job.waiter.succeed()


def job_label(copy: Copy) -> str:
    """Timeline label of a copy on the PCIe lane."""
    if len(copy.experts) > 1:
        return f"block L{copy.layer} x{len(copy.experts)}"
    kind = "prefetch" if copy.kind == PREFETCH else "stream" if copy.kind == STREAM_COPY else "fetch"
    return f"{kind} L{copy.layer}E{copy.experts[0]}"
