"""Decode steps drawn from an :class:`traces.acceptance.AcceptanceModel`, fixed or per-step gamma.

:func:`model_schedule` is :func:`traces.windows.build_schedule` with the positional, bursty,
early-stopping acceptance model instead of i.i.d. trials (a captured SD record, when the trace has
one with the same gamma, still wins). :class:`OnlineSchedule` builds each step only when the
executor starts it, with the number of drafts the policy chose for it (``choose_gamma``), so a
policy can speculate more or less from step to step; the windows are built as in
:mod:`traces.windows` (accepted prefix exact, rejected tail from alt rows).
"""
from __future__ import annotations

import numpy as np

from traces.acceptance import AcceptanceModel
from traces.schema import Trace
from traces.windows import Schedule, _counts, _from_sd_record, window_rows


def model_schedule(trace: Trace, gamma: int, gen_tokens: int, model: AcceptanceModel,
                   seed: int = 0) -> Schedule:
    """Fixed-``gamma`` steps with accepted counts (and early stops) drawn from ``model``."""
    if gamma > 0 and trace.sd is not None and trace.sd.gamma == gamma:
        return _from_sd_record(trace, min(gen_tokens, trace.n_tokens))
    online = OnlineSchedule(trace, gen_tokens, model, seed, gamma)
    s = 0
    while not online.done:
        online.build(s, gamma)
        s += 1
    return online.freeze()


class OnlineSchedule:
    """Steps built one at a time (``begin_step``); the same attributes as a :class:`Schedule`.

    ``gamma`` is the largest gamma a step may use (the policy's context); ``gammas[s]`` the one
    step ``s`` used, ``decodes[s]`` its draft forwards (fewer than ``gammas[s]`` after an early
    stop). Arrays are allocated for the worst case (one token per step) and filled as steps run.
    """

    online = True

    def __init__(self, trace: Trace, gen_tokens: int, model: AcceptanceModel, seed: int, gamma_max: int):
        self.ex, self.alt = trace.experts, trace.alt_experts
        self.L, self.E = trace.n_layers, trace.n_experts
        self.gen = min(gen_tokens, trace.n_tokens)
        self.model, self.gamma = model, int(gamma_max)
        self.rng = np.random.default_rng(seed)
        self.easy = model.new_state(self.rng)
        n = max(1, self.gen)
        self.counts = np.zeros((n, self.L, self.E), dtype=np.uint8)
        self.n_verify = np.zeros(n, dtype=np.int64)
        self.produced = np.zeros(n, dtype=np.int64)
        self.gammas = np.zeros(n, dtype=np.int64)
        self.decodes = np.zeros(n, dtype=np.int64)
        self.accepted = np.zeros(n, dtype=np.int64)
        self.rows: list = []
        self.t = 0

    @property
    def done(self) -> bool:
        return self.t >= self.gen

    @property
    def n_steps(self) -> int:
        """Steps built so far (all of them once :attr:`done`)."""
        return len(self.rows)

    @property
    def mean_accepted(self) -> float:
        n = self.n_steps
        return float(np.mean(self.produced[:n] - 1)) if n and self.gammas[:n].any() else 0.0

    def has_step(self, step: int) -> bool:
        """True while tokens remain to be generated (``step`` is the next to build) or built."""
        return step < self.n_steps or not self.done

    def begin_step(self, step: int, chosen: int | None = None) -> None:
        """Build ``step`` with ``chosen`` drafts (the policy's choice; None: :attr:`gamma`)."""
        g = self.gamma if chosen is None else int(chosen)
        if not 0 <= g <= self.gamma:
            raise ValueError(f"gamma {g} at step {step}; allowed 0..{self.gamma}")
        self.build(step, g)

    def build(self, step: int, gamma: int) -> None:
        """Draw step ``step``'s outcome at ``gamma`` drafts and fill its rows and counts."""
        if step != len(self.rows) or self.done:
            raise ValueError(f"step {step} cannot be built now ({len(self.rows)} built, done={self.done})")
        d = self.model.draw(self.rng, gamma, self.easy)
        self.easy = self.model.next_state(self.rng, self.easy)
        rows = window_rows(self.ex, self.alt, self.t, d.proposed, d.accepted)
        produced = min(d.accepted + 1, self.gen - self.t, rows.shape[0])
        self.rows.append(rows)
        self.counts[step] = _counts([rows], self.L, self.E)[0]
        self.n_verify[step], self.produced[step] = rows.shape[0], produced
        self.gammas[step], self.decodes[step], self.accepted[step] = gamma, d.decodes, produced - 1
        self.t += produced

    def draft_decodes(self, step: int) -> int:
        return int(self.decodes[step])

    def freeze(self) -> Schedule:
        """The steps built so far as a plain :class:`Schedule` (e.g. for an oracle's future)."""
        n = self.n_steps
        return Schedule(self.counts[:n].copy(), self.n_verify[:n].copy(), self.produced[:n].copy(),
                        list(self.rows), self.gamma, decodes=self.decodes[:n].copy())
