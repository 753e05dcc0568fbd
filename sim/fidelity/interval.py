"""An 80% interval on a predicted speed, from the held-out residuals of the training points.

A residual is ``r = log(predicted / measured)`` of a training point predicted without having been
fitted on: its leave-one-source-out (LOSO) residual when its runtime is fitted (the fit made
without the point's source), its plain residual when its runtime has no fit (no ``calibrate:``
parameters, or too few points). Points of a runtime fitted on one source only have no held-out
residual. The interval of a prediction ``p`` is ``[p exp(-q_hi), p exp(-q_lo)]``, with ``q_lo``,
``q_hi`` the 10% and 90% quantiles of the residuals (numpy's default linear interpolation between
order statistics), so a prediction that runs high (``r > 0``) gets an interval below it.

Which residuals, and the widening rule:
- the runtime's own held-out residuals when it has at least ``MIN_OWN`` of them;
- otherwise the pooled held-out residuals of every runtime, the band widened by ``POOLED_WIDEN``
  (1.5) about its median;
- and for each axis of the prediction (GPU preset, host preset, runtime, model family,
  :mod:`sim.fidelity.training_set`) that no training point has, the band widened by a further
  ``AXIS_WIDEN`` (1.25) about its median.
The two factors are assumptions, not fits (16 held-out residuals cannot fit them); the LOSO
coverage that ``python -m sim validate`` prints is their check.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.fidelity.training_set import missing_axes

LEVEL = 0.8
MIN_OWN = 5
POOLED_WIDEN = 1.5
AXIS_WIDEN = 1.25


@dataclass(frozen=True)
class Interval:
    """A prediction's interval (tok/s), how it was made (``basis``) and on how many residuals."""

    low: float
    high: float
    basis: str
    n: int


def band(residuals, level: float = LEVEL, factor: float = 1.0) -> tuple[float, float]:
    """The ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of ``residuals``, their distances
    from the median multiplied by ``factor``."""
    lo, mid, hi = np.quantile(np.asarray(residuals, dtype=float), [(1 - level) / 2, 0.5, (1 + level) / 2])
    return float(mid - factor * (mid - lo)), float(mid + factor * (hi - mid))


def held_out(records: list[dict], runtime: str, exclude_source: str | None = None) -> tuple[list[float], bool]:
    """The residuals an interval of ``runtime`` uses (points of ``exclude_source`` left out) and
    whether they are the runtime's own (True) or the pooled ones of every runtime (False)."""
    held = [r for r in records if r.get("held_out") is not None and r.get("source") != exclude_source]
    own = [float(r["held_out"]) for r in held if r["runtime"] == runtime]
    if len(own) >= MIN_OWN:
        return own, True
    return [float(r["held_out"]) for r in held], False


def interval_for(pred: float, classes: dict, records: list[dict], exclude_source: str | None = None,
                 level: float = LEVEL) -> Interval | None:
    """The ``level`` interval of prediction ``pred`` (tok/s) of a run of ``classes`` (gpu, host,
    runtime, family), from the training ``records`` without ``exclude_source``; None when fewer
    than two residuals are left or ``pred`` is not a positive number."""
    res, own = held_out(records, classes["runtime"], exclude_source)
    if len(res) < 2 or not (isinstance(pred, (int, float)) and math.isfinite(pred) and pred > 0):
        return None
    missing = missing_axes(classes, records, exclude_source)
    factor = (1.0 if own else POOLED_WIDEN) * AXIS_WIDEN ** len(missing)
    lo, hi = band(res, level, factor)
    basis = f"{classes['runtime']} held-out n={len(res)}" if own else f"pooled held-out n={len(res)}"
    if factor != 1.0:
        basis += f" x{factor:.2f}" + (f" (no training point on {', '.join(missing)})" if missing else "")
    return Interval(pred * math.exp(-hi), pred * math.exp(-lo), basis, len(res))


def num(x: float) -> str:
    """A speed with three significant digits, never in exponent form (158, 23.6, 2.41)."""
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def with_interval(pred: float, iv: Interval | None, level: float = LEVEL) -> str:
    """``23.6 tok/s (80%: 18.1-29.0)``; without an interval, the prediction alone."""
    text = f"{num(pred)} tok/s"
    return text + (f" ({100 * level:.0f}%: {span(iv.low, iv.high)})" if iv is not None else "")


def span(low: float, high: float) -> str:
    """An interval as printed: ``low-high`` in the precision of :func:`num`."""
    return f"{num(low)}-{num(high)}"
