"""The held-out residuals of the training points, stored once for every prediction to read.

``python -m sim calibrate runtime=all`` writes ``conf/validation/loso_residuals.yaml`` (the
``residuals`` key of conf/calibrate.yaml): the date, the code version, the points file, and one
record per training point: ``id``, ``source``, its classes (``gpu``, ``host``, ``runtime``,
``family``: :mod:`sim.fidelity.training_set`), ``held_out`` (its log residual ``log(predicted /
measured)`` predicted without having been fitted on, or null) and ``how``: ``loso`` (the fit of its
runtime made without its source), ``unfitted`` (its runtime keeps its sourced values: the
prediction with them), ``in_fit`` (its runtime is fitted on its source alone: no held-out residual).
``sim run``, ``sim plan`` and ``sim validate`` read it (:func:`load_store`, once per file version).
"""
from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sim.paths import CONF_DIR

DEFAULT = CONF_DIR / "validation" / "loso_residuals.yaml"


@dataclass(frozen=True)
class Store:
    """The stored training records and where they come from."""

    path: str
    records: list
    date: str = ""
    code_version: str = ""


def build_records(points: list, loso: dict[str, float], fitted: set[str], unfitted: dict[str, float]) -> list[dict]:
    """One record per training point: its classes, its held-out log residual and how it was made
    (``loso`` maps point id -> LOSO residual; ``unfitted`` id -> residual of an unfitted runtime)."""
    from sim.fidelity.points import point_runtime
    from sim.fidelity.training_set import point_classes

    out = []
    for p in points:
        rt = point_runtime(p)
        how = "loso" if p.id in loso else "unfitted" if p.id in unfitted else "in_fit" if rt in fitted else "failed"
        value = loso.get(p.id, unfitted.get(p.id))
        out.append({"id": p.id, "source": p.source, **point_classes(p.run, rt),
                    "held_out": round(float(value), 5) if value is not None and math.isfinite(value) else None,
                    "how": how})
    return out


def write_store(path: str | Path, points_file: str, records: list[dict], gen_tokens: int) -> Path:
    """Write the records (atomically) with the date, code version and points file."""
    import yaml

    from sim.run.identity import code_version
    from traces.atomic import atomic_write_bytes

    head = {"date": _dt.date.today().isoformat(), "code_version": code_version(), "points": str(points_file),
            "gen_tokens": int(gen_tokens)}
    lines = ["# Held-out residuals log(predicted/measured) of the training points, and their classes.",
             "# Written by python -m sim calibrate runtime=all (sim/fidelity/residual_store.py); read by",
             "# sim run / plan / validate for the 80% interval and the extrapolation line (sim/fidelity/interval.py).",
             yaml.safe_dump(head, sort_keys=False).rstrip(), "records:"]
    lines += ["  - " + yaml.safe_dump(r, default_flow_style=True, sort_keys=False, width=1000).strip()
              for r in records]
    text = ("\n".join(lines) + "\n").encode()
    return atomic_write_bytes(Path(path), lambda f: f.write(text))


def load_store(path: str | Path = DEFAULT) -> Store | None:
    """The stored records of ``path`` (None when the file does not exist); read once per version."""
    p = Path(path)
    if not p.exists():
        return None
    return _load(str(p.resolve()), p.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> Store:
    import yaml

    from sim.machine.specs import ConfigError

    from traces.datafile import yaml_error_text

    try:
        data = yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError as exc:
        where, what = yaml_error_text(exc)
        raise ConfigError(f"residuals={path}{where}: not valid YAML ({what})") from None
    records = data.get("records") if isinstance(data, dict) else None
    need = ("id", "source", "gpu", "host", "runtime", "family", "held_out")
    if not isinstance(records, list) or any(not isinstance(r, dict) or any(k not in r for k in need) for r in records):
        raise ConfigError(f"residuals={path}: 'records' must be a list of mappings with keys {list(need)}; "
                          "rewrite it with python -m sim calibrate runtime=all")
    return Store(path, records, str(data.get("date", "")), str(data.get("code_version", "")))


def store_from_calibration(points_file: str, outs: list[dict], path: str | Path, gen_tokens: int,
                           unfitted_of) -> Path:
    """The store of a ``calibrate runtime=all`` run: its per-runtime outputs (``loso_ids``,
    ``loso_log_errors``, ``fitted``) and the residuals of the unfitted runtimes' points
    (``unfitted_of(points, fitted)``: :func:`sim.fidelity.calibrate.unfitted_residuals`), written to ``path``."""
    from sim.fidelity.points import load_points

    pf = load_points(points_file)
    loso = {i: x for o in outs for i, x in zip(o.get("loso_ids", []), o.get("loso_log_errors", []))}
    fitted = {o["runtime"] for o in outs if o.get("fitted")}
    return write_store(path, points_file, build_records(pf.points, loso, fitted, unfitted_of(pf.points, fitted)),
                       gen_tokens)
