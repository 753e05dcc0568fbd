"""How many drafted tokens the target accepts: positional decay, burstiness, confidence early stop.

A greedy verifier keeps the longest prefix of drafts equal to its own predictions. Draft ``i``
(1-based) of a step is accepted, given drafts ``1..i-1`` were, with the *conditional acceptance*
``a_i = alpha * decay ** (i - 1)``. Real drafters accept less deep into a draft (EAGLE-3 in
llama.cpp: per-position acceptance 0.805, 0.632, 0.483, i.e. conditional 0.805, 0.785, 0.764,
llama.cpp PR 24536; docs/sources.md), which :func:`fit_decay` turns into ``decay`` = 0.974.

Burstiness: acceptance comes in runs (formulaic spans accept fully, novel spans fail at once). A
two-state Markov chain over steps (easy / hard) moves the first-position acceptance to
``alpha +- spread * min(alpha, 1 - alpha)`` and keeps its state with probability
``(1 + burst) / 2``; ``burst = 0`` draws the state afresh each step, ``spread = 0`` is the plain
model. The chain's stationary mix is half and half, so the mean first-position acceptance stays
``alpha``. The default ``spread``/``burst`` are our assumption (no per-step acceptance sequence is
published for these pairs); :mod:`traces.windows` reads a captured SD record instead when given one.

Early stop (llama.cpp ``--draft-p-min``, default 0.9 in ``common/speculative.h``): the drafter stops
before a token whose top probability is below ``p_min``. We assume a *calibrated* drafter: draft
``i``'s confidence is ``c ~ Beta(kappa a_i, kappa (1 - a_i))`` and it is accepted with probability
``c``, so the mean acceptance is unchanged and low-confidence drafts, likelier to fail, are cut.
The cut draft was still computed (one decode) but is not verified.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# EAGLE-3 per-position (cumulative) acceptance in llama.cpp, PR 24536 (docs/sources.md)
EAGLE3_LLAMACPP_CUMULATIVE = (0.805, 0.632, 0.483)


@dataclass(frozen=True)
class StepDraw:
    """One step's outcome: drafts proposed (verified), accepted, and draft decodes spent."""

    proposed: int
    accepted: int
    decodes: int


@dataclass(frozen=True)
class AcceptanceModel:
    """Per-step accepted-draft counts (see the module docstring for every parameter)."""

    alpha: float
    decay: float = 1.0
    spread: float = 0.0
    burst: float = 0.0
    p_min: float = 0.0
    kappa: float = 4.0

    def __post_init__(self):
        for name, lo, hi in (("alpha", 0.0, 1.0), ("decay", 0.0, 1.0), ("spread", 0.0, 1.0),
                             ("burst", 0.0, 1.0), ("p_min", 0.0, 1.0)):
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise ValueError(f"acceptance.{name} must lie in {lo}..{hi}, got {v}")
        if self.kappa <= 0:
            raise ValueError(f"acceptance.kappa must be > 0, got {self.kappa}")

    def conditional(self, gamma: int, easy: bool | None = None) -> np.ndarray:
        """``a_1..a_gamma`` in a state (None: the unconditioned ``alpha``)."""
        a = self.alpha
        if easy is not None and self.spread:
            d = self.spread * min(a, 1.0 - a)
            a = a + d if easy else a - d
        return a * self.decay ** np.arange(gamma)

    def expected_accepted(self, gamma: int) -> float:
        """Mean accepted drafts at ``gamma`` without early stop (averaged over the two states)."""
        if gamma <= 0:
            return 0.0
        states = (True, False) if self.spread else (None,)
        return float(np.mean([np.cumprod(self.conditional(gamma, s)).sum() for s in states]))

    def new_state(self, rng: np.random.Generator) -> bool:
        """The first step's state (easy with probability 1/2)."""
        return bool(rng.random() < 0.5)

    def next_state(self, rng: np.random.Generator, easy: bool) -> bool:
        """The next step's state: kept with probability ``(1 + burst) / 2``."""
        return easy if rng.random() < (1.0 + self.burst) / 2.0 else not easy

    def draw(self, rng: np.random.Generator, gamma: int, easy: bool) -> StepDraw:
        """One step with up to ``gamma`` drafts (a fixed number of random draws per call)."""
        if gamma <= 0:
            return StepDraw(0, 0, 0)
        a = self.conditional(gamma, easy if self.spread else None)
        u = rng.random(gamma)
        conf = rng.beta(np.maximum(self.kappa * a, 1e-9), np.maximum(self.kappa * (1 - a), 1e-9)) \
            if self.p_min > 0 else a
        proposed = gamma
        if self.p_min > 0:
            low = np.flatnonzero(conf < self.p_min)
            proposed = int(low[0]) if low.size else gamma
        ok = u[:proposed] < conf[:proposed]
        accepted = int(np.cumprod(ok).sum()) if proposed else 0
        return StepDraw(proposed, accepted, min(gamma, proposed + (proposed < gamma)))

    def sample(self, rng: np.random.Generator, n_steps: int, gamma: int) -> list[StepDraw]:
        """``n_steps`` consecutive steps at a fixed ``gamma`` (the burst chain runs across them)."""
        easy = self.new_state(rng)
        out = []
        for _ in range(n_steps):
            out.append(self.draw(rng, gamma, easy))
            easy = self.next_state(rng, easy)
        return out


def fit_decay(cumulative) -> tuple[float, float]:
    """``(alpha, decay)`` fitted to published per-position cumulative acceptance ``P(accept >= i)``.

    Least squares on ``log a_i = log alpha + (i - 1) log decay`` over the conditional rates
    ``a_i = P_i / P_{i-1}``."""
    p = np.asarray(cumulative, dtype=float)
    cond = p / np.concatenate([[1.0], p[:-1]])
    slope, icpt = np.polyfit(np.arange(len(cond)), np.log(cond), 1)
    return float(np.exp(icpt)), float(min(1.0, np.exp(slope)))


def alpha_for_length(mean_length: float, gamma: int, decay: float = 1.0) -> float:
    """The ``alpha`` whose mean acceptance length (accepted + 1 bonus) at ``gamma`` is ``mean_length``."""
    if not 1.0 <= mean_length <= gamma + 1:
        raise ValueError(f"mean acceptance length must lie in 1..{gamma + 1}, got {mean_length}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 1.0 + AcceptanceModel(mid, decay).expected_accepted(gamma) < mean_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def from_record(accepted, gamma: int) -> float:
    """The i.i.d. per-token ``alpha`` that matches a captured SD record's accepted counts (MLE of
    the truncated geometric: successes / trials, a step with ``a < gamma`` has ``a + 1`` trials)."""
    a = np.asarray(accepted, dtype=float)
    trials = np.where(a < gamma, a + 1, a).sum()
    return float(a.sum() / trials) if trials else 0.0
