"""Every baseline preset builds a documented, fresh policy; AR/SD modes are as the systems run."""
import inspect

import pytest
import yaml

from sim.paths import CONF_DIR
from sim.policies import make_policy, policy_names

BASELINES = {"ondemand_lru": False, "llamacpp": False, "llamacpp_sd": True, "accelerate": False,
             "vllm": False, "mixtral_offload": False, "moe_infinity": False, "sp_moe": True, "fate": False,
             "hybrimoe": False, "fiddler": False, "ktransformers": False, "heuristic_oracle": True,
             "heuristic_oracle_ar": False}


def test_all_baselines_registered():
    assert set(BASELINES) <= set(policy_names())


@pytest.mark.parametrize("name, speculative", sorted(BASELINES.items()))
def test_preset_builds_documented_policy(name, speculative):
    pol = make_policy(name)
    assert pol.name == name and pol.speculative is speculative
    assert make_policy(name) is not pol
    doc = inspect.getdoc(type(pol))
    assert doc and len(doc) > 200
    text = (CONF_DIR / "policy" / f"{name}.yaml").read_text()
    data = yaml.safe_load(text)
    assert data["_target_"] and data["description"]
    assert (CONF_DIR / "runtime" / f"{data['runtime']}.yaml").exists()   # the runtime its system is built on
    lines = text.splitlines()
    for param in set(data) - {"_target_", "description"}:
        i = next(i for i, line in enumerate(lines) if line.startswith(f"{param}:"))
        assert lines[i - 1].startswith("#"), f"{name}.{param} has no comment giving its origin"
        assert param == "runtime" or param in doc, f"{name}.{param} is not documented in the class docstring"



@pytest.mark.parametrize("alias, name", [("oracle", "heuristic_oracle"), ("oracle_ar", "heuristic_oracle_ar")])
def test_old_oracle_names_are_aliases(alias, name):
    """The heuristic oracles keep their old names for experiments and result files."""
    pol = make_policy(alias)
    assert pol.name == alias and type(pol) is type(make_policy(name)) and alias not in policy_names()
