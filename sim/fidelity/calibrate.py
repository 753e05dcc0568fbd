"""``python -m sim calibrate points=FILE runtime=NAME``: fit one runtime profile on the points built on it.

Only the parameters listed under the runtime's ``calibrate:`` (each with ``[low, high]``, physically
plausible bounds stated in ``conf/runtime/NAME.yaml``) are fitted; datasheet facts (gpu/host/link)
never are, and nothing is fitted per point. The fit is the most probable value (MAP) of the
parameters: least squares on ``log(predicted / measured)`` plus a weak prior per parameter, on a
log scale, centred on the geometric middle of its range (scipy ``least_squares``, trust-region
reflective within the bounds, started from that middle), so it depends on the points and the
bounds alone. Fitted values replace the profile's own and its per-kind overrides of the same
fields. With ``write=true`` they are written into the YAML with the date, the points used and
their residuals as comments; the leave-one-source-out error makes the same fit without each source
and predicts its points.
"""
from __future__ import annotations

import datetime as _dt
import math
import re

import numpy as np

from sim.machine.specs import ConfigError
from sim.fidelity.points import Point, load_points, point_runtime
from sim.fidelity.validate import DEFAULT_GEN, predict_all
from sim.paths import CONF_DIR
from sim.machine.compose import load_yaml

FIT_BEGIN, FIT_END = "# --- fitted by python -m sim calibrate", "# --- end of fit"


def bounds_of(runtime: str) -> dict[str, tuple[float, float]]:
    """The runtime's ``calibrate:`` block: parameter -> (low, high), checked."""
    data = load_yaml("runtime", runtime)
    spec = data.get("calibrate") or {}
    out = {}
    for name, b in spec.items():
        if name.split(".")[0] not in data or not (isinstance(b, list) and len(b) == 2 and b[0] < b[1]):
            raise ConfigError(f"conf/runtime/{runtime}.yaml: calibrate.{name} must name a field with [low, high], got {b!r}")
        out[name] = (float(b[0]), float(b[1]))
    return out


def patch_for(runtime: str, values: dict) -> dict:
    """A runtime patch setting ``values`` everywhere: top level and every per-kind override;
    ``table.key`` names an entry of a per-format table (``gpu_quant_eff.hqq2``), ``by_kind.KIND.FIELD``
    one device kind's value (``by_kind.server.cpu_mem_eff``)."""
    data = load_yaml("runtime", runtime)
    flat = {k: v for k, v in values.items() if "." not in k}
    kinds = {k: v for k, v in values.items() if k.startswith("by_kind.")}
    for k, v in values.items():
        if "." in k and k not in kinds:
            table, key = k.split(".", 1)
            flat.setdefault(table, dict(data.get(table) or {}))[key] = v
    by_kind = {k: {f: v for f, v in (o or {}).items() if f not in flat}
               for k, o in (data.get("by_kind") or {}).items()}
    for k, v in kinds.items():          # by_kind.KIND.FIELD: that device kind's own value
        _, kind, field = k.split(".", 2)
        by_kind.setdefault(kind, {})[field] = v
    return {**flat, "by_kind": by_kind, "name": runtime}


def _value(data: dict, name: str):
    """A runtime field or a ``table.key`` entry (1.0, the multiplier's neutral value, when absent)."""
    if name.startswith("by_kind."):
        _, kind, field = name.split(".", 2)
        return float(((data.get("by_kind") or {}).get(kind) or {}).get(field, data[field]))
    if "." in name:
        table, key = name.split(".", 1)
        return float((data.get(table) or {}).get(key, 1.0))
    return data[name]


N_JOBS = 1   # processes per residual evaluation (set by calibrate's n_jobs)


def residuals(points: list[Point], runtime: str, values: dict, gen_tokens: int) -> np.ndarray:
    """``log(predicted / measured)`` per point with ``values`` set on the runtime."""
    patch = patch_for(runtime, values)
    pts = [Point(p.id, p.measured_tok_s, p.source, p.grade, {**p.run, "runtime": runtime}) for p in points]
    preds = predict_all(pts, gen_tokens, N_JOBS, patch, progress=False)
    return np.asarray([math.log(r["predicted_tok_s"] / p.measured_tok_s)
                       if np.isfinite(r["predicted_tok_s"]) and r["predicted_tok_s"] > 0 else math.log(1e-3)
                       for p, r in zip(points, preds)])


OBS_SD = 0.2     # log error one published point carries (figure reads, unstated flags: ~20%)
PRIOR_SD = 0.5   # prior width of a parameter: half its stated range (log scale), centred on the middle


