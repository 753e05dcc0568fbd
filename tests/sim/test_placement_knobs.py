"""Placement knobs (n_cpu_moe, slots_per_layer, kTransformers' per-layer GPU experts, VRAM budget)
and the memory plan's report; hand-computed non-expert costs."""
import json
import os
import subprocess
import sys

import pytest

from sim.machine import specs as config
from sim.machine.specs import ConfigError
from sim.machine.cost_model import CostModel
from sim.machine.memory_plan import GIB, plan_memory
from sim.run.runner import run_one
from sim.machine.published import PRESETS
from sim.run.spec import RunSpec
from sim.machine.memory_plan import PlanOptions

SHORT = dict(gen_tokens=16, workload="gsm8k")


def test_n_cpu_moe_keeps_the_last_layers_experts_on_the_gpu():
    res = run_one(RunSpec.of(policy="llamacpp", policy_args={"n_cpu_moe": 40}, **SHORT))
    assert res.row["n_slots"] == 8 * 128 and res.row["cache_ratio"] == pytest.approx(8 / 48)
    resident = res.engine.cache.resident
    assert resident[40:].all() and not resident[:40].any()


def test_slots_per_layer_and_per_layer_gpu_experts():
    assert run_one(RunSpec.of(policy="ondemand_lru", slots_per_layer=4, **SHORT)).row["n_slots"] == 4 * 48
    res = run_one(RunSpec.of(policy="ktransformers", policy_args={"gpu_experts_per_layer": 3}, **SHORT))
    assert (res.engine.cache.resident.sum(axis=1) == 3).all()


def test_vram_budget_caps_the_plan_and_the_error_names_the_largest_settings():
    hw, m, d = config.hardware("rtx4090_pcie4"), config.model("qwen3_30b_a3b"), config.draft("none")
    full = plan_memory(hw, m, d, 0.1)
    small = plan_memory(hw, m, d, 0.1, opts=PlanOptions(vram_budget_gib=16))
    assert full.free_for_experts - small.free_for_experts == pytest.approx(8 * GIB)
    with pytest.raises(ConfigError, match=r"policy\.n_cpu_moe>=\d+"):
        plan_memory(hw, m, d, 0.9, opts=PlanOptions(vram_budget_gib=16))


def test_memory_plan_parts_by_quant_context_and_draft():
    hw, m = config.hardware("rtx4090_pcie4"), config.model("qwen3_30b_a3b", quant="q4_k_m")
    plan = plan_memory(hw, m, config.draft("qwen3_4b_fp8"), 0.1, context=2048)
    assert plan.non_expert == m.non_expert_params * 4.84375 / 8
    assert plan.kv == 2048 * (98304 + 147456) and plan.draft == 4.022e9
    assert plan.workspace == pytest.approx(4.4 * GIB)              # target + draft workspace
    assert plan.max_slots == int(plan.free_for_experts // m.expert_bytes)
    assert "largest that fits: cache_ratio<=" in plan.report()


def test_dense_layers_use_the_models_dense_width():
    hw, m = config.hardware("rtx4090_pcie4"), config.model("deepseek_v2_lite")
    cm = CostModel(hw, m, config.draft("none"))
    dense = 1 * (m.attn_params_per_layer + 3 * 2048 * 10944)
    want = (209715200 + dense) * 2.0 / (1008e9 * 0.8) + 300e-6     # memory-bound at one token
    assert cm.step_fixed_s(1) == pytest.approx(want)
    d = config.draft("qwen3_0_6b")
    cm = CostModel(hw, config.model("qwen3_30b_a3b"), d)
    assert cm.draft_token_s(0) == pytest.approx(0.596e9 * 2 / (1008e9 * 0.8) + 28 * 8 * 5e-6 + 150e-6)


@pytest.mark.parametrize("name", ["gpt_oss_20b", "qwen3_30b_a3b"])
def test_cli_runs_a_config_json_on_a_composed_machine(tmp_path, name):
    from tests.sim.test_model_specs import hf_config

    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(hf_config(PRESETS[name][4]).to_dict()))
    cmd = [sys.executable, "-m", "sim", "run", f"model=hf:{folder}", "quant=q4_k_m", "gpu=rtx2080",
           "host=hedt_ddr4_4ch", "link=pcie3_x16", "policy=llamacpp", "policy.n_cpu_moe=36", "gen_tokens=16",
           f"out={tmp_path / 'out'}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=os.environ)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "memory plan: VRAM 8.0 GiB" in p.stdout and "rtx2080+hedt_ddr4_4ch+pcie3_x16" in p.stdout
    assert "experts q4_k_m" in p.stdout
