"""Fit one machine's achieved rates on its own llama-bench rows (``python -m sim calibrate bench=FILE``).

The datasheet parts (``gpu=``, ``host=``, ``link=``) with the ``llama_cpp`` runtime profile give
every parameter's prior value; the fit moves only the machine-level rates the rows constrain:

- ``cpu_mem_eff``: achieved share of the host's DRAM bandwidth (CPU-computed experts);
- ``cpu_flops_eff``: achieved share of the host's FP32 FMA rate (dequantising CPU kernels);
- ``pcie_h2d_gbs``: the achieved host-to-device copy rate (prefill copies of CPU-resident weights);
- ``gpu_mem_eff``: achieved share of the GPU's memory bandwidth;
- ``step_overhead_us``: per-forward host overhead (graph build, scheduling).

Each is set as a flat machine field (a ``hardware`` override of the composed spec), so a
calibrated machine applies to every policy and runtime alike. A parameter constrains the rows when
some row's predicted rate moves by more than ``MIN_ELASTICITY`` per unit log change of it, at the
prior or at the first fit (which may move the rows into another limit); the others stay at the prior. The optimizer is :func:`sim.fidelity.calibrate.fit` (MAP: log error
plus a weak prior), with the prior centred on the profile's value instead of the middle of the
range. Bounds: ``step_overhead_us`` and ``cpu_flops_eff`` from conf/runtime/llama_cpp.yaml's ``calibrate:`` block,
``cpu_mem_eff`` as that block's (server) ``cpu_mem_eff`` range, the others in :data:`BOUNDS`.
"""
from __future__ import annotations

import math

import numpy as np

from sim.fidelity.bench_rows import BenchRow
from sim.run.spec import RunSpec
from sim.fidelity.machine_file import FLAT_FIELDS

RUNTIME = "llama_cpp"
PARAMS = FLAT_FIELDS   # the machine rates a fit may move; machine.yaml holds exactly these
# decode GEMV/GEMM on a GPU reaches 40-95 % of peak bandwidth (roofline studies of llama.cpp/vLLM);
# a copy reaches at least a quarter (an x4-wired slot) and at most the link's raw rate (PCI-SIG).
BOUNDS = {"gpu_mem_eff": (0.40, 0.95), "pcie_h2d_gbs": (0.25, 1.0)}   # pcie: x the link's raw_gbs
MIN_ELASTICITY = 0.02


def hw_for(base: dict, row: BenchRow, values: dict) -> dict:
    """The hardware mapping of one row: the parts, its threads, the fitted flat fields."""
    out = {**base, **values}
    if row.threads:
        out["cpu_threads"] = int(row.threads)
    return out


def simulate(row: BenchRow, base: dict, values: dict) -> float:
    """The simulated tok/s of a row (decode for tg, prefill for pp) with ``values`` set."""
    from sim.run.runner import run_one

    kw = {k: v for k, v in row.run.items()}
    res = run_one(RunSpec.of(**kw, hardware=hw_for(base, row, values), runtime=RUNTIME, experiment="calibrate")).row
    return float(res["prefill_tok_s"] if row.kind == "pp" else res["tps"])


def log_errors(rows: list[BenchRow], base: dict, values: dict) -> np.ndarray:
    """``log(predicted / measured)`` per row."""
    out = []
    for r in rows:
        p = simulate(r, base, values)
        out.append(math.log(p / r.measured_tok_s) if np.isfinite(p) and p > 0 else math.log(1e-3))
    return np.asarray(out)


def priors_and_bounds(base: dict) -> tuple[dict, dict]:
    """The profile's value of every parameter on this machine, and its ``[low, high]``."""
    from sim.machine import specs as config
    from sim.fidelity.calibrate import bounds_of
    from sim.machine.compose import load_yaml

    hw = config.hardware(dict(base), runtime=RUNTIME)
    prior = {p: float(getattr(hw, p)) for p in PARAMS}
    rt = bounds_of(RUNTIME)
    link = base["link"] if isinstance(base["link"], dict) else load_yaml("link", base["link"])
    raw = float(link.get("raw_gbs") or link["h2d_gbs"])
    bounds = {"cpu_mem_eff": rt.get("cpu_mem_eff", rt.get("by_kind.server.cpu_mem_eff", (0.2, 0.9))),
              "step_overhead_us": rt.get("step_overhead_us", (100.0, 5000.0)),
              "cpu_flops_eff": rt.get("cpu_flops_eff", (0.05, 0.80)),
              "gpu_mem_eff": BOUNDS["gpu_mem_eff"],
              "pcie_h2d_gbs": (BOUNDS["pcie_h2d_gbs"][0] * raw, BOUNDS["pcie_h2d_gbs"][1] * raw)}
    prior = {k: min(max(v, bounds[k][0] * 1.001), bounds[k][1] * 0.999) for k, v in prior.items()}
    return prior, bounds


