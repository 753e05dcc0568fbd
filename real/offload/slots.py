"""The device expert slots: a fixed pool of buffers, which (layer, expert) each holds, and when
its last reader finishes.

The :class:`sim.protocol.expert_cache.ExpertCache` counts slots; this pool owns the physical buffers
behind them: ``gate_up [n_slots, 2I, H]`` and ``down [n_slots, H, I]`` on the compute device,
plus a few staging buffers for experts computed on the device straight from host weights
(``STREAM``), which use no cache slot. With a device API (:mod:`real.offload.device_api`), the
buffers are the API's and every buffer remembers the event recorded after the last kernel that
read it; a copy into the buffer waits for that event on the copy stream, so a slot is never
overwritten while a queued kernel still reads it.
"""
from __future__ import annotations

import torch


class SlotPool:
    """``n_slots`` expert buffers on ``device`` plus on-demand staging buffers (allocated by the
    device API ``api`` when there is one)."""

    def __init__(self, n_slots: int, shapes: tuple[tuple[int, ...], tuple[int, ...]],
                 dtype: torch.dtype, device: torch.device, api=None):
        self.device, self.dtype, self.shapes, self.api = device, dtype, shapes, api
        self.n_slots = n_slots
        self.gate_up = self._empty((n_slots, *shapes[0]))
        self.down = self._empty((n_slots, *shapes[1]))
        self._stage: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._stage_free: list[int] = []
        self.last_use: dict[tuple[str, int], object] = {}
        self.clear()

    def _empty(self, shape: tuple) -> torch.Tensor:
        if self.api is not None:
            return self.api.empty(shape, self.dtype)
        return torch.empty(shape, dtype=self.dtype, device=self.device)

    def clear(self) -> None:
        """Forget every assignment (a new prompt starts with an empty cache)."""
        self.free = list(range(self.n_slots - 1, -1, -1))
        self.owner: dict[tuple[int, int], int] = {}

    # --- cache slots -----------------------------------------------------------------------
    def take(self, key: tuple[int, int]) -> int:
        """Assign a free slot to ``key = (layer, expert)``; returns the slot index."""
        if key in self.owner:
            raise RuntimeError(f"expert {key} already owns slot {self.owner[key]}")
        slot = self.free.pop()
        self.owner[key] = slot
        return slot

    def release(self, key: tuple[int, int]) -> None:
        """Give ``key``'s slot back to the free list."""
        self.free.append(self.owner.pop(key))

    def slot(self, key: tuple[int, int]) -> int:
        """The slot ``key`` owns."""
        return self.owner[key]

    def buffers(self, where: tuple[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(gate_up, down)`` of a slot ``("slot", i)`` or a staging buffer ``("stage", i)``."""
        kind, i = where
        if kind == "slot":
            return self.gate_up[i], self.down[i]
        return self._stage[i]

    # --- staging buffers (STREAM) --------------------------------------------------------------
    def acquire_stage(self) -> int:
        """A free staging buffer (allocated on first need, reused afterwards)."""
        if not self._stage_free:
            self._stage.append((self._empty(self.shapes[0]), self._empty(self.shapes[1])))
            return len(self._stage) - 1
        return self._stage_free.pop()

    def release_stage(self, i: int) -> None:
        """Give staging buffer ``i`` back."""
        self._stage_free.append(i)

    # --- ordering against queued kernels (device API) ----------------------------------------
    def mark_used(self, places: list[tuple[str, int]]) -> None:
        """Record, after the kernels that read ``places`` were queued, the event a copy must wait for."""
        api = self.api
        if api is None or not places:
            return
        event = api.new_event()
        api.record(event, api.current_stream())
        for p in places:
            self.last_use[p] = event

    def guard(self, where: tuple[str, int]):
        """The event a copy into ``where`` must wait for (None when nothing is pending)."""
        return self.last_use.get(where)
