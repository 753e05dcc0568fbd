"""Concurrent requests decoded together: B independent requests' steps merged into one schedule.

Each request has its own trace (the synthetic generator with seed ``seed + i``) and its own decode
steps (:func:`traces.windows.build_schedule`: a speculative policy verifies each request's own
window, with that request's accepted prefix). Step ``s`` of the batch runs step ``s`` of every
request that is still generating: per layer the union of their experts, per expert the sum of
their tokens (one MUL_MAT_ID over the batch: "for batch size = N ... N * N_active different
experts activated", reference/user-needs.md need 11). Verified positions and produced tokens add
up; a request leaves the batch after its last step (its slot idles). A simple arrival process:
request ``i`` joins at step ``i * stagger`` (``stagger = 0``: all start together), so a batch of
2-8 requests fills and drains as in continuous batching with a fixed arrival interval counted in
decode steps (prompts are not simulated here: a request joins with its prompt already cached).
A batch of one is the request's schedule itself, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.windows import Schedule


@dataclass
class BatchSchedule:
    """The merged :class:`Schedule` and, per request, its produced tokens and its last step."""

    schedule: Schedule
    tokens: np.ndarray       # int [B]
    last_step: np.ndarray    # int [B]
    first_step: np.ndarray | None = None   # int [B] (None: all 0)

    def request_tps(self, step_s: list) -> np.ndarray:
        """Per request tok/s: its tokens over the time from its first step's start to its last
        step's end (decode only)."""
        ends = np.cumsum(np.asarray(step_s, dtype=float))
        first = np.zeros_like(self.last_step) if self.first_step is None else self.first_step
        starts = np.concatenate([[0.0], ends])[first]
        return self.tokens / (ends[self.last_step] - starts)


def merge_schedules(scheds: list[Schedule], stagger: int = 0) -> BatchSchedule:
    """The batch of ``scheds`` (same model and gamma) decoded in lockstep, request ``i`` from step
    ``i * stagger`` (see the module docstring)."""
    if len(scheds) == 1:
        s = scheds[0]
        return BatchSchedule(s, np.array([int(s.produced.sum())]), np.array([s.n_steps - 1]))
    first = np.arange(len(scheds)) * int(stagger)
    S = max(int(f) + s.n_steps for f, s in zip(first, scheds))
    top = sum(int(s.counts.max(initial=0)) for s in scheds)
    dtype = np.uint8 if top <= np.iinfo(np.uint8).max else np.uint16
    counts = np.zeros((S,) + scheds[0].counts.shape[1:], dtype=dtype)
    n_verify, produced = np.zeros(S, dtype=np.int64), np.zeros(S, dtype=np.int64)
    rows: list = [[] for _ in range(S)]
    for f, s in zip(first.tolist(), scheds):
        n = s.n_steps
        counts[f:f + n] += s.counts
        n_verify[f:f + n] += s.n_verify
        produced[f:f + n] += s.produced
        for i in range(n):
            rows[f + i].append(s.rows[i])
    idle = [i for i, r in enumerate(rows) if not r]
    if idle:
        from sim.run.user_input import UserInputError
        raise UserInputError(f"stagger={stagger}: no request is decoding at step {idle[0]} (the batch drained "
                             "before the next arrival); use a smaller stagger or more gen_tokens")
    merged = Schedule(counts, n_verify, produced, [np.concatenate(r, axis=0) for r in rows], scheds[0].gamma)
    return BatchSchedule(merged, np.array([int(s.produced.sum()) for s in scheds]),
                         first + np.array([s.n_steps - 1 for s in scheds]), first)
