"""A CPU stand-in for the CUDA device API (:class:`real.offload.device_api.CudaApi`), for tests.

:class:`FakeCuda` has the same methods as ``CudaApi``, so the executor's asynchronous branch (copy
stream, events, pinned host buffers, slot guards) runs unchanged on CPU tensors:

* **Streams** are FIFOs with a sequence number per operation and a completion time on a real
  clock: a copy takes ``copy_s`` seconds (``delay(dst, src)`` may override it) after the previous
  operation of its stream and after every event the stream waited for; a kernel takes
  ``kernel_s``. The calling thread's current stream is thread-local (default: the ``default``
  stream, which the decoding thread computes on).
* **Copies land later**: ``copy_async`` only enqueues; the bytes reach the destination when the
  copy completed on the clock, or earlier when a later operation ordered after it needs them.
* **Ordering** is tracked with vector clocks: each stream's ``deps`` (what it waited for), the
  host's ``known`` (what a ``query``/``*_sync`` showed complete, after which every thread's new
  work is ordered after it), each event's recorded point.
* **Hazards** (:class:`tests.real.fake_memory.Hazard`), raised on the thread that caused them and
  kept in ``hazards``: a kernel reading a buffer before the copy into it is ordered before it; a
  copy overwriting a buffer while a kernel reading it may still run, or while an earlier copy into
  it is in flight; an event re-recorded before its previous record was seen complete; an
  asynchronous copy from pageable (unpinned) host memory.
* ``log`` records ``(op, stream name, thread name)`` of every copy and kernel, so a test can check
  which stream work went to.
"""
from __future__ import annotations

import contextlib
import threading
import time

import torch

from tests.real.fake_memory import DevTensor, Hazard, Regions, plain, span


class FakeStream:
    """A FIFO: ``seq`` operations so far, ``deps`` (stream -> seq it is ordered after), ``end_at``."""

    def __init__(self, name: str):
        self.name, self.seq, self.deps, self.end_at = name, 0, {}, 0.0


class FakeEvent:
    """An event: unrecorded, or recorded at ``vector`` (completes at ``at``)."""

    def __init__(self):
        self.vector, self.at, self.stream = None, 0.0, None


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, 0), v)
    return out


