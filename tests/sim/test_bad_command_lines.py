"""Command-line values that used to be taken silently the wrong way: breakeven's gamma_min=0 and
non-speculative sd_policies, ``write=maybe``, Hydra callbacks, and outputs found unwritable only
after the simulating."""
import pytest

from sim.__main__ import precheck
from sim.commands.fidelity import main as fidelity_main, options
from sim.policies.registry import policy_names
from sim.speculation.breakeven import Search, breakeven
from sim.commands.breakeven import _refuse_wrong_kind
from sim.run.user_input import UserInputError, check

NAMES = sorted(policy_names())


def test_gamma_min_zero_is_refused():
    """gamma 0 is autoregressive decoding: with it, the "best gamma" of a speculative policy could be
    no speculation at all, and the command concluded that speculation pays everywhere."""
    with pytest.raises(UserInputError, match=r"^gamma_min=0: must be an integer in 1\.\.12$"):
        check("gamma_min", 0)
    assert check("gamma_min", 1) == 1
    with pytest.raises(ValueError, match="gamma_min=0: must be an integer in 1..12"):
        breakeven({}, ["llamacpp"], ["llamacpp_sd"], [0.5], Search(gamma_min=0), progress=False)   # before any run


def test_breakeven_policies_must_be_of_their_kind():
    with pytest.raises(UserInputError) as exc:
        _refuse_wrong_kind(["hybrimoe"], ["llamacpp"], NAMES)
    speculative = [n for n in NAMES if n in ("adaspec", "heuristic_oracle", "llamacpp_sd", "moespac", "sp_moe", "spac_auto")
                   or n.startswith("moespac_") and n != "moespac_ar"]
    assert str(exc.value) == "sd_policies: 'llamacpp' is not speculative; speculative policies: " + ", ".join(speculative)
    with pytest.raises(UserInputError, match=r"^ar_policies: 'moespac' is not autoregressive; autoregressive "
                                             r"policies: accelerate, fate, fiddler, .*moespac_ar"):
        _refuse_wrong_kind(["moespac"], ["moespac"], NAMES)
    _refuse_wrong_kind(["llamacpp", "moespac_ar"], ["moespac", "llamacpp_sd"], NAMES)   # the defaults pass


@pytest.mark.parametrize("command,arg", [("calibrate", "write=maybe"), ("validate", "json=maybe"),
                                         ("validate", "json=yes"), ("calibrate", "loso=1")])
def test_flags_are_true_or_false_only(command, arg, capsys):
    with pytest.raises(SystemExit) as exc:
        options(command, [arg])
    key, value = arg.split("=")
    assert exc.value.code == 2 and capsys.readouterr().err == f"error: {command}: {key}={value!r}: must be true or false\n"
    assert options(command, [f"{key}=false"])[key] is False and options(command, [f"{key}=True"])[key] is True


def test_validate_out_that_is_a_file_is_refused_before_simulating(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as exc:   # the points file does not exist either: out is checked first
        fidelity_main("validate", [f"points={tmp_path / 'none.yaml'}", f"out={tmp_path / 'afile'}"])
    assert exc.value.code == 2 and capsys.readouterr().err == f"error: out={tmp_path / 'afile'}: is a file; give a folder\n"


@pytest.mark.parametrize("arg,message", [
    ("+hydra.callbacks.x._target_=shutil.copyfile", "hydra.callbacks.x._target_: _target_ cannot be set from the command line"),
    ("+hydra.callbacks.x.src=/etc/hostname", "hydra.callbacks.x.src: this Hydra override is not accepted; allowed: "
                                             "hydra/launcher=NAME, hydra.launcher.FIELD=VALUE, hydra.verbose"),
    ("hydra.searchpath=[file:///tmp]", "hydra.searchpath: this Hydra override is not accepted"),
    ("hydra.launcher._target_=os.system", "hydra.launcher._target_: _target_ cannot be set"),
    ("policy._target_=shutil.rmtree", "policy._target_: _target_ cannot be set from the command line"),
])
def test_hydra_overrides_beyond_the_launcher_are_refused(tmp_path, arg, message):
    with pytest.raises(UserInputError) as exc:
        precheck("run", [arg, f"out={tmp_path}"])
    assert str(exc.value).startswith(message)


def test_the_documented_hydra_overrides_pass(tmp_path):
    precheck("sweep", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.launcher.ray.init.address=auto",
                       "hydra.verbose=true", f"out={tmp_path}"])


@pytest.mark.parametrize("value", ["yes", "on", "maybe", "1"])
def test_every_command_takes_true_or_false_only(value, capsys):
    """The same rule in the traces and real commands (YAML alone would read yes/on as true)."""
    from real.offload.options import OptionError, ProfileOptions, parse
    from traces.cli import main as traces_main

    with pytest.raises(OptionError, match=f"fast={value!r}: must be true or false"):
        parse(ProfileOptions, [f"fast={value}"])
    assert traces_main(["stats", "trace=none.npz", f"json={value}"]) == 2
    assert capsys.readouterr().err.strip() == f"error: stats: json={value!r}: must be true or false"
    assert parse(ProfileOptions, ["fast=TRUE"]).fast is True


@pytest.mark.parametrize("override,message", [
    ({"draft": {"params": ".inf"}}, "draft: field 'params' must be a finite number, got '.inf'"),
    ({"link": {"latency_us": float("inf")}}, "hardware mine.link: field 'latency_us' must be a finite number, got inf"),
    ({"runtime": {"step_overhead_us": float("nan")}}, "runtime llama_cpp: field 'step_overhead_us' must be a finite number, got nan"),
    ({"cpu_threads": ".inf"}, "hardware mine: field cpu_threads='.inf': must be an integer >= 1 or null"),
    ({"cpu_threads": 0}, "hardware mine: field cpu_threads=0: must be an integer >= 1 or null"),   # was: all cores
])
def test_spec_fields_are_finite_numbers(override, message):
    """Fields without a range of their own (link latency, runtime overheads, draft size) were passed
    on as strings or infinities and failed deep in the cost model with a traceback."""
    from sim.machine import specs as config
    from sim.machine.specs import ConfigError

    comp = {"name": "mine", "gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}
    with pytest.raises(ConfigError) as exc:
        if "draft" in override:
            config.draft({**config.load_preset("draft", "qwen3_4b_fp8"), **override["draft"]})
        elif "link" in override:
            config.hardware({**comp, "link": {**config.load_preset("link", "pcie4_x16"), **override["link"]}},
                            runtime="llama_cpp")
        elif "runtime" in override:
            config.hardware(comp, runtime={"name": "llama_cpp", **override["runtime"]})
        else:
            config.hardware({**comp, **override}, runtime="llama_cpp")
    assert str(exc.value) == message
