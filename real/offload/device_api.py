"""The device seam: the few asynchronous-device operations the live executor uses, in one object.

The executor's asynchronous path (a copy stream, events, pinned host buffers, non-blocking copies,
slot reuse guarded by the last reader's event) calls only this object. :class:`CudaApi` is the real
implementation on ``torch.cuda``; ``tests/real/fake_cuda.py`` implements the same methods on CPU
tensors (per-stream FIFOs, copies that land later, hazard checks), so the same executor code runs
in the tests without a GPU. A plain CPU run has no device API (``None``): copies are synchronous
host memcpys and no stream or event exists.

Semantics the executor relies on (CUDA's): work on one stream runs in enqueue order;
``wait_event(stream, event)`` orders later work of ``stream`` after the event's recorded point;
``event_sync`` / ``stream_sync`` block the host until that point completed, after which any work
launched by any thread is ordered after it; ``copy_async`` from pinned memory returns before the
copy ran.
"""
from __future__ import annotations

import torch


class CudaApi:
    """:mod:`torch.cuda` on ``device`` (a ``cuda:N`` device)."""

    def __init__(self, device: torch.device):
        self.device = device

    # --- memory ------------------------------------------------------------------------------
    def empty(self, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised device buffer."""
        return torch.empty(shape, dtype=dtype, device=self.device)

    def pin(self, host: torch.Tensor) -> torch.Tensor:
        """A page-locked copy of the host tensor ``host`` (asynchronous copies need one)."""
        return host.pin_memory()

    def copy_async(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """``dst <- src`` enqueued on the calling thread's current stream (returns at once)."""
        dst.copy_(src, non_blocking=True)

    # --- streams and events --------------------------------------------------------------------
    def new_stream(self):
        """A new stream (the copy engine's)."""
        return torch.cuda.Stream(device=self.device)

    def current_stream(self):
        """The calling thread's current stream (the compute stream on the decoding thread)."""
        return torch.cuda.current_stream(self.device)

    def use_stream(self, stream):
        """Context manager: make ``stream`` the calling thread's current stream."""
        return torch.cuda.stream(stream)

    def bind_thread(self) -> None:
        """Make ``device`` the current device of the calling (worker) thread."""
        torch.cuda.set_device(self.device)

    def new_event(self):
        """A new, unrecorded event."""
        return torch.cuda.Event()

    def record(self, event, stream) -> None:
        """Record ``event`` at the current end of ``stream``."""
        event.record(stream)

    def wait_event(self, stream, event) -> None:
        """Order ``stream``'s later work after ``event``'s recorded point (the host does not block)."""
        stream.wait_event(event)

    def query(self, event) -> bool:
        """Whether the work before ``event``'s recorded point completed."""
        return event.query()

    def event_sync(self, event) -> None:
        """Block the host until ``event``'s recorded point completed."""
        event.synchronize()

    def stream_sync(self, stream) -> None:
        """Block the host until all work queued on ``stream`` completed."""
        stream.synchronize()

    def device_sync(self) -> None:
        """Block the host until all work on the device completed."""
        torch.cuda.synchronize(self.device)


def device_api(device: torch.device) -> CudaApi | None:
    """The device API for ``device``: :class:`CudaApi` for a CUDA device, None for the CPU."""
    return CudaApi(device) if torch.device(device).type == "cuda" else None
