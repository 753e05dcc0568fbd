"""Decode steps from a trace: per step, how many verified tokens chose each expert at each layer.

Autoregressive decoding (``gamma = 0``): one step per token, counts are 0/1.

Speculative decoding: each step verifies ``gamma + 1`` positions (the last committed token plus
``gamma`` drafts) and yields ``accepted + 1`` tokens. If the trace carries an SD record captured
with the same gamma, its windows are used as recorded. Otherwise windows are built from token
routing and an acceptance model: the number of accepted drafts is the count of leading successes
of independent Bernoulli(``acceptance``) trials, capped at gamma. Under greedy SD the accepted
prefix's routing equals the routing of those tokens, so those rows are exact. A rejected draft is a
different token after the same prefix: where the trace carries ``alt_experts`` (synthetic traces
do: an alternative token drawn from the same routing process at that position), its rows are used;
otherwise the routing of the next real tokens stands in for it, which overstates the overlap
between a window's rejected tail and the next window (the next window verifies those real tokens).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.schema import Trace


@dataclass
class Schedule:
    """The decode steps of one run: ``counts[s, l, e]``, positions verified and tokens produced."""

    counts: np.ndarray     # uint8 [S, L, E]
    n_verify: np.ndarray   # int [S]
    produced: np.ndarray   # int [S]  (accepted + 1; the last step is cut to reach gen_tokens)
    rows: list             # per step, the routing rows verified: int16 [n, L, k]
    gamma: int
    decodes: np.ndarray | None = None  # int [S] draft decodes per step (None: gamma each)
    online = False                     # all steps are known before the run (OnlineSchedule: not)

    @property
    def n_steps(self) -> int:
        return int(self.counts.shape[0])

    def has_step(self, step: int) -> bool:
        """True while ``step`` is part of the schedule."""
        return step < self.n_steps

    def begin_step(self, step: int, chosen: int | None = None) -> None:
        """``step`` starts with ``chosen`` drafts (a policy's choice; None: the run's gamma). The
        steps are fixed here (:class:`traces.online.OnlineSchedule` builds them with the choice):
        replaying a recorded run, the choice must be what the record holds (a policy's decisions
        depend only on what it was told, so a faithful replay repeats them)."""
        if chosen is None:
            return
        recorded = self.gamma if self.decodes is None else int(self.decodes[step])
        if int(chosen) != recorded:
            raise ValueError(f"replay: policy chose gamma {chosen} at step {step}, the record has {recorded}")

    def draft_decodes(self, step: int) -> int:
        """Draft forwards of ``step`` (``gamma``, or fewer when the drafter stopped early)."""
        return self.gamma if self.decodes is None else int(self.decodes[step])

    @property
    def mean_accepted(self) -> float:
        return float(np.mean(self.produced - 1)) if self.gamma else 0.0


def _sample_accepted(rng: np.random.Generator, n: int, gamma: int, acceptance: float) -> np.ndarray:
    """Leading successes of Bernoulli(acceptance) trials, capped at gamma (truncated geometric)."""
    if gamma == 0:
        return np.zeros(n, dtype=np.int64)
    trials = rng.random((n, gamma)) < acceptance
    return np.cumprod(trials, axis=1).sum(axis=1)


def _counts(rows: list, n_layers: int, n_experts: int) -> np.ndarray:
    """Per step counts[l, e] of the given routing rows, vectorised over all steps."""
    sizes = np.array([r.shape[0] for r in rows])
    allrows = np.concatenate(rows, axis=0)  # [sum n, L, k]
    step = np.repeat(np.arange(len(rows)), sizes)
    layer = np.arange(n_layers)[None, :, None]
    idx = (step[:, None, None] * n_layers + layer) * n_experts + allrows.astype(np.int64)
    flat = np.bincount(idx.ravel(), minlength=len(rows) * n_layers * n_experts)
    return flat.reshape(len(rows), n_layers, n_experts).astype(np.uint8)


def build_schedule(trace: Trace, gamma: int, gen_tokens: int, acceptance: float = 0.7,
                   seed: int = 0) -> Schedule:
    """The decode steps that produce ``gen_tokens`` tokens from ``trace`` (see module docstring)."""
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    if not 0.0 <= acceptance <= 1.0:
        raise ValueError(f"acceptance must lie in 0..1, got {acceptance}")
    ex, alt = trace.experts, trace.alt_experts
    gen_tokens = min(gen_tokens, ex.shape[0])
    if gamma > 0 and trace.sd is not None and trace.sd.gamma == gamma:
        return _from_sd_record(trace, gen_tokens)
    rng = np.random.default_rng(seed)
    accepted = _sample_accepted(rng, gen_tokens, gamma, acceptance)
    rows, produced, t = [], [], 0
    while t < gen_tokens:
        a = int(accepted[len(rows)])
        rows.append(window_rows(ex, alt, t, gamma, a))
        step = min(a + 1, gen_tokens - t, rows[-1].shape[0])
        produced.append(step)
        t += step
    return Schedule(_counts(rows, trace.n_layers, trace.n_experts),
                    np.array([r.shape[0] for r in rows]), np.array(produced), rows, gamma)


def window_rows(ex: np.ndarray, alt: np.ndarray | None, t: int, proposed: int, accepted: int) -> np.ndarray:
    """Routing rows of the window verified at position ``t``: the committed token and ``accepted``
    drafts from the real routing, then the rejected drafts (alt rows when the trace has them)."""
    end = min(t + proposed + 1, ex.shape[0])
    if alt is None or t + accepted + 1 >= end:
        return ex[t:end]
    return np.concatenate([ex[t:t + accepted + 1], alt[t + accepted + 1:end]])


def _from_sd_record(trace: Trace, gen_tokens: int) -> Schedule:
    sd = trace.sd
    rows, produced, done = [], [], 0
    for s in range(sd.experts.shape[0]):
        if done >= gen_tokens:
            break
        n = int(sd.n_verified[s])
        rows.append(sd.experts[s, :n])
        step = min(int(sd.accepted[s]) + 1, gen_tokens - done)
        produced.append(step)
        done += step
    n_verify = np.array([r.shape[0] for r in rows])
    varying = bool((sd.n_verified[:len(rows)] != sd.gamma + 1).any())   # a per-step gamma was recorded
    return Schedule(_counts(rows, trace.n_layers, trace.n_experts), n_verify, np.array(produced), rows,
                    sd.gamma, decodes=n_verify - 1 if varying else None)
