"""Round trip: bench files written from simulated runs of a machine with hidden rates (host DRAM
efficiency x 0.8, PCIe x 0.7); calibration recovers them and predicts left-out rows."""
import numpy as np
import pytest
import yaml

from sim.fidelity.bench_input import read_bench
from sim.fidelity.bench_rows import bench_runs
from sim.fidelity.bench_synth import FORMATS, bench_row, measured, write_bench
from sim.fidelity.machine_command import calibrate_bench
from sim.fidelity.machine_file import machine_hardware
from sim.fidelity.machine_fit import priors_and_bounds, simulate

BASE = {"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}
MACHINE = {"cpu": "AMD Ryzen 9 7950X 16-Core Processor", "gpu": "NVIDIA GeForce RTX 4090"}
TESTS = [{"n_cpu_moe": k, "n_gen": 16} for k in (8, 20, 32, 48)] + [{"n_cpu_moe": k, "n_prompt": 512} for k in (24, 48)]


@pytest.fixture(scope="module")
def hidden_rows():
    prior, _ = priors_and_bounds(BASE)
    hidden = {**prior, "cpu_mem_eff": prior["cpu_mem_eff"] * 0.8, "pcie_h2d_gbs": prior["pcie_h2d_gbs"] * 0.7}
    rows = [bench_row("qwen3_30b_a3b", "qwen3moe 30B.A3B Q4_K - Medium", MACHINE, t, 16) for t in TESTS]
    return hidden, measured(rows, "qwen3_30b_a3b", BASE, hidden, 8)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_back_the_same_rows(tmp_path, hidden_rows, fmt):
    _, rows = hidden_rows
    path = write_bench(rows, tmp_path / f"bench.{fmt}", fmt)
    model, quant, runs, notes = bench_runs(read_bench(path), path, model="qwen3_30b_a3b" if fmt == "timing" else None,
                                           quant="q4_k_m" if fmt == "timing" else None)
    assert (model, quant, notes) == ("qwen3_30b_a3b", "q4_k_m", [])
    assert [(r.kind, r.run, r.threads) for r in runs] == [(r.kind, r.run, r.threads) for r in _runs(rows)]
    for got, want in zip(runs, rows):
        assert got.measured_tok_s == pytest.approx(want["avg_ts"], rel=2e-4)   # md/timing print 2 decimals


def _runs(rows):
    return bench_runs([{**r, "_row": i} for i, r in enumerate(rows, 1)], "x")[2]


def test_calibration_recovers_hidden_rates_and_predicts_left_out_rows(tmp_path, hidden_rows, capsys):
    hidden, rows = hidden_rows
    path = write_bench(rows, tmp_path / "bench.json", "json")
    res = calibrate_bench({"bench": str(path), "out": str(tmp_path / "m"), "host": BASE["host"], "link": BASE["link"]})
    got = {k: p["value"] for k, p in res["parameters"].items()}
    assert got["cpu_mem_eff"] == pytest.approx(hidden["cpu_mem_eff"], rel=0.05)
    assert got["pcie_h2d_gbs"] == pytest.approx(hidden["pcie_h2d_gbs"], rel=0.05)
    assert all(abs(r["loo_error"]) < 0.03 for r in res["rows"])
    assert res["loo_median_abs_error"] == pytest.approx(float(np.median([abs(r["loo_error"]) for r in res["rows"]])))
    doc = yaml.safe_load((tmp_path / "m" / "machine.yaml").read_text())
    assert doc["hardware"] == pytest.approx(got) and len(doc["rows"]) == len(rows) and doc["tool_version"]
    # machine=: the same machine, run again from the file, predicts what the fit printed
    hw = machine_hardware(tmp_path / "m" / "machine.yaml")
    run = _runs(rows)[1]
    assert simulate(run, {k: hw[k] for k in ("gpu", "host", "link")}, got) == pytest.approx(res["rows"][1]["predicted_tok_s"])
    assert hw["name"].startswith("rtx4090+desktop_ddr5_2ch+pcie4_x16@calibrated-")
    printed = capsys.readouterr().out
    assert "median |leave-one-row-out error|" in printed and "written:" in printed
