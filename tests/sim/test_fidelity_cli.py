"""python -m sim validate / calibrate: points files, the report, JSON output, input errors, and a
fit that recovers a known runtime parameter."""
import json
import math
import os
import subprocess
import sys

import pytest

from sim.machine.specs import ConfigError
from sim.fidelity import calibrate as C
from sim.fidelity.calibrate import fit, patch_for
from sim.fidelity.points import Point, load_points, run_kwargs
from sim.fidelity.validate import predict

RUN = {"policy": "llamacpp", "policy.gpu_layers": 20, "model": "qwen3_30b_a3b", "quant": "q4_0", "gpu": "rtx5090",
       "host": "epyc_ddr5_12ch", "host.cores": 16, "link": "pcie5_x16", "prompt_tokens": 128, "context": 512}


def _write(tmp_path, text):
    p = tmp_path / "pts.yaml"
    p.write_text(text)
    return p


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, env=env, timeout=300)


def test_run_keys_become_run_one_arguments():
    kw = run_kwargs({**RUN, "runtime.cpu_mem_eff": 0.5, "hardware.cpu_threads": 8}, gen_tokens=16)
    assert kw["policy_args"] == {"gpu_layers": 20} and kw["gen_tokens"] == 16
    assert kw["hardware"]["host"]["cores"] == 16 and kw["hardware"]["host"]["mem_channels"] == 12
    assert kw["hardware"]["cpu_threads"] == 8 and kw["runtime"] == {"cpu_mem_eff": 0.5, "name": "policy"}


def test_points_file_errors_name_the_point_and_key(tmp_path):
    with pytest.raises(ConfigError, match=r"points\[0\] \(X1\).*unknown run key\(s\) \['bogus'\]"):
        load_points(_write(tmp_path, "points:\n  - {id: X1, measured_tok_s: 3, source: s, grade: A, run: {bogus: 1}}\n"))
    with pytest.raises(ConfigError, match="measured_tok_s must be a number > 0"):
        load_points(_write(tmp_path, "points:\n  - {id: X1, measured_tok_s: 0, source: s, grade: A, run: {}}\n"))


def test_validate_json_reports_every_point_and_the_ratio(tmp_path):
    pts = _write(tmp_path, f"""points:
  - {{id: A, measured_tok_s: 25.0, source: s1, grade: A, run: {json.dumps(RUN)}}}
  - {{id: B, measured_tok_s: 20.0, source: s2, grade: A, run: {json.dumps({**RUN, 'policy.gpu_layers': 0})}}}
ratios:
  - {{id: R, num: A, den: B}}
""")
    out = _cli("validate", f"points={pts}", f"out={tmp_path / 'o'}", "json=true", "gen_tokens=8", "n_jobs=1")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    a, b = res["points"]
    assert a["error"] == pytest.approx(a["predicted_tok_s"] / 25.0 - 1)
    assert a["interval_low_tok_s"] < a["predicted_tok_s"] < a["interval_high_tok_s"]    # conf/validation store
    assert "no training point on host" in a["interval_basis"] and "host epyc_ddr5_12ch" in a["extrapolating"]
    assert res["median_ape"] == pytest.approx(100 * (abs(a["error"]) + abs(b["error"])) / 2)
    assert res["ratios"][0]["same_direction"] is (a["predicted_tok_s"] > b["predicted_tok_s"])
    assert (tmp_path / "o" / "fidelity.parquet").exists() and (tmp_path / "o" / "fidelity.png").exists()


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    out = _cli("validate", "pointz=x")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "pointz=x" in out.stderr
    out = _cli("validate", f"points={tmp_path / 'none.yaml'}")
    assert out.returncode == 2 and "no such file" in out.stderr and "Traceback" not in out.stderr