class FakeCuda:
    """The stand-in device API (see the module docstring)."""

    def __init__(self, copy_s: float = 0.0, kernel_s: float = 0.0, delay=None, strict_pinned: bool = True):
        self.copy_s, self.kernel_s, self.delay, self.strict_pinned = copy_s, kernel_s, delay, strict_pinned
        self.default = FakeStream("default")
        self.streams = [self.default]
        self.known: dict = {}
        self.pending: list = []          # (vector, at, dst, src): copies whose bytes have not landed
        self.pinned: list[tuple[int, int]] = []
        self.regions = Regions()
        self.hazards: list[str] = []
        self.log: list[tuple[str, str, str]] = []
        self.lock = threading.RLock()
        self._local = threading.local()
        self.tensor_type = type("FakeDevTensor", (DevTensor,), {"fake": self})

    # --- memory ------------------------------------------------------------------------------
    def empty(self, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        """A stand-in device buffer (zeros, so an unordered read shows stale bytes)."""
        return torch.zeros(shape, dtype=dtype).as_subclass(self.tensor_type)

    def pin(self, host: torch.Tensor) -> torch.Tensor:
        """``host`` itself, remembered as page-locked."""
        self.pinned.append(span(host))
        return host

    def copy_async(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """Enqueue ``dst <- src`` on the current stream; the bytes land when it completes."""
        if self.strict_pinned and not isinstance(src, DevTensor) and not self._is_pinned(src):
            self._fail("non_blocking copy from pageable host memory (synchronous on CUDA: no overlap)")
        seconds = self.delay(dst, src) if self.delay is not None else self.copy_s
        with self.lock:
            reads = [src] if isinstance(src, DevTensor) else []
            stream, seq, at = self._enqueue("copy", reads, [dst], seconds)
            self.pending.append((stream, seq, at, plain(dst), plain(src)))

    def _is_pinned(self, t: torch.Tensor) -> bool:
        lo, hi = span(t)
        return any(a <= lo and hi <= b for a, b in self.pinned)

    # --- kernels (reported by DevTensor) ---------------------------------------------------------
    def kernel(self, name: str, reads: list, writes: list) -> None:
        """A torch operation on stand-in buffers: a kernel on the current stream."""
        with self.lock:
            self._enqueue(name, reads, writes, self.kernel_s, run_now=True)

    def _enqueue(self, what: str, reads: list, writes: list, seconds: float, run_now: bool = False):
        """One operation on the current stream, checked; a kernel runs now (on the CPU), after the
        bytes of every copy it is ordered after have landed."""
        stream, now = self.current_stream(), time.perf_counter()
        stream.seq += 1
        vector = _merge(_merge(stream.deps, self.known), {stream: stream.seq})
        if run_now:
            self._land(vector)
        for t in reads:
            self._check(span(t), stream, vector, any(t is w for w in writes), what)
        for t in writes:
            self._check(span(t), stream, vector, True, what)
        stream.end_at = max(now, stream.end_at) + seconds
        self.log.append((what, stream.name, threading.current_thread().name))
        return stream, stream.seq, stream.end_at

    def _check(self, rng, stream, vector, write, what) -> None:
        try:
            self.regions.access(rng, stream, vector[stream], vector, write, what, self.known)
        except Hazard as exc:
            self._fail(str(exc))

    def _fail(self, message: str) -> None:
        self.hazards.append(message)
        raise Hazard(message)

    def _land(self, vector: dict | None = None) -> None:
        """Write the bytes of every pending copy that completed, is known complete, or is ordered
        before ``vector`` (in enqueue order)."""
        now, keep = time.perf_counter(), []
        for entry in self.pending:
            stream, seq, at, dst, src = entry
            done = at <= now or self.known.get(stream, 0) >= seq or (vector or {}).get(stream, 0) >= seq
            if done:
                with torch._C.DisableTorchFunctionSubclass():
                    dst.copy_(src)
            else:
                keep.append(entry)
        self.pending = keep

    # --- streams and events --------------------------------------------------------------------
    def new_stream(self) -> FakeStream:
        """A new stream."""
        with self.lock:
            self.streams.append(FakeStream(f"s{len(self.streams)}"))
            return self.streams[-1]

    def current_stream(self) -> FakeStream:
        """The calling thread's current stream."""
        return getattr(self._local, "stream", None) or self.default

    @contextlib.contextmanager
    def use_stream(self, stream: FakeStream):
        """Make ``stream`` the calling thread's current stream."""
        old = getattr(self._local, "stream", None)
        self._local.stream = stream
        try:
            yield stream
        finally:
            self._local.stream = old

    def bind_thread(self) -> None:
        """Nothing to bind on the CPU."""

    def new_event(self) -> FakeEvent:
        """A new, unrecorded event."""
        return FakeEvent()

    def record(self, event: FakeEvent, stream: FakeStream) -> None:
        """Record ``event`` at the end of ``stream`` (re-recording before completion is a hazard)."""
        with self.lock:
            if event.vector is not None and self.known.get(event.stream, 0) < event.vector[event.stream]:
                self._fail(f"event re-recorded on stream {stream.name} before its previous record on stream "
                           f"{event.stream.name} (#{event.vector[event.stream]}) was seen complete")
            event.vector = _merge(stream.deps, {stream: stream.seq})
            event.at, event.stream = stream.end_at, stream

    def wait_event(self, stream: FakeStream, event: FakeEvent) -> None:
        """Order ``stream``'s later work after ``event`` (no-op for an unrecorded event, as CUDA)."""
        with self.lock:
            if event.vector is not None:
                stream.deps = _merge(stream.deps, event.vector)
                stream.end_at = max(stream.end_at, event.at)

    def query(self, event: FakeEvent) -> bool:
        """Whether ``event`` completed on the clock (then the host knows it)."""
        with self.lock:
            if event.vector is None:
                return True
            if event.at > time.perf_counter():
                return False
            self._learn(event.vector)
            return True

    def event_sync(self, event: FakeEvent) -> None:
        """Sleep until ``event`` completed."""
        if event.vector is not None:
            self._sleep_until(event.at, event.vector)

    def stream_sync(self, stream: FakeStream) -> None:
        """Sleep until everything queued on ``stream`` completed."""
        with self.lock:
            vector, at = _merge(stream.deps, {stream: stream.seq}), stream.end_at
        self._sleep_until(at, vector)

    def device_sync(self) -> None:
        """Sleep until every stream is done."""
        for stream in list(self.streams):
            self.stream_sync(stream)

    def _sleep_until(self, at: float, vector: dict) -> None:
        wait = at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        with self.lock:
            self._learn(vector)

    def _learn(self, vector: dict) -> None:
        self.known = _merge(self.known, vector)
        self._land()
