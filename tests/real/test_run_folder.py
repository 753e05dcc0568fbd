"""``real run`` never mixes two runs in one folder; ``real validate`` replays each trace as its own policy
(QA cases J13, J21, J24, J25, J28)."""
import json
from dataclasses import asdict, replace

import pytest

from real.offload.options import RunOptions
from real.offload.run import check_out, prepare
from real.offload.validate import _by_policy
from sim.run.user_input import UserInputError
from tests.traces.helpers import small_trace


def test_a_folder_holding_another_run_is_refused(tmp_path):                             # J21
    opts = RunOptions(target="tiny:qwen3_moe", draft="tiny:dense", out=str(tmp_path))
    check_out(opts)                                            # empty folder: fine
    (tmp_path / "options.json").write_text(json.dumps(asdict(opts)))
    check_out(replace(opts, quiet=True))                       # the same run again: fine
    with pytest.raises(ValueError, match=r"holds a run with other options \(policy \('moespac' -> 'llamacpp_sd'\)"):
        check_out(replace(opts, policy="llamacpp_sd"))
    other = tmp_path / "other"
    (other / "traces").mkdir(parents=True)
    with pytest.raises(ValueError, match="holds results or traces of another run"):
        check_out(replace(opts, out=str(other)))


def test_options_are_range_checked_before_models_load(tmp_path):                        # J13
    with pytest.raises(UserInputError, match="context=-5000000: must be an integer >= 1"):
        prepare(RunOptions(target="tiny:qwen3_moe", context=-5000000, out=str(tmp_path)))


def test_traces_are_grouped_by_their_own_policy():                                      # J25, J28
    a, b = small_trace(0), small_trace(1)
    a.meta.update(policy="moespac", real={}), b.meta.update(policy="llamacpp_sd", real={})
    assert {p: len(t) for p, t in _by_policy([a, b, a]).items()} == {"moespac": 2, "llamacpp_sd": 1}
    with pytest.raises(ValueError, match="field 'meta.policy': not a trace of `python -m real run`"):
        _by_policy([small_trace(2)])


def test_expert_deferral_is_refused_before_models_load(tmp_path):
    # deferral changes the outputs; the real executor computes every expert in its own layer
    opts = RunOptions(target="tiny:qwen3_moe", policy="ktransformers", policy_args={"deferred_experts": 2},
                      out=str(tmp_path))
    with pytest.raises(ValueError, match="policy.deferred_experts=2: the real executor computes every expert"):
        prepare(opts)
