"""What the protocol core hands an executor: copies to move and a layer's work plan.

A :class:`SlotObserver` is told of slot changes (the real executor's buffers). A :class:`Copy` is one host->device copy (one expert, or several of one layer as a block). A
:class:`LayerPlan` says which requested experts run on the GPU from their slots now, which on the
CPU, and which wait for a copy (a new one to start, or one already in flight), in the order the
executor must start and await them. :func:`layer_end_delay` is the GPU's in-order recurrence over
those waits, shared by the SimPy engine and the fast evaluator.
"""
from __future__ import annotations

from dataclasses import dataclass, field

DEMAND, PREFETCH, STREAM_COPY = "demand", "prefetch", "stream"


@dataclass(frozen=True)
class Copy:
    """Host->device copy of ``experts`` of ``layer``: ``kind`` is DEMAND (a layer waits; one expert,
    or a block of several landing together), PREFETCH (one expert, link idle) or STREAM_COPY (one
    expert into a staging buffer for a STREAM placement; no cache slot)."""

    layer: int
    experts: tuple[int, ...]
    kind: str

    @property
    def key(self) -> tuple[int, int]:
        """``(layer, first expert)``."""
        return self.layer, self.experts[0]


@dataclass
class Wait:
    """The GPU waits for a copy, then computes ``experts`` (``gpu_s`` seconds by the cost table).

    ``copy`` is a new copy the executor starts now, or None: wait for the copy of ``key`` already
    in flight. ``experts`` may be empty (``extra_fetch``: moved, not computed)."""

    key: tuple[int, int] | None
    copy: Copy | None
    experts: tuple[int, ...]
    gpu_s: float


@dataclass
class LayerPlan:
    """One layer's placement applied: ``gpu`` (resident, computed from their slots now), ``cpu``,
    ``waits`` (in start order), and the cost table's GPU and CPU seconds of ``gpu`` and ``cpu``."""

    gpu: list = field(default_factory=list)
    cpu: list = field(default_factory=list)
    waits: list = field(default_factory=list)
    gpu_s: float = 0.0
    cpu_s: float = 0.0


class SlotObserver:
    """Told when a cache slot is taken or freed (the real executor's buffer pool); no-op here."""

    def taken(self, layer: int, expert: int) -> None:
        """A slot was reserved for (layer, expert)."""

    def released(self, layer: int, expert: int) -> None:
        """(layer, expert)'s slot was freed (evicted, or its copy failed)."""


def layer_end_delay(gpu_s: float, cpu_s: float, t1: float, land_at: list, wait_gpu: list,
                    sync_s: float) -> tuple[float, float, float]:
    """Seconds from ``t1`` (placement) to the layer's end, the GPU's end time and busy seconds.

    The GPU computes its resident experts, then each awaited expert in order once its copy has
    landed (``land_at``); the CPU runs ``cpu_s`` concurrently; a join of ``sync_s`` follows when
    the CPU took part (DESIGN.md section 4, the engine's layer model)."""
    sync = sync_s if cpu_s > 0 else 0.0
    if not land_at:
        return max(gpu_s, cpu_s) + sync, t1 + gpu_s, gpu_s
    gpu_end, busy = t1 + gpu_s, gpu_s
    for land, g in zip(land_at, wait_gpu):
        gpu_end = max(gpu_end, land) + g
        busy += g
    return max(gpu_end, t1 + cpu_s) - t1 + sync, gpu_end, busy
