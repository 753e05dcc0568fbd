"""Sweeps on a Ray cluster (extra ``cluster``): the same rows as a local run."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from sim.run import parallel
from sim.machine.specs import ConfigError
from sim.run.sweep import execute, expand

BASE = {"cache_ratio": 0.17, "gamma": 4, "gen_tokens": 16, "seed": 0, "prompt_tokens": 256, "context": 4096,
        "acceptance": None, "hardware": "rtx4090_pcie4", "model": "qwen3_30b_a3b", "draft": "qwen3_4b_fp8",
        "experiment": "ray_test"}


def _rows(df: pd.DataFrame) -> pd.DataFrame:
    df = df.drop(columns=["sim_wall_s"]).sort_values(["policy", "workload"]).reset_index(drop=True)
    return df[sorted(df.columns)]


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e .[cluster])")
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_sweep_rows_equal_the_local_run(ray_cluster, tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "RAY_TIMEOUT_S", 60.0)   # a stuck task fails the test, never hangs it
    runs = expand(BASE, ["llamacpp_sd", "moespac", "oracle"], ["gsm8k", "qa"], {})
    local = execute(runs, tmp_path / "local", n_jobs=1)
    remote = execute(runs, tmp_path / "ray", n_jobs=2, backend="ray")
    assert len(remote) == 6
    pd.testing.assert_frame_equal(_rows(remote), _rows(local))
    # resume holds on Ray too: nothing left to run, the file is untouched
    mtime = (tmp_path / "ray" / "results.parquet").stat().st_mtime_ns
    again = execute(runs, tmp_path / "ray", n_jobs=2, backend="ray")
    assert (tmp_path / "ray" / "results.parquet").stat().st_mtime_ns == mtime and len(again) == 6


def test_a_failing_run_names_itself(ray_cluster, monkeypatch):
    monkeypatch.setattr(parallel, "RAY_TIMEOUT_S", 60.0)
    with pytest.raises(RuntimeError, match=r"run \{'bad': 1\} failed on Ray"):
        list(parallel.run_all(_fails, [{"bad": 1}], n_jobs=2, backend="ray"))


def _fails(item):
    raise ValueError(f"bad run {item}")


def test_backend_errors_name_the_key():
    with pytest.raises(ConfigError, match="backend: 'dask' is not one of loky, ray"):
        parallel.check_backend("dask", None)
    with pytest.raises(ConfigError, match="ray_address: 'auto' needs backend=ray"):
        parallel.check_backend("loky", "auto")


def test_a_worker_running_other_code_stops_the_sweep_before_writing(tmp_path, monkeypatch):
    """A node on another commit returns rows whose run_id resume cannot match: refused, named, not written."""
    import sim.run.identity as identity
    import sim.run.sweep as sweep

    real_run = sweep._run

    def on_other_code(args):
        monkeypatch.setattr(identity, "code_version", lambda: "0123456789ab")
        return real_run(args)

    monkeypatch.setattr(sweep, "_run", on_other_code)
    runs = expand(BASE, ["llamacpp"], ["gsm8k"], {})
    with pytest.raises(RuntimeError, match=r"code_version '0123456789ab' differs from this checkout's"):
        execute(runs, tmp_path, n_jobs=1)
    assert not (tmp_path / "results.parquet").exists()
