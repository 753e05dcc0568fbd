"""Wall time of ``python -m sim calibrate bench=FILE`` on 20 llama-bench rows (target: <= 30 s).

Writes a 20-row bench file (``-o json``) from simulated runs of a machine with hidden rates
(rtx4090 + desktop_ddr5_2ch + pcie4_x16, host DRAM efficiency x 0.8, PCIe x 0.7): 16 tg rows over
``--n-cpu-moe`` 0..48 and ``-ngl`` 12..36, 4 pp512 rows; then times the whole calibration (parse,
sensitivity check, MAP fit, leave-one-row-out) and prints the recovered rates.

    python benchmarks/bench_calibrate_machine.py [--rows 20]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from sim.fidelity.bench_synth import bench_row, measured, write_bench  # noqa: E402
from sim.fidelity.machine_command import calibrate_bench  # noqa: E402
from sim.fidelity.machine_fit import priors_and_bounds  # noqa: E402

BASE = {"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}
MACHINE = {"cpu": "AMD Ryzen 9 7950X 16-Core Processor", "gpu": "NVIDIA GeForce RTX 4090"}


def tests(n: int) -> list[dict]:
    """``n`` llama-bench test settings: a fifth pp512 rows, the rest tg128 over placements."""
    n_pp = max(1, n // 5)
    tg = [{"n_cpu_moe": 4 + 4 * i, "n_gen": 128} for i in range(12)] + \
         [{"n_gpu_layers": g, "n_gen": 128} for g in (12, 20, 28, 36)]
    pp = [{"n_cpu_moe": k, "n_prompt": 512} for k in (12, 24, 36, 48)]
    return (tg * 4)[:n - n_pp] + (pp * 4)[:n_pp]


def main() -> None:
    """Write the bench file, calibrate, print the time and the rates."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20)
    a = ap.parse_args()
    prior, _ = priors_and_bounds(BASE)
    hidden = {**prior, "cpu_mem_eff": prior["cpu_mem_eff"] * 0.8, "pcie_h2d_gbs": prior["pcie_h2d_gbs"] * 0.7}
    rows = [bench_row("qwen3_30b_a3b", "qwen3moe 30B.A3B Q4_K - Medium", MACHINE, t, 16) for t in tests(a.rows)]
    rows = measured(rows, "qwen3_30b_a3b", BASE, hidden, 8)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_bench(rows, Path(tmp) / "bench.json", "json")
        t0, c0 = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):      # the per-row table is not the benchmark's
            res = calibrate_bench({"bench": str(path), "out": tmp, "host": BASE["host"], "link": BASE["link"]})
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\n{len(rows)} rows calibrated in {wall:.1f} s wall, {cpu:.1f} s CPU (target <= 30 s; wall grows with "
          "the machine's other load, CPU time does not)")
    for k, p in res["parameters"].items():
        print(f"  {k:<17} hidden {hidden[k]:<9.4g} fitted {p['value']:<9.4g} ({100 * (p['value'] / hidden[k] - 1):+.1f}%)")
    print(f"  median |leave-one-row-out error| {100 * res['loo_median_abs_error']:.2f}%")


if __name__ == "__main__":
    main()
