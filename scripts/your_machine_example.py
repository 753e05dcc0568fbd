"""The worked example of docs/your_machine.md: calibrate a machine on 3 published rows, predict the rest.

Data: docs/data/pipeshard_rtx5090_qwen3-30b.log and ..._qwen3-235b.log, two published llama.cpp
``-ngl`` sweeps (10 settings each) on one machine (RTX 5090, 16-core EPYC, PCIe 5.0; source in
the files). For each sweep: the uncalibrated prediction (the datasheet parts with the llama_cpp
profile), then the machine fitted on 3 tg rows (lowest, middle, highest ``-ngl``) predicting the
other 7; then each model's 3-row fit predicting the other model's 10 rows (same machine). Prints
the errors (markdown) and writes docs/your_machine.png.

    python scripts/your_machine_example.py [--out docs/your_machine.png]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from sim.fidelity.bench_input import read_bench  # noqa: E402
from sim.fidelity.bench_rows import bench_runs  # noqa: E402
from sim.fidelity.machine_fit import fit_bench_rows, priors_and_bounds, simulate  # noqa: E402

BASE = {"gpu": "rtx5090", "host": "epyc_16c_ddr5", "link": "pcie5_x16"}
SWEEPS = {"qwen3_30b_a3b": "pipeshard_rtx5090_qwen3-30b.log", "qwen3_235b_a22b": "pipeshard_rtx5090_qwen3-235b.log"}


def load(model: str) -> list:
    """The tg rows of one sweep."""
    path = ROOT / "docs" / "data" / SWEEPS[model]
    return bench_runs(read_bench(path), path, model=model, tests="tg")[2]


def ape(pred: list[float], rows: list) -> np.ndarray:
    """Absolute % errors."""
    return np.abs(np.asarray(pred) / np.asarray([r.measured_tok_s for r in rows]) - 1) * 100


def main() -> None:
    """Fit, predict, print, plot."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "your_machine.png"))
    a = ap.parse_args()
    prior, _ = priors_and_bounds(BASE)
    sweeps, fits, lines = {m: load(m) for m in SWEEPS}, {}, []
    for model, rows in sweeps.items():
        train = [rows[0], rows[len(rows) // 2], rows[-1]]
        fits[model] = fit_bench_rows(train, BASE)
        test = [r for r in rows if r not in train]
        base_err = ape([simulate(r, BASE, prior) for r in rows], rows)
        pred = ape([simulate(r, BASE, fits[model]["values"]) for r in test], test)
        lines.append(f"| {model} | {len(rows)} | {np.median(base_err):.1f}% | "
                     f"{', '.join(str(r.config['n_gpu_layers']) for r in train)} | {len(test)} | "
                     f"{np.median(pred):.1f}% | {pred.max():.1f}% |")
    print("| model | tg rows | uncalibrated median error | calibrated on -ngl | predicted rows | median error | max error |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    for src, dst in (("qwen3_30b_a3b", "qwen3_235b_a22b"), ("qwen3_235b_a22b", "qwen3_30b_a3b")):
        err = ape([simulate(r, BASE, fits[src]["values"]) for r in sweeps[dst]], sweeps[dst])
        print(f"cross-model: fitted on 3 {src} rows, {dst}'s {len(err)} rows: median {np.median(err):.1f}%, "
              f"max {err.max():.1f}%")
    for model, f in fits.items():
        print(f"{model} fit: " + ", ".join(f"{k} {prior[k]:.4g} -> {v:.4g}" + ("" if k in f["names"] else " (kept)")
                                           for k, v in f["values"].items()))
    plot(sweeps, fits, prior, a.out)
    print(f"figure: {a.out}")


def plot(sweeps: dict, fits: dict, prior: dict, out: str) -> None:
    """Measured, uncalibrated and calibrated-on-3 tok/s against -ngl, one panel per model."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from traces.atomic import save_png

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (model, rows) in zip(axes, sweeps.items()):
        ngl = [int(r.config["n_gpu_layers"]) for r in rows]
        train = {rows[0].row, rows[len(rows) // 2].row, rows[-1].row}
        other = [m for m in sweeps if m != model][0]
        ax.plot(ngl, [r.measured_tok_s for r in rows], "ko", label="measured (published)")
        ax.plot(ngl, [simulate(r, BASE, prior) for r in rows], "C7--", label="uncalibrated")
        ax.plot(ngl, [simulate(r, BASE, fits[model]["values"]) for r in rows], "C0-", label="calibrated on 3 rows")
        ax.plot(ngl, [simulate(r, BASE, fits[other]["values"]) for r in rows], "C1:", label=f"calibrated on {other}")
        ax.plot([n for n, r in zip(ngl, rows) if r.row in train],
                [r.measured_tok_s for r in rows if r.row in train], "o", mfc="none", mec="C0", ms=12,
                label="calibration rows")
        ax.set(yscale="log", xlabel="-ngl (layers on the GPU)", ylabel="decode tok/s", title=f"{model}, RTX 5090")
        ax.legend(fontsize=7)
    save_png(fig, out, dpi=110)


if __name__ == "__main__":
    main()
