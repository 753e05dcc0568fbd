"""``python -m real profile fast=true`` writes a hardware YAML that the simulator uses as is."""
from __future__ import annotations

import pytest

from tests.real import need

need("torch")
need("transformers")

from omegaconf import OmegaConf  # noqa: E402

from real.cli import main  # noqa: E402
from sim.machine import specs as config  # noqa: E402
from sim.machine.cost_model import CostModel  # noqa: E402
from sim.run.runner import run_one  # noqa: E402
from sim.run.spec import RunSpec

SMALL = ["synthetic=qwen3_30b_a3b", "layers=2", "draft_layers=1", "hidden=64", "moe_intermediate=32",
         "vocab=512", "fast=true", "max_tokens=16", "gamma=4", "context=32"]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    path = tmp_path_factory.mktemp("hw") / "measured.yaml"
    assert main(["profile", *SMALL, f"out={path}", "name=unit_cpu"]) == 0
    return path


def test_yaml_loads_into_the_cost_model(profiled):
    data = OmegaConf.to_container(OmegaConf.load(profiled), resolve=True)
    hw = config.hardware(data)
    assert hw.name == "unit_cpu"
    t = hw.tables
    assert len(t["gpu_expert_us"]) == len(t["cpu_expert_us"]) == 17 and t["gpu_expert_us"][0] == 0.0
    assert all(v > 0 for v in t["gpu_expert_us"][1:] + t["cpu_expert_us"][1:]) and t["transfer_us"] > 0
    cost = CostModel(hw, config.model("qwen3_30b_a3b"), config.draft("qwen3_4b_fp8"))
    assert cost.gpu_expert_table()[3] == pytest.approx(t["gpu_expert_us"][3] * 1e-6)
    assert cost.cpu_expert_table()[16] == pytest.approx(t["cpu_expert_us"][16] * 1e-6)
    assert cost.transfer_s() == pytest.approx(t["transfer_us"] * 1e-6)


def test_yaml_states_date_machine_torch_and_cpu_labels(profiled):
    text = profiled.read_text()
    assert text.startswith("# Measured by `python -m real profile` on ")
    assert "torch" in text.splitlines()[0] and "No CUDA device" in text
    m = OmegaConf.load(profiled).tables.measured
    assert m.date and m.machine and m.torch and m.device == "cpu" and m.gpu.startswith("none")
    assert len(m.h2d_pinned_gbs) == len(m.h2d_bytes) == len(m.h2d_pageable_gbs)
    assert m.draft_token_us > 0 and m.layer_us_without_experts > 0


def test_simulator_runs_on_the_profiled_machine(profiled):
    data = OmegaConf.to_container(OmegaConf.load(profiled), resolve=True)
    row = run_one(RunSpec.of(policy="moespac", workload="gsm8k", hardware=data, gen_tokens=24, cache_ratio=0.1)).row
    assert row["hardware"] == "unit_cpu" and row["tps"] > 0


def test_the_fit_recovers_the_kernel_and_overhead_the_cost_model_charges():
    """Measurements made by the cost model itself (kernel 7 us, overhead 250 us) are fitted back
    exactly: the profiler's least squares and the cost model count the same kernels."""
    from types import SimpleNamespace

    import dataclasses

    from real.offload.profile_yaml import _spec
    flat = {k: v for k, v in dataclasses.asdict(config.hardware("rtx4090_pcie4")).items() if k != "draft_overhead_us"}
    hw0 = dict(flat, gpu_kernel_us=7.0, step_overhead_us=250.0)
    mspec, dspec = config.load_preset("model", "deepseek_v2_lite"), config.load_preset("draft", "qwen3_4b_fp8")
    truth = CostModel(config.hardware(hw0), config.model(mspec), config.draft(dspec))
    opts = SimpleNamespace(gamma=4, context=512)
    L, n = mspec["n_layers"], opts.gamma + 1
    head = truth.step_fixed_s(n)
    meas = {"verify_s": head + L * truth.layer_fixed_s(n, 512), "head_s": head, "layers_total": L,
            "draft_s": truth.draft_token_s(512)}
    kernels = truth.hw.kernels_per_layer + (truth.hw.kernels_per_shared_expert if mspec["n_shared_experts"] else 0)
    hw, _ = _spec(meas, opts, kernels, hw0, mspec, dspec)
    assert hw["gpu_kernel_us"] == pytest.approx(7.0, rel=1e-6)
    assert hw["step_overhead_us"] == pytest.approx(250.0, rel=1e-6)
