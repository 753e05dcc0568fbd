"""``python -m sim validate points=FILE [out=DIR] [json=true] [gen_tokens=N] [n_jobs=N]``:
every point simulated, held against its measurement.

Prints a table (id, system, model, machine, predicted with its 80% interval, measured, error %),
the summary (median absolute % error, share within +-25 / +-30 / +-50 %, how often the intervals
made without each point's source cover it, by system, runtime and source), the
same-machine ratio claims (predicted vs published ratio, same direction or not); writes
``fidelity.parquet`` and ``fidelity.png`` (log-log predicted vs measured) into ``out``; with
``json=true`` prints one JSON object (``points``: each with ``interval_low_tok_s``,
``interval_high_tok_s``, ``interval_basis``; ``median_ape``, ``interval_coverage``, ``ratios``) instead.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from traces.atomic import save_png
from sim.fidelity.points import Point, PointsFile, load_points, point_runtime, run_kwargs
from sim.run.spec import RunSpec

DEFAULT_GEN = 64


def predict(point: Point, gen_tokens: int = DEFAULT_GEN, runtime_patch: dict | None = None) -> dict:
    """The simulated tok/s of one point (``nan`` with the reason when its run cannot be built)."""
    from sim.machine.specs import ConfigError
    from sim.run.runner import run_one

    try:
        row = run_one(RunSpec.of(**run_kwargs(point.run, gen_tokens, runtime_patch))).row
        return {"predicted_tok_s": float(row["tps"]), "hardware": row["hardware"], "model": row["model"],
                "runtime": row["runtime"], "failure": ""}
    except (ConfigError, KeyError, ValueError) as exc:
        return {"predicted_tok_s": float("nan"), "hardware": "", "model": point.run.get("model", ""),
                "runtime": point_runtime(point), "failure": str(exc).splitlines()[0][:200]}


def predict_all(points: list[Point], gen_tokens: int = DEFAULT_GEN, n_jobs: int = 2,
                runtime_patch: dict | None = None, progress: bool = True) -> list[dict]:
    """:func:`predict` for every point, in parallel processes (joblib), with a progress bar."""
    from joblib import Parallel, delayed
    from tqdm import tqdm

    it = tqdm(points, desc="validate", unit="pt", disable=not progress)
    if n_jobs == 1:
        return [predict(p, gen_tokens, runtime_patch) for p in it]
    return list(Parallel(n_jobs=n_jobs)(delayed(predict)(p, gen_tokens, runtime_patch) for p in it))


def frame(pf: PointsFile, preds: list[dict]) -> pd.DataFrame:
    """One row per point: inputs, prediction, measurement, signed error (predicted/measured - 1)."""
    rows = []
    for p, r in zip(pf.points, preds):
        rows.append({"id": p.id, "system": p.system or p.run.get("policy", ""), "policy": p.run.get("policy", ""),
                     "source": p.source, "grade": p.grade, "group": p.group, "measured_tok_s": p.measured_tok_s,
                     **r, "error": r["predicted_tok_s"] / p.measured_tok_s - 1.0,
                     "run": json.dumps(p.run, sort_keys=True)})
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> dict:
    """Median absolute % error and the shares within +-25 / 30 / 50 % (points that ran)."""
    ape = (df["error"].abs() * 100).dropna()
    if ape.empty:
        return {"n": 0, "median_ape": float("nan"), "within_25": 0.0, "within_30": 0.0, "within_50": 0.0}
    return {"n": int(ape.size), "median_ape": float(ape.median()), "within_25": float((ape <= 25).mean()),
            "within_30": float((ape <= 30).mean()), "within_50": float((ape <= 50).mean())}


def ratio_table(pf: PointsFile, df: pd.DataFrame) -> pd.DataFrame:
    """Each same-machine claim: published ratio, predicted ratio, same direction."""
    by = df.set_index("id")
    rows = []
    for r in pf.ratios:
        pub = by.at[r.num, "measured_tok_s"] / by.at[r.den, "measured_tok_s"]
        pred = by.at[r.num, "predicted_tok_s"] / by.at[r.den, "predicted_tok_s"]
        rows.append({"id": r.id, "num": r.num, "den": r.den, "claim": r.claim, "published": pub, "predicted": pred,
                     "same_direction": bool(np.sign(math.log(pub)) == np.sign(math.log(pred)))
                     if np.isfinite(pred) else False})
    return pd.DataFrame(rows, columns=["id", "num", "den", "claim", "published", "predicted", "same_direction"])


def scatter_png(df: pd.DataFrame, path: Path, title: str) -> None:
    """Log-log predicted vs measured, the diagonal and the +-30 % band."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = df.dropna(subset=["predicted_tok_s"])
    fig, ax = plt.subplots(figsize=(6.5, 6))
    markers = "osD^v<>"
    for i, (system, g) in enumerate(ok.groupby("system")):   # 10 colours x 7 markers: every system its own
        ax.scatter(g["measured_tok_s"], g["predicted_tok_s"], label=system, s=22, color=f"C{i % 10}",
                   marker=markers[(i // 10) % len(markers)])
    lo = min(ok["measured_tok_s"].min(), ok["predicted_tok_s"].min()) * 0.7
    hi = max(ok["measured_tok_s"].max(), ok["predicted_tok_s"].max()) * 1.4
    xs = np.array([lo, hi])
    ax.plot(xs, xs, "k-", lw=1)
    ax.fill_between(xs, xs * 0.7, xs * 1.3, color="0.85", zorder=0, label="±30%")
    ax.set(xscale="log", yscale="log", xlabel="measured tok/s", ylabel="predicted tok/s", title=title)
    ax.legend(fontsize=6, loc="upper left")
    save_png(fig, path, dpi=120)


def _group_table(df: pd.DataFrame, key: str) -> str:
    rows = [f"{name:<28} {s['n']:>3}  {s['median_ape']:6.1f}%  {100 * s['within_30']:5.0f}%"
            for name, g in df.groupby(key) for s in [summary(g)]]
    return f"by {key}:           n   median |err|  within ±30%\n" + "\n".join(rows)


def render(df: pd.DataFrame, ratios: pd.DataFrame, coverage: dict | None = None) -> str:
    """The text report: per-point table (with the 80% interval), summary, interval coverage, by
    system / runtime / source, ratio claims."""
    from sim.fidelity.coverage import coverage_line
    from sim.fidelity.interval import span

    lines = [f"{'id':<6} {'system':<22} {'model':<18} {'machine':<34} {'pred':>8} {'80% interval':>13} {'meas':>8} {'err%':>7}"]
    for r in df.itertuples():
        err = f"{100 * r.error:+7.1f}" if np.isfinite(r.error) else f"  fail: {r.failure}"
        band = span(r.interval_low_tok_s, r.interval_high_tok_s) if np.isfinite(r.interval_low_tok_s) else "-"
        lines.append(f"{r.id:<6} {r.system[:22]:<22} {str(r.model)[:18]:<18} {str(r.hardware)[:34]:<34} "
                     f"{r.predicted_tok_s:8.2f} {band:>13} {r.measured_tok_s:8.2f} {err}")
        lines += [f"       {r.extrapolating}"] if r.extrapolating else []
    s = summary(df)
    lines.append(f"\n{s['n']} points: median |error| {s['median_ape']:.1f}%, within ±25% {100 * s['within_25']:.0f}%, "
                 f"within ±30% {100 * s['within_30']:.0f}%, within ±50% {100 * s['within_50']:.0f}%")
    if coverage is not None:
        lines.append(coverage_line(coverage))
    for key in ("system", "runtime", "source"):
        lines.append("\n" + _group_table(df, key))
    if len(ratios):
        lines.append("\nsame-machine ratio claims:")
        for r in ratios.itertuples():
            lines.append(f"{r.id:<6} {r.num}/{r.den}  published {r.published:6.2f}  predicted {r.predicted:6.2f}  "
                         f"{'same direction' if r.same_direction else 'WRONG DIRECTION'}  {r.claim}")
        lines.append(f"{int(ratios['same_direction'].sum())} of {len(ratios)} in the right direction")
    return "\n".join(lines)


def validate(points: str, out: str | None = None, as_json: bool = False, gen_tokens: int = DEFAULT_GEN,
             n_jobs: int = 2, progress: bool = True, residuals: str | None = None) -> dict:
    """Run the whole points file; print the report (or JSON); write fidelity.parquet + fidelity.png.
    ``residuals``: the held-out residual store the 80% intervals come from (:mod:`sim.fidelity.coverage`)."""
    from sim.fidelity.coverage import check_store, with_intervals
    from traces.io import atomic_write_bytes

    pf = load_points(points)
    store = check_store(residuals)            # a bad residuals= stops before any simulation
    df = frame(pf, predict_all(pf.points, gen_tokens, n_jobs, progress=progress and not as_json))
    df, coverage = with_intervals(pf.points, df, store)
    ratios = ratio_table(pf, df)
    s = summary(df)
    if out:
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(d / "fidelity.parquet", lambda f: df.to_parquet(f, index=False))
        if len(ratios):
            atomic_write_bytes(d / "ratios.parquet", lambda f: ratios.to_parquet(f, index=False))
        if s["n"]:
            scatter_png(df, d / "fidelity.png", f"{Path(points).name}: median |err| {s['median_ape']:.1f}%")
    result = {"points": [{"id": r.id, "predicted_tok_s": _num(r.predicted_tok_s), "measured_tok_s": r.measured_tok_s,
                          "error": _num(r.error), "failure": r.failure or None,
                          "interval_low_tok_s": _num(r.interval_low_tok_s), "interval_high_tok_s": _num(r.interval_high_tok_s),
                          "interval_basis": r.interval_basis, "covered_loso": _flag(r.covered_loso),
                          "extrapolating": r.extrapolating} for r in df.itertuples()],
              **s, "interval_coverage": coverage,
              "ratios": [{k: (_num(v) if isinstance(v, float) else v) for k, v in r.items()}
                         for r in ratios.to_dict("records")]}
    if as_json:
        print(json.dumps(result))
    else:
        print(render(df, ratios, coverage))
        if out:
            print(f"\nwritten: {Path(out) / 'fidelity.parquet'}, {Path(out) / 'fidelity.png'}")
    return result


def _flag(x):
    return bool(x) if isinstance(x, (bool, np.bool_)) else None


def _num(x: float):
    return float(x) if np.isfinite(x) else None