def elasticities(rows: list[BenchRow], base: dict, prior: dict, params=PARAMS) -> dict:
    """``max_rows |d log rate / d log p|`` of each of ``params`` at ``prior`` (a 10 % step)."""
    at0 = log_errors(rows, base, prior)
    out = {}
    for p in params:
        moved = log_errors(rows, base, {**prior, p: prior[p] * 1.1})
        out[p] = float(np.max(np.abs(moved - at0)) / math.log(1.1))
    return out


OBS_BENCH = 0.05   # a bench row's log error: llama-bench repeats a test to ~1 %, 5 % leaves room for the model's
MAX_NFEV = 12      # fit iterations (each 1 + one per parameter evaluations); 5-8 reach 0.1 % on exact rows
STEP = 0.02        # finite-difference step on the fit's 0..1 scale (as calibrate.fit's diff_step)


def _scale(names: list[str], bounds: dict) -> tuple[np.ndarray, np.ndarray]:
    lo = np.log([bounds[n][0] for n in names])
    return lo, np.log([bounds[n][1] for n in names]) - lo


def fit_machine(rows: list[BenchRow], base: dict, names: list[str], prior: dict, bounds: dict) -> dict:
    """The MAP values of ``names`` on ``rows`` (the rest at the prior): all parameter values. Each
    row's log error counts as an observation of sd ``OBS_BENCH`` (calibrate.fit weighs its residuals
    as ``OBS_SD``; scaling them by ``OBS_SD / OBS_BENCH`` gives the bench rows their own weight)."""
    from sim.fidelity.calibrate import OBS_SD, fit

    if not names:
        return dict(prior)
    fixed = {k: v for k, v in prior.items() if k not in names}
    resid = lambda v: (OBS_SD / OBS_BENCH) * log_errors(rows, base, {**fixed, **v})
    values, _ = fit(rows, RUNTIME, {n: bounds[n] for n in names}, 0, max_nfev=MAX_NFEV,
                    prior={n: prior[n] for n in names}, resid=resid)
    return {**fixed, **values}


def leave_one_out(rows: list[BenchRow], base: dict, names: list[str], prior: dict, bounds: dict,
                  full: dict) -> list[float]:
    """Each row's tok/s predicted by the fit on the other rows, then simulated: one Newton step of
    the same MAP objective from the full fit (where its gradient is zero) without that row,
    ``dz = (J'J + I / PRIOR_SD^2 - j_i j_i')^-1 j_i e_i`` on the scaled log errors, over the
    parameters not at a bound (exact for a model linear in the log parameters; a full refit per
    row would cost the whole fit again per row)."""
    from sim.fidelity.calibrate import PRIOR_SD

    lo, span = _scale(names, bounds) if names else (np.zeros(0), np.zeros(0))
    z = (np.log([full[n] for n in names]) - lo) / span if names else np.zeros(0)
    free = [k for k in range(len(names)) if 0.001 < z[k] < 0.999]
    if not free:
        return [simulate(r, base, full) for r in rows]
    value = lambda zz: {**full, **dict(zip(names, np.exp(lo + np.clip(zz, 0, 1) * span).tolist()))}
    e0 = log_errors(rows, base, full) / OBS_BENCH
    jac = np.column_stack([(log_errors(rows, base, value(z + STEP * np.eye(len(names))[k])) / OBS_BENCH - e0) / STEP
                           for k in free])
    a = jac.T @ jac + np.eye(len(free)) / PRIOR_SD ** 2
    out = []
    for i, r in enumerate(rows):
        dz = np.zeros(len(names))
        dz[free] = np.linalg.solve(a - np.outer(jac[i], jac[i]), jac[i] * e0[i])
        out.append(simulate(r, base, value(z + dz)))
    return out


def fit_bench_rows(rows: list[BenchRow], base: dict) -> dict:
    """The whole fit of a machine on its rows: priors, bounds, elasticities, the parameters the rows
    constrain (``names``) and the fitted ``values`` (all parameters)."""
    prior, bounds = priors_and_bounds(base)
    elast = elasticities(rows, base, prior)
    names = [p for p in PARAMS if elast[p] > MIN_ELASTICITY]
    values = fit_machine(rows, base, names, prior, bounds)
    rest = [p for p in PARAMS if p not in names]
    again = elasticities(rows, base, values, rest) if rest else {}   # a limit the fit moved into (memory- to compute-bound)
    more = [p for p in rest if again[p] > MIN_ELASTICITY]
    if more:
        names = [p for p in PARAMS if p in names or p in more]
        values = fit_machine(rows, base, names, prior, bounds)
    elast = {p: max(elast[p], again.get(p, 0.0)) for p in PARAMS}
    return {"prior": prior, "bounds": bounds, "elasticity": elast, "names": names, "values": values}
