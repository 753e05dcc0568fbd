"""The copy engine: one worker thread that moves experts host->device, like the PCIe link.

It mirrors :class:`sim.engine.link.Link`: demand transfers (a layer waits for them) are served first, in
request order; when none waits and prefetching is enabled, the engine asks the executor for the
policy's next prefetch (the executor calls the policy under its lock); transfers are never
preempted. With a device API (:mod:`real.offload.device_api`: CUDA, or the tests' CPU stand-in)
each copy is issued on a dedicated copy stream after the destination's last-use event, and the
worker waits for the copy's own event before reporting it landed, so a landed expert is complete
on the device. Without one (CPU) the copy is a host memcpy on the same thread. :class:`Faults` injects failed or slow transfers (tests and robustness drills).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

import torch

from sim.protocol import DEMAND, PREFETCH, Copy
from sim.protocol import STREAM_COPY as STREAM

_CLOSED = object()
__all__ = ["CopyEngine", "DEMAND", "Faults", "PREFETCH", "STREAM", "Transfer"]


@dataclass
class Transfer:
    """The protocol core's :class:`sim.protocol.Copy` on real buffers: expert ``copy.experts[i]``
    goes into ``wheres[i]`` (a slot or staging buffer) after ``guards[i]`` (the CUDA event of the
    buffer's last reader, or None); a block lands all of them together."""

    copy: Copy
    wheres: tuple
    guards: tuple = ()
    ok: bool = True
    seconds: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def one(cls, layer: int, expert: int, kind: str, where: tuple[str, int], guard=None) -> "Transfer":
        """A copy of one expert."""
        return cls(Copy(layer, (expert,), kind), (where,), (guard,))

    @property
    def layer(self) -> int:
        return self.copy.layer

    @property
    def expert(self) -> int:
        """The (first) expert copied."""
        return self.copy.experts[0]

    @property
    def kind(self) -> str:
        return self.copy.kind

    @property
    def where(self) -> tuple[str, int]:
        """The (first) destination."""
        return self.wheres[0]


@dataclass
class Faults:
    """Injected transfer faults: every ``fail_every``-th transfer of the ``kinds`` fails (0: none);
    every transfer is delayed by ``delay_ms`` (a slow link)."""

    fail_every: int = 0
    delay_ms: float = 0.0
    kinds: tuple = (DEMAND, PREFETCH, STREAM)
    seen: int = 0
    failed: int = 0

    def strike(self, job: Transfer) -> bool:
        """Whether ``job`` fails (sleeps ``delay_ms`` first)."""
        if self.delay_ms > 0:
            time.sleep(self.delay_ms / 1e3)
        if not self.fail_every or job.kind not in self.kinds:
            return False
        self.seen += 1
        if self.seen % self.fail_every:
            return False
        self.failed += 1
        return True


class CopyEngine:
    """The worker thread. ``next_prefetch()`` returns a :class:`Transfer` or None (executor);
    ``landed(job)`` is called after every copy, failed or not, before ``job.done`` is set."""

    def __init__(self, host, pool, next_prefetch, landed, faults: Faults | None = None):
        self.host, self.pool = host, pool
        self.next_prefetch, self.landed = next_prefetch, landed
        self.faults = faults or Faults()
        self.api = pool.api
        self.stream = self.api.new_stream() if self.api is not None else None
        self.cond = threading.Condition()
        self.queue: deque = deque()
        self.prefetch_enabled = True
        self.busy = False
        self.error: BaseException | None = None
        self._woken = self._closed = False
        self.thread = threading.Thread(target=self._run, name="expert-copy", daemon=True)
        self.thread.start()

    # --- called by the executor ------------------------------------------------------------
    def submit(self, job: Transfer) -> None:
        """Queue a demand (or drain) transfer; it goes before any prefetch."""
        with self.cond:
            self.queue.append(job)
            self.cond.notify()

    def wake(self) -> None:
        """New prefetch work may exist (the simulator's ``link.wake``)."""
        with self.cond:
            self._woken = True
            self.cond.notify()

    def idle(self) -> bool:
        """No transfer queued or being copied."""
        with self.cond:
            return not self.queue and not self.busy

    def wait(self, job: Transfer) -> None:
        """Block until ``job`` landed (or failed); re-raise an error of the worker thread."""
        while not job.done.wait(0.05):
            self.raise_error()
        self.raise_error()

    def raise_error(self) -> None:
        """Re-raise, on the calling thread, an exception that stopped the worker."""
        if self.error is not None:
            raise RuntimeError(f"the copy engine failed: {self.error!r}") from self.error

    def close(self) -> None:
        """Stop the worker after its current transfer."""
        with self.cond:
            self._closed = True
            self.cond.notify()
        self.thread.join(timeout=5)

    # --- the worker ----------------------------------------------------------------------------
    def _next(self):
        with self.cond:
            while not self.queue and not (self.prefetch_enabled and self._woken) and not self._closed:
                self.cond.wait()
            if self._closed:
                return _CLOSED
            self.busy = True
            if self.queue:
                return self.queue.popleft()
            self._woken = False
        return self.next_prefetch()

    def _run(self) -> None:
        if self.api is not None:
            self.api.bind_thread()
        try:
            with torch.inference_mode():   # buffers may be inference tensors (allocated mid-decode)
                self._loop()
        except BaseException as exc:   # surfaced on the executor's thread by wait()/raise_error()
            self.error = exc

    def _loop(self) -> None:
        while True:
            job = self._next()
            if job is _CLOSED:
                return
            if job is not None:
                self._copy(job)
                self.landed(job)
                job.done.set()
            with self.cond:
                self.busy = False
                self._woken = self._woken or job is not None   # the link asks again when it frees up

    def _copy(self, job: Transfer) -> None:
        t0 = time.perf_counter()
        if self.faults.strike(job):
            job.ok = False
            job.seconds = time.perf_counter() - t0
            return
        guards = job.guards or (None,) * len(job.wheres)
        api = self.api
        if api is not None:
            with api.use_stream(self.stream):
                for expert, where, guard in zip(job.copy.experts, job.wheres, guards):
                    if guard is not None:
                        api.wait_event(self.stream, guard)
                    for d, s in zip(self.pool.buffers(where), self.host.expert(job.layer, expert)):
                        api.copy_async(d, s)
                event = api.new_event()
                api.record(event, self.stream)
            api.event_sync(event)
        else:
            for expert, where in zip(job.copy.experts, job.wheres):
                for d, s in zip(self.pool.buffers(where), self.host.expert(job.layer, expert)):
                    d.copy_(s)
        job.seconds = time.perf_counter() - t0
