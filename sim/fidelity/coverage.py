"""How often the 80% intervals cover the measured speeds, each interval made without its own source.

For a point ``p`` of source ``s`` the interval is made as for any prediction
(:func:`sim.fidelity.interval.interval_for`), but from the stored records of the other sources
only: their residuals, and their classes to decide what ``p`` extrapolates on. Two checks:
- :func:`point_coverage`: around the prediction ``validate`` makes (with the runtime fitted on every
  training point, ``p`` included);
- :func:`held_out_coverage`: around the prediction made without ``p``'s source (its stored held-out
  residual), the stricter test: neither the prediction nor the interval has seen ``s``.
"""
from __future__ import annotations

import math

from sim.fidelity.interval import Interval, interval_for


def covers(iv: Interval | None, measured: float) -> bool | None:
    """Whether ``measured`` lies in ``iv`` (None without an interval)."""
    return None if iv is None else bool(iv.low <= measured <= iv.high)


def share(flags) -> dict:
    """``{n, covered, share}`` over the flags that are not None (share None when there are none)."""
    known = [f for f in flags if f is not None]
    return {"n": len(known), "covered": sum(known), "share": sum(known) / len(known) if known else None}


def point_coverage(items: list[tuple[str, dict, float, float]], records: list[dict]) -> tuple[list, dict]:
    """Per item ``(source, classes, predicted, measured)`` its interval from the other sources'
    records and whether it covers the measurement; and the share covered."""
    ivs = [interval_for(pred, classes, records, exclude_source=src) for src, classes, pred, _ in items]
    flags = [covers(iv, item[3]) for iv, item in zip(ivs, items)]
    return list(zip(ivs, flags)), share(flags)


def held_out_coverage(records: list[dict]) -> dict:
    """The share of stored held-out predictions (measured 1, predicted ``exp(held_out)``) that the
    interval from the other sources' records covers."""
    flags = [covers(interval_for(math.exp(r["held_out"]), r, records, exclude_source=r["source"]), 1.0)
             for r in records if r.get("held_out") is not None]
    return share(flags)


def interval_columns(points: list, predicted: list[float], records: list[dict] | None) -> tuple[list[dict], dict]:
    """validate's per-point interval columns (``interval_low_tok_s``, ``interval_high_tok_s``,
    ``interval_basis`` from every stored record; ``loso_low_tok_s``, ``loso_high_tok_s``,
    ``covered_loso`` from the other sources'; ``extrapolating``) and the LOSO coverage."""
    from sim.fidelity.points import point_runtime
    from sim.fidelity.training_set import extrapolation_line, point_classes

    if records is None:
        empty = {"interval_low_tok_s": math.nan, "interval_high_tok_s": math.nan, "interval_basis": "no residual store",
                 "loso_low_tok_s": math.nan, "loso_high_tok_s": math.nan, "covered_loso": None, "extrapolating": ""}
        return [dict(empty) for _ in points], share([])
    classes = [point_classes(p.run, point_runtime(p)) for p in points]
    loso, cov = point_coverage([(p.source, c, pred, p.measured_tok_s) for p, c, pred in zip(points, classes, predicted)],
                               records)
    cols = []
    for c, pred, (liv, flag) in zip(classes, predicted, loso):
        iv = interval_for(pred, c, records)
        cols.append({"interval_low_tok_s": iv.low if iv else math.nan, "interval_high_tok_s": iv.high if iv else math.nan,
                     "interval_basis": iv.basis if iv else "", "loso_low_tok_s": liv.low if liv else math.nan,
                     "loso_high_tok_s": liv.high if liv else math.nan, "covered_loso": flag,
                     "extrapolating": extrapolation_line(c, records)})
    return cols, cov


def check_store(residuals: str | None):
    """The residual store at ``residuals`` (None for none); a path that does not exist or a malformed
    file is a :class:`sim.machine.specs.ConfigError` naming it."""
    from pathlib import Path

    from sim.machine.specs import ConfigError
    from sim.fidelity.residual_store import load_store

    if residuals and not Path(residuals).exists():
        raise ConfigError(f"residuals={residuals}: no such file (python -m sim calibrate runtime=all writes it; "
                          "residuals=null: no intervals)")
    return load_store(residuals) if residuals else None


def with_intervals(points: list, df, store):
    """validate's frame with the interval columns added, the LOSO coverage of its predictions and
    the held-out coverage of the stored records (``store``: :func:`check_store`'s; None: no intervals)."""
    import pandas as pd

    records = store.records if store is not None else None
    cols, cov = interval_columns(points, df["predicted_tok_s"].tolist(), records)
    held = held_out_coverage(records) if records is not None else share([])
    return pd.concat([df, pd.DataFrame(cols, index=df.index)], axis=1), {"predictions": cov, "held_out": held}


def coverage_line(cov: dict, level: float = 0.8) -> str:
    """The coverage summary validate prints."""
    p, h = cov["predictions"], cov["held_out"]
    if not p["n"]:
        return "80% intervals: none (no residual store; python -m sim calibrate runtime=all writes it)"
    pct = lambda s: f"{s['covered']} of {s['n']} ({100 * s['share']:.0f}%)" if s["n"] else "none"
    return (f"{100 * level:.0f}% intervals, each from the other sources' residuals (LOSO), cover the measured speed: "
            f"around these predictions (fitted on every point) {pct(p)}; around the predictions made without "
            f"the point's source {pct(h)} (target 70-90%)")
