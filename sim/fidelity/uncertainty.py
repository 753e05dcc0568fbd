"""A predicted speed as the commands print it: with its 80% interval and, when the training points
do not cover the run, one line saying what is missing (:mod:`sim.fidelity.interval`,
:mod:`sim.fidelity.training_set`, the stored residuals of :mod:`sim.fidelity.residual_store`)."""
from __future__ import annotations

from pathlib import Path

from sim.fidelity.interval import Interval, interval_for, span, with_interval
from sim.fidelity.residual_store import DEFAULT, load_store
from sim.fidelity.training_set import extrapolation_line

NO_STORE = "no interval: {path} is missing (python -m sim calibrate runtime=all writes it)"


class Uncertainty:
    """Intervals and extrapolation lines from one residual store (read once)."""

    def __init__(self, path: str | Path = DEFAULT):
        self.path = Path(path)
        store = load_store(self.path)
        self.records = store.records if store is not None else None

    def interval(self, tps: float, classes: dict) -> Interval | None:
        """The 80% interval of ``tps`` for a run of ``classes`` (None without a store)."""
        return interval_for(tps, classes, self.records) if self.records is not None else None

    def speed(self, tps: float, classes: dict) -> str:
        """``23.6 tok/s (80%: 18.1-29.0)``."""
        return with_interval(tps, self.interval(tps, classes))

    def band(self, tps: float, classes: dict) -> str:
        """The interval alone, ``18.1-29.0`` (``-`` without one), for a table column."""
        iv = self.interval(tps, classes)
        return span(iv.low, iv.high) if iv is not None else "-"

    def _shown(self) -> str:
        """The store's path, relative to the repository when inside it."""
        from sim.paths import CONF_DIR

        try:
            return str(self.path.resolve().relative_to(CONF_DIR.parent))
        except ValueError:
            return str(self.path)

    def extrapolation(self, classes: dict) -> str:
        """The extrapolation line ('' when the training points cover every axis or there is no store)."""
        return extrapolation_line(classes, self.records) if self.records is not None else ""

    def lines(self, tps: float, classes: dict) -> list[str]:
        """The prediction with its interval and basis, then the extrapolation line if any."""
        iv = self.interval(tps, classes)
        first = f"predicted: {with_interval(tps, iv)}"
        first += f"  [{iv.basis}]" if iv is not None else f"  ({NO_STORE.format(path=self._shown())})"
        extra = self.extrapolation(classes)
        return [first] + ([extra] if extra else [])
