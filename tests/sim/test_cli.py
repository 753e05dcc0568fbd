"""The ``python -m sim`` commands end to end (subprocesses, tiny settings)."""
import subprocess
import sys

import pandas as pd
import pytest

from sim.run.results import REQUIRED


def sim(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_run_writes_row_config_and_timeline(tmp_path):
    p = sim("run", "policy=llamacpp_sd", "workload=humaneval", "gen_tokens=32", "timeline=true", f"out={tmp_path}")
    assert p.returncode == 0, p.stderr
    assert "tps" in p.stdout and "hit_rate" in p.stdout
    assert "predicted: " in p.stdout and "tok/s (80%: " in p.stdout   # the stored residuals' interval
    df = pd.read_parquet(tmp_path / "results.parquet")
    assert len(df) == 1 and set(REQUIRED) <= set(df.columns)
    assert df.policy[0] == "llamacpp_sd" and df.gamma[0] == 8 and df.gen_tokens[0] == 32
    assert (tmp_path / "config.yaml").exists()
    assert (tmp_path / "timeline.json").stat().st_size > 100 and (tmp_path / "timeline.png").exists()


def test_unknown_names_list_the_valid_ones(tmp_path):
    p = sim("run", "policy=nope", f"out={tmp_path}")  # Hydra lists a group's options
    assert p.returncode != 0 and "Available options in 'policy'" in p.stderr and "moespac" in p.stderr
    p = sim("run", "hardware=rtx9090", f"out={tmp_path}")
    assert p.returncode != 0 and "rtx4090_pcie4" in p.stderr
    p = sim("sweep", "experiment.policies=[nope]", f"out={tmp_path}")  # names inside an experiment
    assert p.returncode != 0 and "unknown policy 'nope'; valid:" in p.stderr


def test_cache_ratio_that_does_not_fit_fails_before_simulating(tmp_path):
    p = sim("run", "policy=moespac", "cache_ratio=0.5", f"out={tmp_path}")
    assert p.returncode != 0 and "largest ratio that fits" in p.stderr
    assert not (tmp_path / "results.parquet").exists()


def _sweep_args(tmp_path):
    return ["sweep", "cache_ratio=0.17", "gen_tokens=24", "n_jobs=1", f"out={tmp_path}",
            "experiment.policies=[llamacpp,llamacpp_sd]", "experiment.workloads=[gsm8k,qa]"]


def test_sweep_prints_table_and_resumes(tmp_path):
    p = sim(*_sweep_args(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "tokens per second" in p.stdout and "fastest policy llamacpp" in p.stdout
    df = pd.read_parquet(tmp_path / "results.parquet")
    assert sorted(df.policy.unique()) == ["llamacpp", "llamacpp_sd"] and len(df) == 4
    mtime = (tmp_path / "results.parquet").stat().st_mtime_ns
    p = sim(*_sweep_args(tmp_path))  # everything done: nothing re-run, file untouched
    assert p.returncode == 0 and (tmp_path / "results.parquet").stat().st_mtime_ns == mtime


@pytest.mark.slow
def test_multirun_with_joblib_launcher(tmp_path):
    args = _sweep_args(tmp_path)
    args[1] = "cache_ratio=0.1,0.17"
    p = sim(args[0], "-m", *args[1:], "experiment.workloads=[gsm8k]", "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2")
    assert p.returncode == 0, p.stderr
    files = sorted(tmp_path.rglob("results.parquet"))
    assert len(files) == 2
    ratios = sorted(pd.read_parquet(f).cache_ratio.iloc[0] for f in files)
    assert ratios == [0.1, 0.17]


def test_equal_vram_gives_an_autoregressive_run_the_drafts_vram(tmp_path):
    """``equal_vram=true`` on the command line: the AR policy's slots grow by what the draft would use."""
    rows = {}
    for flag in ("false", "true"):
        p = sim("run", "policy=hybrimoe", "gen_tokens=8", f"equal_vram={flag}", f"out={tmp_path / flag}")
        assert p.returncode == 0, p.stderr
        rows[flag] = pd.read_parquet(tmp_path / flag / "results.parquet").iloc[0]
    assert rows["true"].n_slots > rows["false"].n_slots and rows["true"].run_id != rows["false"].run_id
    p = sim("run", "policy=hybrimoe", "equal_vram=maybe", f"out={tmp_path / 'bad'}")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "equal_vram" in p.stderr


def test_acceptance_model_on_the_command_line_shapes_the_accepted_counts(tmp_path):
    """``acceptance_model.p_min=0.9`` (llama.cpp's early stop) cuts drafts: fewer accepted per step than
    the plain model, another run identity, and the row carries the setting; the default leaves ``{}``."""
    rows = {}
    for name, extra in (("plain", ()), ("pmin", ("acceptance_model.p_min=0.9",))):
        p = sim("run", "policy=llamacpp_sd", "gen_tokens=32", *extra, f"out={tmp_path / name}")
        assert p.returncode == 0, p.stderr
        rows[name] = pd.read_parquet(tmp_path / name / "results.parquet").iloc[0]
    assert rows["pmin"].mean_accepted < rows["plain"].mean_accepted and rows["pmin"].run_id != rows["plain"].run_id
    assert rows["plain"].acceptance_model == "{}" and "p_min" in rows["pmin"].acceptance_model


@pytest.mark.parametrize("arg, named", [("acceptance_model.p_min=1.5", "acceptance_model.p_min=1.5"),
                                        ("acceptance_model.pmin=0.5", "p_min"),
                                        ("policy.KK=3", "policy=moespac: unknown key 'KK'")])
def test_a_bad_nested_key_is_one_line(tmp_path, arg, named):
    """A wrong value or a misspelt field of a mapping or a preset: one ``error:`` line, status 2."""
    p = sim("run", "policy=moespac", arg, f"out={tmp_path}")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and named in p.stderr, p.stderr