def _truth_point(overhead_us: float) -> Point:
    """A "measurement" that is the simulator itself at ``step_overhead_us=overhead_us`` (every layer
    on the GPU: the per-forward overhead is a large share of the token time, so the point pins it)."""
    run = {**RUN, "policy.gpu_layers": 49, "runtime": "llama_cpp"}
    truth = predict(Point("t", 1.0, "s", "A", run), 8, patch_for("llama_cpp", {"step_overhead_us": overhead_us}))
    return Point("t", truth["predicted_tok_s"], "s", "A", run)


def test_fit_recovers_a_per_forward_overhead_at_the_middle_of_its_range():
    # truth at the geometric middle of [100, 5000]: data and prior agree, the fit lands on it
    mid = math.sqrt(100.0 * 5000.0)
    values, res = fit([_truth_point(mid)], "llama_cpp", {"step_overhead_us": (100.0, 5000.0)}, 8)
    assert values["step_overhead_us"] == pytest.approx(mid, rel=0.01)
    assert abs(res[0]) < math.log(1.005)


def test_fit_is_the_minimum_of_log_error_plus_the_prior():
    # truth off the middle: the fit is the minimum of r^2 + (OBS_SD/PRIOR_SD)^2 (z - 1/2)^2 over z,
    # z the log-scaled position in the range; checked against a grid of that objective
    lo, hi = 100.0, 5000.0
    pt = _truth_point(2000.0)
    values, res = fit([pt], "llama_cpp", {"step_overhead_us": (lo, hi)}, 8)
    w = C.OBS_SD / C.PRIOR_SD

    def objective(z):
        r = C.residuals([pt], "llama_cpp", {"step_overhead_us": lo * (hi / lo) ** z}, 8)[0]
        return r * r + (w * (z - 0.5)) ** 2

    z_fit = math.log(values["step_overhead_us"] / lo) / math.log(hi / lo)
    grid = [z_fit + d for d in (-0.1, -0.05, -0.02, 0.02, 0.05, 0.1)] + [math.log(2000.0 / lo) / math.log(hi / lo), 0.5]
    assert objective(z_fit) <= min(objective(z) for z in grid) + 1e-9
    assert math.sqrt(lo * hi) < values["step_overhead_us"] < 2000.0      # pulled toward the middle, not past it
    assert abs(res[0]) < math.log(1.10)


def test_a_parameter_no_point_constrains_stays_at_the_middle_of_its_range():
    # a mobile-only draft overhead cannot move an AR run on a server host: it stays at sqrt(lo * hi)
    bounds = {"step_overhead_us": (100.0, 5000.0), "by_kind.mobile.draft_overhead_us": (50.0, 800.0)}
    values, _ = fit([_truth_point(1500.0)], "llama_cpp", bounds, 8)
    assert values["by_kind.mobile.draft_overhead_us"] == pytest.approx(200.0, rel=1e-9)
    assert values["step_overhead_us"] == pytest.approx(1500.0, rel=0.15)


def test_calibration_order_puts_parents_before_children():
    order = C.calibration_order()
    assert order.index("ktransformers") < order.index("hybrimoe")          # hybrimoe inherits its CPU values
    assert order.index("hf_transformers") < order.index("moe_infinity")
    assert "custom_cuda" not in order and "vllm" not in order               # nothing to fit


def test_calibrate_all_pools_the_held_out_points_of_every_runtime(tmp_path):
    run = {**RUN, "policy.gpu_layers": 49, "runtime": "hybrimoe"}
    pts = _write(tmp_path, f"""points:
  - {{id: A, measured_tok_s: 100.0, source: s1, grade: A, run: {json.dumps(run)}}}
  - {{id: B, measured_tok_s: 90.0, source: s2, grade: A, run: {json.dumps(run)}}}
""")
    out = _cli("calibrate", f"points={pts}", "runtime=all", "write=false", "min_points=2", "gen_tokens=8", "n_jobs=1")
    assert out.returncode == 0, out.stderr
    assert "runtime llama_cpp: 0 points" in out.stdout and "runtime hybrimoe: 2 points" in out.stdout
    assert "LOSO over every runtime: median |error|" in out.stdout and "over 2 held-out points" in out.stdout
    assert "written:" not in out.stdout
