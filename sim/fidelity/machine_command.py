"""``python -m sim calibrate bench=FILE [model=PRESET] [gpu=.. host=.. link=..] out=DIR [json=true]``.

Reads the bench file (:mod:`sim.fidelity.bench_input`), maps its rows to simulated llama.cpp runs
(:mod:`sim.fidelity.bench_rows`), fits the machine's rates (:mod:`sim.fidelity.machine_fit`),
prints each row's measured, fitted and leave-one-row-out tok/s and the median leave-one-row-out
error, and writes ``DIR/machine.yaml`` (atomically; the rows, the fitted values, their priors and
bounds, residuals, date, tool version), which ``machine=DIR/machine.yaml`` then applies to
``sim run``, ``sim sweep``, ``sim plan``, ``sim breakeven`` and ``sim crossover``. A bad file is one
error line naming the row and the field, and nothing is written.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path

import numpy as np

from sim.machine.specs import ConfigError

MACHINE_FILE = "machine.yaml"


def guess_gpu(rows: list[dict]) -> str | None:
    """The conf/gpu preset whose ``gpu:`` name is in the rows' ``gpu_info`` (None: no single match)."""
    from sim.paths import CONF_DIR
    from sim.machine.compose import load_yaml

    info = " ".join(str(r.get("gpu_info", "")) for r in rows[:1]).lower()
    if not info:
        return None
    hits = [p.stem for p in sorted((CONF_DIR / "gpu").glob("*.yaml"))
            if str(load_yaml("gpu", p.stem).get("gpu", "")).lower() in info]
    return max(hits, key=lambda n: len(str(load_yaml("gpu", n)["gpu"]))) if hits else None


def parts(opts: dict, rows: list[dict]) -> tuple[dict, list[str]]:
    """The gpu/host/link of the bench: given, the gpu from ``gpu_info``, else rtx4090_pcie4's (noted)."""
    from sim.machine.compose import composition

    default, notes = composition("rtx4090_pcie4"), []
    gpu = opts.get("gpu") or guess_gpu(rows)
    if not opts.get("gpu") and gpu:
        notes.append(f"gpu={gpu} from gpu_info")
    out = {"gpu": gpu, "host": opts.get("host"), "link": opts.get("link")}
    for k in out:
        if not out[k]:
            out[k] = default[k]
            notes.append(f"{k}={default[k]} assumed (pass {k}= for your machine)")
    return out, notes


def calibrate_bench(opts: dict) -> dict:
    """Run the whole command; returns the JSON object it prints with ``json=true``."""
    from sim.fidelity.bench_input import read_bench
    from sim.fidelity.bench_rows import bench_runs
    from sim.fidelity.machine_fit import fit_bench_rows, leave_one_out, simulate
    from traces.atomic import check_writable

    path = str(opts["bench"])
    if not opts.get("out"):
        raise ConfigError("calibrate bench=FILE needs out=DIR (machine.yaml is written there, never into conf/)")
    from sim.paths import CONF_DIR

    if Path(str(opts["out"])).resolve().is_relative_to(CONF_DIR.resolve()):
        raise ConfigError(f"out={opts['out']}: a calibrated machine is yours, not a preset; write it outside conf/")
    out_dir = check_writable(Path(str(opts["out"])) / MACHINE_FILE, key="out").parent
    raw = read_bench(path)
    model, quant, rows, notes = bench_runs(raw, path, opts.get("model") or None, int(opts.get("bench_gen_tokens", 8)),
                                       opts.get("quant") or None, str(opts.get("tests", "all")))
    base, more = parts(opts, raw)
    notes = more + notes
    if len(rows) < 2:
        raise ConfigError(f"bench={path}: {len(rows)} usable row(s); calibration needs 2 or more")
    f = fit_bench_rows(rows, base)
    prior, bounds, elast, names, values = (f[k] for k in ("prior", "bounds", "elasticity", "names", "values"))
    fitted = [simulate(r, base, values) for r in rows]
    loo = leave_one_out(rows, base, names, prior, bounds, values) if opts.get("loo", True) else [math.nan] * len(rows)
    result = summary(rows, fitted, loo, values, prior, bounds, names, elast)
    result.update(bench=path, model=model, quant=quant, machine=base, notes=notes)
    write_machine(out_dir / MACHINE_FILE, result)
    result["written"] = str(out_dir / MACHINE_FILE)
    print(json.dumps(result) if opts.get("json") else render(result))
    return result