def fit(points: list[Point], runtime: str, bounds: dict, gen_tokens: int,
        max_nfev: int = 20, prior: dict | None = None, resid=None) -> tuple[dict, np.ndarray]:
    """The most probable parameters within ``bounds`` (MAP): least squares on log error plus a weak
    Gaussian prior per parameter in log space, centred on the geometric middle of its stated range
    with a standard deviation of half that range, each point's log error weighted as ``OBS_SD``.
    Fitted on a log scale from the middle of the ranges, so the result depends on the points and
    the bounds alone (not on a previous fit), and a parameter no point constrains stays at the
    middle of its range instead of wandering to a bound. Returns the values and the points'
    residuals (without the prior's). ``prior`` (values) moves the prior's centre off the middle of
    the ranges, ``resid`` (values -> log errors of ``points``) replaces :func:`residuals` (the
    machine fit, :mod:`sim.fidelity.machine_fit`)."""
    from scipy.optimize import least_squares

    names = list(bounds)
    lo = np.log([bounds[n][0] for n in names])
    span = np.log([bounds[n][1] for n in names]) - lo
    weight = OBS_SD / PRIOR_SD
    value = lambda z: dict(zip(names, np.exp(lo + z * span).tolist()))
    to_z = lambda v: np.clip((np.log([v[n] for n in names]) - lo) / span, 0.0, 1.0)
    mid = np.full(len(names), 0.5) if prior is None else to_z(prior)
    resid = resid or (lambda v: residuals(points, runtime, v, gen_tokens))
    fun = lambda z: np.concatenate([resid(value(z)), weight * (z - mid)])
    res = least_squares(fun, mid, bounds=(0.0, 1.0), diff_step=0.02,
                        max_nfev=max_nfev)
    return value(res.x), res.fun[:len(points)]


def loso(points: list[Point], runtime: str, bounds: dict, gen_tokens: int) -> dict[str, np.ndarray]:
    """Leave-one-source-out: per source, the same fit on the others; its points' log errors."""
    out = {}
    for src in sorted({p.source for p in points}):
        train = [p for p in points if p.source != src]
        test = [p for p in points if p.source == src]
        if len(train) < len(bounds):
            continue
        values, _ = fit(train, runtime, bounds, gen_tokens)
        out[src] = residuals(test, runtime, values, gen_tokens)
    return out


def ape(log_err: np.ndarray) -> np.ndarray:
    """Absolute % error from log errors."""
    return np.abs(np.exp(log_err) - 1.0) * 100


def write_fit(runtime: str, values: dict, points: list[Point], res: np.ndarray) -> None:
    """Write the fitted values into conf/runtime/NAME.yaml between marker comments (replacing a previous fit)."""
    from traces.io import atomic_write_bytes

    path = CONF_DIR / "runtime" / f"{runtime}.yaml"
    text = re.sub(rf"\n?{re.escape(FIT_BEGIN)}.*?{re.escape(FIT_END)}[^\n]*\n", "\n", path.read_text(), flags=re.S)
    lines = [f"{FIT_BEGIN} on {_dt.date.today().isoformat()} (MAP: log error + a weak prior at the middle of each calibrate: range)",
             f"# points ({len(points)}): " + ", ".join(f"{p.id} {100 * (math.exp(r) - 1):+.0f}%" for p, r in zip(points, res)),
             f"# median |error| {np.median(ape(res)):.1f}%"]
    patch = patch_for(runtime, values)
    text = shadow_fitted(text, [k for k in patch if k != "name"])
    lines += [f"{k}: {patch[k]:.4g}" if isinstance(patch[k], float) else f"{k}: {patch[k]}".replace("'", "")
              for k in patch if k != "name"]
    lines.append(f"{FIT_END} ---")
    atomic_write_bytes(path, lambda f: f.write((text.rstrip("\n") + "\n" + "\n".join(lines) + "\n").encode()))


