"""The trace contract: token routing plus an optional speculative-decoding record.

A trace holds, for every generated token position ``t`` and MoE layer ``l``, the target model's
top-k expert ids ``experts[t, l, :]`` (int16, shape ``[T, L, k]``), optionally the gate weights,
optionally the routing of a plausible *rejected draft* at each position ``alt_experts[t, l, :]`` (a
different token after the same prefix; synthetic traces carry it so speculative verify windows
need not reuse real tokens for rejected drafts), optionally a next-layer prediction signal ``next_pred[t, l, :]`` (the experts that layer ``l+1``'s
gate picks from layer ``l``'s hidden state; row ``L-1`` is unused), and optionally an SD record
of what a speculative decoder verified at each step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traces.errors import TraceError

SCHEMA_VERSION = 1
SOURCES = ("captured", "synthetic", "imported")
REQUIRED_META = ("schema_version", "model", "n_layers", "n_experts", "top_k", "source")


@dataclass
class SDRecord:
    """What a speculative decoder verified: ``S`` steps of ``gamma + 1`` positions each.

    ``experts[s, j, l, :]`` is the routing of verified position ``j`` of step ``s`` (rejected drafts
    included; positions past ``n_verified[s]`` are -1), ``accepted[s]`` the number of drafted tokens
    accepted (0..gamma; each step also yields one bonus token from the target).
    """

    gamma: int
    experts: np.ndarray  # int16 [S, gamma+1, L, k]
    accepted: np.ndarray  # int16 [S]
    n_verified: np.ndarray  # int16 [S]  (= gamma+1 unless generation stopped early)


@dataclass
class Trace:
    """One workload trace: routing of generated tokens, metadata, and optional extras."""

    meta: dict[str, Any]
    experts: np.ndarray  # int16 [T, L, k]
    weights: np.ndarray | None = None  # float32 [T, L, k]
    next_pred: np.ndarray | None = None  # int16 [T, L, k]
    alt_experts: np.ndarray | None = None  # int16 [T, L, k]
    sd: SDRecord | None = None
    prefill: np.ndarray | None = None  # int16 [P, L, k]
    path: str | None = field(default=None, compare=False)

    @property
    def n_tokens(self) -> int:
        return int(self.experts.shape[0])

    @property
    def n_layers(self) -> int:
        return int(self.meta["n_layers"])

    @property
    def n_experts(self) -> int:
        return int(self.meta["n_experts"])

    @property
    def top_k(self) -> int:
        return int(self.meta["top_k"])

    def validate(self) -> "Trace":
        """Check metadata, shapes, dtypes and id ranges; raise :class:`TraceError` naming the field."""
        p, m = self.path, self.meta
        for key in REQUIRED_META:
            if key not in m:
                raise TraceError(p, f"meta.{key}", f"missing metadata (required: {', '.join(REQUIRED_META)})")
        if m["schema_version"] != SCHEMA_VERSION:
            raise TraceError(p, "meta.schema_version",
                             f"unknown schema version {m['schema_version']!r} (this tool reads {SCHEMA_VERSION})")
        if m["source"] not in SOURCES:
            raise TraceError(p, "meta.source", f"{m['source']!r} is not one of {SOURCES}")
        for key in ("n_layers", "n_experts", "top_k"):
            if not isinstance(m[key], (int, np.integer)) or m[key] < 1:
                raise TraceError(p, f"meta.{key}", f"must be a positive integer, got {m[key]!r}")
        if m["top_k"] > m["n_experts"]:
            raise TraceError(p, "meta.top_k", f"top_k {m['top_k']} exceeds n_experts {m['n_experts']}")
        shape = (self.n_layers, self.top_k)
        _check_ids(p, "experts", self.experts, shape, self.n_experts, allow_missing=False, min_rows=1)
        if self.weights is not None:
            if self.weights.shape != self.experts.shape:
                raise TraceError(p, "weights", f"shape {self.weights.shape} != experts shape {self.experts.shape}")
            if not np.all(np.isfinite(self.weights)):
                raise TraceError(p, "weights", "contains NaN or infinite values")
        for name, allow_missing in (("next_pred", True), ("alt_experts", False)):
            arr = getattr(self, name)
            if arr is None:
                continue
            _check_ids(p, name, arr, shape, self.n_experts, allow_missing=allow_missing)
            if arr.shape[0] != self.n_tokens:
                raise TraceError(p, name, f"{arr.shape[0]} rows, expected {self.n_tokens}")
        if self.prefill is not None:
            _check_ids(p, "prefill", self.prefill, shape, self.n_experts, allow_missing=False)
        if self.sd is not None:
            self._validate_sd()
        return self

    def _validate_sd(self) -> None:
        p, sd = self.path, self.sd
        if not 1 <= sd.gamma <= 64:
            raise TraceError(p, "sd.gamma", f"gamma {sd.gamma} outside 1..64")
        s = sd.experts.shape[0]
        want = (sd.gamma + 1, self.n_layers, self.top_k)
        if sd.experts.ndim != 4 or sd.experts.shape[1:] != want:
            raise TraceError(p, "sd.experts", f"shape {sd.experts.shape}, expected [S, {', '.join(map(str, want))}]")
        _check_ids(p, "sd.experts", sd.experts.reshape(-1, self.n_layers, self.top_k), want[1:],
                   self.n_experts, allow_missing=True)
        for name, arr in (("sd.accepted", sd.accepted), ("sd.n_verified", sd.n_verified)):
            if arr.shape != (s,):
                raise TraceError(p, name, f"shape {arr.shape}, expected ({s},)")
        if np.any(sd.n_verified < 1) or np.any(sd.n_verified > sd.gamma + 1):
            raise TraceError(p, "sd.n_verified", f"values must lie in 1..{sd.gamma + 1}")
        if np.any(sd.accepted < 0) or np.any(sd.accepted >= sd.n_verified):
            raise TraceError(p, "sd.accepted", "values must lie in 0..n_verified-1")


def _check_ids(path, name: str, arr: np.ndarray, shape: tuple, n_experts: int,
               allow_missing: bool, min_rows: int = 0) -> None:
    if not isinstance(arr, np.ndarray) or not np.issubdtype(arr.dtype, np.integer):
        raise TraceError(path, name, f"must be an integer array, got {getattr(arr, 'dtype', type(arr))}")
    if arr.ndim != 3 or arr.shape[1:] != shape:
        raise TraceError(path, name, f"shape {arr.shape}, expected [T, {shape[0]}, {shape[1]}] (tokens, layers, top_k)")
    if arr.shape[0] < min_rows:
        raise TraceError(path, name, f"has {arr.shape[0]} tokens, needs at least {min_rows}")
    if arr.size == 0:
        return
    lo = -1 if allow_missing else 0
    bad = (arr < lo) | (arr >= n_experts)
    if bad.any():
        t, l, j = np.argwhere(bad)[0]
        raise TraceError(path, name, f"expert id {int(arr[t, l, j])} out of range {lo}..{n_experts - 1} "
                                     f"(token {t}, layer {l}, slot {j})")
    if not allow_missing:
        srt = np.sort(arr, axis=-1)
        dup = (srt[..., 1:] == srt[..., :-1]).any(-1)
        if dup.any():
            t, l = np.argwhere(dup)[0]
            raise TraceError(path, name, f"repeated expert id in one top-k row (token {t}, layer {l}): "
                                         f"{arr[t, l].tolist()}")