def summary(rows, fitted, loo, values, prior, bounds, names, elast) -> dict:
    """The per-row table and the fitted parameters as plain data."""
    def err(p, m):
        return None if not np.isfinite(p) else p / m - 1.0
    out_rows = [{"row": r.row, "kind": r.kind, "config": r.config, "measured_tok_s": r.measured_tok_s,
                 "predicted_tok_s": p, "loo_tok_s": None if not np.isfinite(l) else l,
                 "error": err(p, r.measured_tok_s), "loo_error": err(l, r.measured_tok_s)}
                for r, p, l in zip(rows, fitted, loo)]
    loo_ape = [abs(x["loo_error"]) for x in out_rows if x["loo_error"] is not None]
    params = {k: {"value": values[k], "prior": prior[k], "bounds": list(bounds[k]), "fitted": k in names,
                  "elasticity": round(elast[k], 4)} for k in values}
    return {"rows": out_rows, "parameters": params,
            "median_abs_error": float(np.median([abs(x["error"]) for x in out_rows])),
            "loo_median_abs_error": float(np.median(loo_ape)) if loo_ape else None}


def render(res: dict) -> str:
    """The text report."""
    lines = [f"bench {res['bench']}: {len(res['rows'])} rows, model {res['model']} ({res['quant']}), "
             f"machine {res['machine']['gpu']} + {res['machine']['host']} + {res['machine']['link']}"]
    for k, p in res["parameters"].items():
        how = f"fitted, bounds {p['bounds']}" if p["fitted"] else "kept (the rows do not constrain it)"
        lines.append(f"  {k:<17} {p['prior']:>9.4g} -> {p['value']:<9.4g} {how}")
    lines.append(f"{'row':>4} {'test':<4} {'measured':>9} {'fitted':>9} {'err%':>6} {'loo':>9} {'loo err%':>8}")
    for r in res["rows"]:
        loo = f"{r['loo_tok_s']:9.2f} {100 * r['loo_error']:+8.1f}" if r["loo_tok_s"] is not None else f"{'-':>9}"
        lines.append(f"{r['row']:>4} {r['kind']:<4} {r['measured_tok_s']:9.2f} {r['predicted_tok_s']:9.2f} "
                     f"{100 * r['error']:+6.1f} {loo}")
    if res["loo_median_abs_error"] is not None:
        lines.append(f"median |leave-one-row-out error| {100 * res['loo_median_abs_error']:.1f}%")
    lines += [f"note: {n}" for n in res["notes"]] + [f"written: {res['written']}"]
    return "\n".join(lines)


def write_machine(path: Path, res: dict) -> None:
    """``machine.yaml``: the parts, the fitted flat fields, the rows and residuals, date and version."""
    import yaml

    from sim.run.identity import code_version
    from traces.atomic import atomic_write_bytes

    doc = {"kind": "calibrated_machine", "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "tool_version": code_version(), "bench": res["bench"], "model": res["model"], "quant": res["quant"],
           "runtime_prior": "llama_cpp", **{k: res["machine"][k] for k in ("gpu", "host", "link")},
           "hardware": {k: float(p["value"]) for k, p in res["parameters"].items()},
           "parameters": res["parameters"], "rows": res["rows"],
           "median_abs_error": res["median_abs_error"], "loo_median_abs_error": res["loo_median_abs_error"],
           "notes": res["notes"]}
    text = "# python -m sim calibrate bench=... : a calibrated machine; use it with machine=THIS_FILE\n"
    text += yaml.safe_dump(json.loads(json.dumps(doc)), sort_keys=False)
    atomic_write_bytes(path, lambda f: f.write(text.encode()))
