"""The PCIe host-to-device link: one copy engine, demand fetches before prefetches.

A SimPy process owns the link. Demand fetches (a layer is waiting) are served first, in request
order; when none waits, the link asks the policy for its next prefetch. Transfers are not
preempted: a demand fetch that arrives during a prefetch waits for it to finish. Each transfer
holds the link for ``latency + bytes / bandwidth`` (the cost model's ``transfer_s``).
"""
from __future__ import annotations

from collections import deque

import simpy


class Link:
    """The PCIe link process; the :class:`sim.engine.Engine` owns it and records its busy time."""

    def __init__(self, env: simpy.Environment, engine):
        self.env, self.engine = env, engine
        self.demand: deque = deque()
        self.busy_s = 0.0
        self.landing: dict[tuple[int, int], simpy.Event] = {}
        self._idle: simpy.Event | None = None
        self.prefetch_enabled = True
        self.busy_until = 0.0   # end of the job on the link (in the past when idle)
        self.demand_tail = 0.0  # when the last queued demand job will land
        env.process(self._run())

    def wake(self) -> None:
        """Tell an idle link that new work may exist."""
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    def request(self, layer: int, expert: int, stream: bool = False) -> simpy.Event:
        """Queue a demand transfer (slot already reserved unless ``stream``); returns its landing event."""
        return self.request_bulk(layer, (expert,), self.engine.transfer_s, stream)

    def request_bulk(self, layer: int, experts: tuple, duration: float, stream: bool = False) -> simpy.Event:
        """Queue one demand copy of several experts of a layer (slots reserved); one landing event.

        The event's ``land_at`` is the time it will land: demand jobs run back to back, first
        after the job now on the link (no preemption), so it is known when asked."""
        ev = self.env.event()
        self.demand_tail = max(self.env.now, self.busy_until, self.demand_tail) + duration
        ev.land_at = self.demand_tail
        self.demand.append((layer, experts, stream, ev, False, duration))
        if not stream:
            for e in experts:
                self.landing[(layer, e)] = ev
        self.wake()
        return ev

    def _next(self):
        if self.demand:
            return self.demand.popleft()
        if not self.prefetch_enabled:
            return None
        return self.engine.start_prefetch()

    def _run(self):
        env, eng = self.env, self.engine
        while True:
            job = self._next()
            if job is None:
                self._idle = env.event()
                yield self._idle
                self._idle = None
                continue
            layer, experts, stream, ev, prefetch, dur = job
            if prefetch:
                self.landing[(layer, experts[0])] = ev
                ev.land_at = env.now + dur
            start = env.now
            self.busy_until = start + dur
            yield env.timeout(dur)
            self.busy_s += dur
            if not stream:
                for e in experts:
                    del self.landing[(layer, e)]
            if abs(env.now - ev.land_at) > 1e-9 * max(1.0, env.now):
                raise RuntimeError(f"link: job L{layer}{experts} landed at {env.now}, expected {ev.land_at}")
            if len(experts) == 1:
                eng.transfer_landed(layer, experts[0], stream, start, prefetch)
            else:
                eng.block_landed(layer, experts, start)
            ev.succeed()
