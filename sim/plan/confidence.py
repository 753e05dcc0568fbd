"""How sure the plan is of each runtime's figure: how many published measurements, from how many
distinct sources, the runtime was calibrated on (``conf/validation/train.yaml``, each point's
``source`` and the runtime it runs on), and its median error there (the "by runtime:" table
``python -m sim validate`` prints, as docs/fidelity.md quotes it). A runtime with fewer than
:data:`MIN_POINTS` points or :data:`MIN_SOURCES` sources is called "barely calibrated": one paper's
machine can fit a profile that does not carry to another.
"""
from __future__ import annotations

from functools import lru_cache

from sim.fidelity.training_set import FEW as MIN_POINTS   # one threshold for 'few points'
from sim.paths import CONF_DIR
from sim.plan.report import REPO, runtime_error_row

TRAIN = CONF_DIR / "validation" / "train.yaml"
MIN_SOURCES = 2


@lru_cache(maxsize=4)
def support(path=TRAIN) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Per runtime: (number of training points, their distinct sources, sorted)."""
    from sim.fidelity.points import load_points, point_runtime

    out: dict[str, list] = {}
    for p in load_points(path).points:
        out.setdefault(point_runtime(p), []).append(p.source)
    return {rt: (len(src), tuple(sorted(set(src)))) for rt, src in out.items()}


def barely(n_points: int, n_sources: int) -> bool:
    """Whether a runtime with this support is only barely calibrated."""
    return n_points < MIN_POINTS or n_sources < MIN_SOURCES


def how_sure(runtime: str, path=TRAIN, doc=REPO / "docs" / "fidelity.md") -> str:
    """One phrase: points and sources behind ``runtime``, its median error, and the verdict."""
    n, sources = support(path).get(runtime, (0, ()))
    if n == 0:
        return "uncalibrated: no published measurement in conf/validation/train.yaml runs on it"
    err = runtime_error_row(doc, runtime, n)
    errs = f", median error {err[1]}%" if err else ""
    body = (f"{n} published point{'s' if n != 1 else ''} from {len(sources)} source{'s' if len(sources) != 1 else ''}"
            f" ({', '.join(sources)}){errs}")
    if barely(n, len(sources)):
        why = " and ".join(w for w, bad in ((f"under {MIN_POINTS} points", n < MIN_POINTS),
                                           ("a single source", len(sources) < MIN_SOURCES)) if bad)
        return f"barely calibrated ({body}: {why})"
    return f"calibrated on {body}"