def shadow_fitted(text: str, keys) -> str:
    """The runtime file's body with every top-level entry of ``keys`` (and its indented block)
    turned into comments marked ``(fitted below)``, so that the fit block written after it is the
    only value of each key (YAML keeps one of two equal keys, silently)."""
    out, inside = [], False
    for line in text.splitlines():
        key = re.match(r"([A-Za-z_][\w]*)\s*:", line)
        if key:
            inside = key.group(1) in keys
        elif line and not line[0].isspace() and not line.startswith("#"):
            inside = False
        out.append(f"# (fitted below) {line}" if inside and line.strip() else line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def calibration_order() -> list[str]:
    """Every runtime with a ``calibrate:`` block, each after the runtimes it inherits from (a child's
    fit depends on its parents' fitted values), ties in name order."""
    from sim.machine.specs import read_yaml

    files = {p.stem: read_yaml(p) for p in sorted((CONF_DIR / "runtime").glob("*.yaml"))}
    parents = {n: [d for d in (data.get("defaults") or []) if isinstance(d, str) and d in files]
               for n, data in files.items()}
    order: list[str] = []

    def visit(name: str) -> None:
        if name not in order:
            for parent in parents[name]:
                visit(parent)
            order.append(name)

    for name in files:
        visit(name)
    return [n for n in order if bounds_of(n)]


def calibrate_all(points: str, write: bool = True, do_loso: bool = True, min_points: int = 4,
                  gen_tokens: int = DEFAULT_GEN, n_jobs: int = 1, residuals_out: str | None = None) -> dict:
    """``runtime=all``: :func:`calibrate` every runtime in :func:`calibration_order`, then the
    leave-one-source-out error over every held-out point of every runtime together; with
    ``residuals_out`` (and ``do_loso`` and ``write``), the held-out residuals written there (:mod:`sim.fidelity.residual_store`)."""
    outs = [calibrate(points, r, write, do_loso, min_points, gen_tokens, n_jobs) for r in calibration_order()]
    pooled = np.asarray([x for o in outs for x in o.get("loso_log_errors", [])])
    if pooled.size:
        print(f"LOSO over every runtime: median |error| {np.median(ape(pooled)):.1f}% over {pooled.size} held-out points")
    if residuals_out and do_loso and write:
        from sim.fidelity.residual_store import store_from_calibration

        print(f"written: {store_from_calibration(points, outs, residuals_out, gen_tokens, lambda pts, fitted: unfitted_residuals(pts, fitted, gen_tokens, n_jobs))}")
    return {"runtimes": outs, "loso_median_ape": float(np.median(ape(pooled))) if pooled.size else float("nan")}


def calibrate(points: str, runtime: str, write: bool = True, do_loso: bool = True, min_points: int = 4,
              gen_tokens: int = DEFAULT_GEN, n_jobs: int = 1, residuals_out: str | None = None) -> dict:
    """Fit ``runtime`` on the points built on it; print the fit, per-point residuals and LOSO error
    (``runtime=all``: :func:`calibrate_all`)."""
    if runtime == "all":
        return calibrate_all(points, write, do_loso, min_points, gen_tokens, n_jobs, residuals_out)
    global N_JOBS
    N_JOBS = max(1, int(n_jobs))
    pf = load_points(points)
    mine = [p for p in pf.points if point_runtime(p) == runtime]
    bounds = bounds_of(runtime)
    if not bounds:
        print(f"runtime {runtime}: no calibrate: parameters in conf/runtime/{runtime}.yaml; keeps its sourced values")
        return {"runtime": runtime, "fitted": False}
    if len(mine) < max(min_points, len(bounds) + 1):
        print(f"runtime {runtime}: {len(mine)} points (need {max(min_points, len(bounds) + 1)} for "
              f"{len(bounds)} parameters); keeps its sourced defaults")
        return {"runtime": runtime, "fitted": False, "n": len(mine)}
    data = load_yaml("runtime", runtime)
    start = {k: _value(data, k) for k in bounds}
    before = residuals(mine, runtime, start, gen_tokens)
    values, res = fit(mine, runtime, bounds, gen_tokens)
    print(f"runtime {runtime}: {len(mine)} points, median |error| {np.median(ape(before)):.1f}% -> {np.median(ape(res)):.1f}%")
    for k, v in values.items():
        print(f"  {k:<18} {start[k]:>10.4g} -> {v:<10.4g} bounds {list(bounds[k])}")
    for p, r in zip(mine, res):
        print(f"  {p.id:<6} {p.source:<28} {100 * (math.exp(r) - 1):+7.1f}%")
    out = {"runtime": runtime, "fitted": True, "values": values, "median_ape": float(np.median(ape(res)))}
    if do_loso:
        held = loso(mine, runtime, bounds, gen_tokens)
        allres = np.concatenate(list(held.values())) if held else np.array([])
        for src, r in held.items():
            ids = [p.id for p in mine if p.source == src]      # loso() predicts them in this order
            each = ", ".join(f"{i} {100 * (math.exp(x) - 1):+.0f}%" for i, x in zip(ids, r))
            print(f"  LOSO {src:<28} n={r.size}  median |error| {np.median(ape(r)):.1f}%  ({each})")
        if allres.size:
            print(f"  LOSO median |error| {np.median(ape(allres)):.1f}% over {allres.size} points")
            out["loso_median_ape"] = float(np.median(ape(allres)))
        out["loso_log_errors"] = allres.tolist()
        out["loso_ids"] = [p.id for src in held for p in mine if p.source == src]   # allres's order
    if write:
        write_fit(runtime, values, mine, res)
        print(f"written: conf/runtime/{runtime}.yaml")
    return out


def unfitted_residuals(points: list, fitted: set[str], gen_tokens: int, n_jobs: int) -> dict[str, float]:
    """The log residual of every point whose runtime has no fit, predicted with its sourced values."""
    todo = [p for p in points if point_runtime(p) not in fitted]
    preds = predict_all(todo, gen_tokens, n_jobs, progress=False) if todo else []
    return {p.id: math.log(r["predicted_tok_s"] / p.measured_tok_s) for p, r in zip(todo, preds)
            if math.isfinite(r["predicted_tok_s"]) and r["predicted_tok_s"] > 0}
