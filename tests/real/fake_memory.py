"""Device memory of the CPU stand-in for CUDA: buffers whose every access is checked for ordering.

A buffer made by :meth:`tests.real.fake_cuda.FakeCuda.empty` is a CPU tensor of a per-stand-in
subclass of :class:`DevTensor`; views (``pool.gate_up[i]``) keep the subclass, and every other torch
operation that takes one (``F.linear`` in the expert math, ``copy_``...) is reported to the
stand-in as a kernel on the calling thread's current stream that reads it (or writes it, for
in-place operations). :class:`Regions` keeps, per byte range, the last write and the reads since,
each as ``(stream, sequence number)``, and raises :class:`Hazard` when a new access is not ordered
after a conflicting one (read after an unordered write, write after an unordered read or write)
or reads a buffer nothing was written into,
the checks a race detector such as compute-sanitizer's racecheck makes, on stream order.
"""
from __future__ import annotations

import torch

# operations that only look at metadata or make a view: not a kernel, no access
_VIEWS = {"__getitem__", "select", "view", "narrow", "as_strided", "unbind", "split", "chunk"}
_META = {"__get__", "size", "dim", "numel", "element_size", "data_ptr", "stride", "storage_offset",
         "is_contiguous", "untyped_storage", "__len__", "is_pinned", "__hash__", "__eq__"} | _VIEWS


class Hazard(AssertionError):
    """A stream-ordering bug caught by the stand-in (the real GPU would compute garbage, or race)."""


class DevTensor(torch.Tensor):
    """A stand-in device tensor (CPU memory). ``fake`` is set on the per-stand-in subclass."""

    fake = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in _META:
            reads, writes = _accessed(name, args, kwargs)
            cls.fake.kernel(name, reads, writes)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
            if name in _VIEWS:
                out = _rewrap(out, cls)
        return out


def _rewrap(out, cls):
    if isinstance(out, torch.Tensor):
        return out.as_subclass(cls)
    if isinstance(out, (tuple, list)):
        return type(out)(_rewrap(o, cls) for o in out)
    return out


def _flat(items):
    for a in items:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        elif isinstance(a, DevTensor):
            yield a


def _accessed(name: str, args, kwargs) -> tuple[list, list]:
    """The stand-in tensors an operation reads and writes (in-place ops and ``out=`` write)."""
    tensors = list(_flat(list(args) + list(kwargs.values())))
    inplace = name.endswith("_") and not name.startswith("__") or name.startswith("__i")
    writes = []
    if inplace and args and isinstance(args[0], DevTensor):
        writes.append(args[0])
    if isinstance(kwargs.get("out"), DevTensor):
        writes.append(kwargs["out"])
    reads = [t for t in tensors if all(t is not w for w in writes)]
    return reads, writes


def span(t: torch.Tensor) -> tuple[int, int]:
    """``(first byte, end byte)`` of a (contiguous) tensor's memory."""
    with torch._C.DisableTorchFunctionSubclass():
        start = t.data_ptr()
        return start, start + t.numel() * t.element_size()


def plain(t: torch.Tensor) -> torch.Tensor:
    """The same memory as a plain tensor (no access checks)."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.as_subclass(torch.Tensor)


class Regions:
    """Per byte range: the last write ``(stream, seq, what)`` and the reads ``(stream, seq)`` since."""

    def __init__(self):
        self.state: dict[tuple[int, int], dict] = {}

    def _overlapping(self, lo: int, hi: int):
        return [s for (a, b), s in self.state.items() if a < hi and lo < b]

    def access(self, rng: tuple[int, int], stream, seq: int, vector: dict, write: bool, what: str,
               known: dict) -> None:
        """Check one access by an op ``(stream, seq)`` ordered after ``vector``, then record it.
        ``known`` is what the host has seen complete (:class:`Hazard` on a conflict)."""
        found = self._overlapping(*rng)
        if not write and not any(s["write"] for s in found):
            raise Hazard(f"{what} on stream {stream.name}: reads a buffer nothing was written into")
        for s in found:
            w = s["write"]
            if w is not None and w[0] is not stream and vector.get(w[0], 0) < w[1]:
                kind = "overwritten" if write else "read"
                raise Hazard(f"{what} on stream {stream.name}: {kind} before the {w[2]} into it on stream "
                             f"{w[0].name} (#{w[1]}) is ordered before it (no wait_event or synchronize)")
            if write and w is not None and known.get(w[0], 0) < w[1]:
                raise Hazard(f"{what} on stream {stream.name}: the buffer is overwritten while the {w[2]} "
                             f"into it on stream {w[0].name} (#{w[1]}) is still in flight")
            for rs, rseq in (s["reads"] if write else ()):
                if rs is not stream and vector.get(rs, 0) < rseq:
                    raise Hazard(f"{what} on stream {stream.name}: the buffer is overwritten while a "
                                 f"kernel on stream {rs.name} (#{rseq}) that reads it may still run")
        st = self.state.setdefault(rng, {"write": None, "reads": []})
        if write:
            for s in self._overlapping(*rng):
                s["write"], s["reads"] = (stream, seq, what), []
        else:
            st["reads"] = [(rs, q) for rs, q in st["reads"] if known.get(rs, 0) < q] + [(stream, seq)]
