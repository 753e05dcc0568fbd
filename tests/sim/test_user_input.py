"""Boundary checks of what a user types (QA cases A-C, F, H): exact outcome of each class of mistake."""
import subprocess
import sys

import pytest

from sim.__main__ import precheck
from sim.run.user_input import Rule, UserInputError, check, check_policy_params


@pytest.mark.parametrize("command,args,named", [
    ("run", ["cache_ratio=abc"], "cache_ratio='abc': must be a number in 0..1"),        # B5
    ("run", ["cache_ratio=null"], "cache_ratio=null"),                                  # B6
    ("run", ["gamma=2.5"], "gamma=2.5: must be an integer >= 0"),                       # B9
    ("run", ["gen_tokens=0"], "gen_tokens=0: must be an integer >= 1"),                 # B10
    ("run", ["gen_tokens=64.7"], "gen_tokens=64.7"),                                    # B12
    ("run", ["context=-2000000"], "context=-2000000: must be an integer >= 1"),         # B16
    ("run", ["prompt_tokens=-10"], "prompt_tokens=-10: must be an integer >= 0"),       # B17
    ("sweep", ["n_jobs=0"], "n_jobs=0: must be an integer other than 0"),               # B20
    ("sweep", ["n_jobs=abc"], "n_jobs='abc'"),                                          # B21
    ("sweep", ["n_jobs=1.5"], "n_jobs=1.5"),                                            # B23
    ("sweep", ["resume=no"], "resume='no': must be true or false"),                     # B24
    ("run", ["cache_ration=0.2"], "unknown key 'cache_ration'; did you mean cache_ratio"),    # C4
    ("run", ["+cache_ration=0.2"], "unknown key 'cache_ration'; did you mean cache_ratio"),   # C5
    ("sweep", ["-m", "cache_ratio=0.1,abc,0.17"], "cache_ratio='abc'"),                 # H1/H2: every sweep value
    ("sweep", ["-m", "gamma=4,-1"], "gamma=-1"),
])
def test_bad_values_and_keys_are_refused_before_hydra(command, args, named, tmp_path):
    with pytest.raises(UserInputError) as exc:
        precheck(command, args + [f"out={tmp_path}"])
    assert named in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("out,named", [("afile.txt", "is a file"), ("afile.txt/sub", "cannot create the folder")])
def test_unwritable_out_is_refused(tmp_path, out, named):                               # F1-F4
    (tmp_path / "afile.txt").write_text("x")
    with pytest.raises(UserInputError, match=named):
        precheck("run", [f"out={tmp_path / out}"])


def test_rules_normalise_and_describe_ranges():
    assert check("gamma", 8.0) == 8 and isinstance(check("gamma", 8.0), int)
    assert check("acceptance", None) is None and check("n_jobs", -1) == -1
    with pytest.raises(UserInputError, match=r"stat_decay=0: must be a number in \(0\.\.1\]"):
        check("policy.stat_decay", 0)
    with pytest.raises(UserInputError, match="must be true or false"):
        check("resume", "false")
    assert Rule("int", 0, 10).describe() == "an integer in 0..10"


@pytest.mark.parametrize("params,named", [
    ({"foo": 1}, "policy moespac: unknown key 'foo'"),                                   # C2
    ({"K": -3}, "policy.K=-3: must be an integer >= 1"),                                 # C7
    ({"stat_decay": "abc"}, "policy.stat_decay='abc'"),                                  # C9
    ({"estimator": 3}, "policy.estimator=3: must be a name"),
    ({"stat_decy": 0.9}, "did you mean stat_decay"),
])
def test_policy_parameters_are_checked(params, named):
    with pytest.raises(UserInputError) as exc:
        check_policy_params("moespac", params)
    assert named in str(exc.value)
    with pytest.raises(UserInputError, match="policy.gpu_layers='middle': must be one of first, last or an integer >= 0"):  # C8
        check_policy_params("llamacpp", {"gpu_layers": "middle"})
    assert check_policy_params("moespac", {"K": 4, "calib_gain": 1}) == {"K": 4, "calib_gain": 1}


def sim(*args, cwd=None, **kw):
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, **kw)


def test_speculative_policy_without_draft_is_refused_and_writes_nothing(tmp_path):  # B19
    p = sim("run", "policy=moespac", "draft=none", "gen_tokens=16", f"out={tmp_path}")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "draft=none: policy moespac is speculative (gamma=8)" in p.stderr
    assert not (tmp_path / "results.parquet").exists() and not (tmp_path / "config.yaml").exists()
    p = sim("run", "policy=moespac", "draft=none", "gamma=0", "gen_tokens=16", f"out={tmp_path}")
    assert p.returncode == 0, p.stderr     # gamma=0: the same policy without SD needs no draft


def test_a_failed_multirun_job_is_named_and_the_others_write(tmp_path):             # H1/H2 (after pre-checks)
    p = sim("sweep", "-m", "experiment.policies=[llamacpp]", "experiment.workloads=[gsm8k]", "gen_tokens=16",
            "n_jobs=1", "cache_ratio=0.1,0.9", f"out={tmp_path}")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "1 job(s) of the multirun failed" in p.stderr and "cache_ratio=0.9 does not fit" in p.stderr
    written = sorted(f.parent.name for f in tmp_path.rglob("results.parquet"))
    assert written == ["cache_ratio=0.1,experiment.policies=[llamacpp],experiment.workloads=[gsm8k],"
                       "gen_tokens=16,n_jobs=1"]                                        # H3: no out= in the name


def test_a_broken_runtime_file_is_one_line_before_hydra(tmp_path, monkeypatch):
    # conf/runtime/*.yaml are the files `calibrate` rewrites (and users edit): a duplicate key there
    # is refused with the file and line before Hydra composes (which would print a traceback)
    import shutil

    import sim.paths
    from sim.machine.specs import ConfigError

    conf = tmp_path / "conf"
    shutil.copytree(sim.paths.CONF_DIR, conf)
    with open(conf / "runtime" / "vllm.yaml", "a") as f:
        f.write("name: again\n")
    monkeypatch.setattr(sim.paths, "CONF_DIR", conf)
    with pytest.raises(ConfigError, match=r"vllm\.yaml line \d+: found duplicate key") as err:
        precheck("run", ["runtime=vllm", f"out={tmp_path / 'o'}"])
    assert "\n" not in str(err.value)


def test_gpu_layers_takes_an_end_or_a_layer_count():
    """``policy.gpu_layers`` is ``first``/``last`` or llama.cpp's ``-ngl N`` (the README's command)."""
    assert check_policy_params("llamacpp", {"gpu_layers": 16}) == {"gpu_layers": 16}
    assert check_policy_params("llamacpp", {"gpu_layers": "first"}) == {"gpu_layers": "first"}
    with pytest.raises(UserInputError, match="policy.gpu_layers=-1: must be an integer >= 0"):
        check_policy_params("llamacpp", {"gpu_layers": -1})
