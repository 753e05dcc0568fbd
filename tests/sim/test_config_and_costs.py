"""Specs, the cost model's roofline and the VRAM plan."""
import dataclasses

import pytest

from sim.machine import specs as config
from sim.machine.specs import ConfigError
from sim.machine.cost_model import CostModel
from sim.machine.memory_plan import plan_memory

HW, M, D = config.hardware("rtx4090_pcie4"), config.model("qwen3_30b_a3b"), config.draft("qwen3_4b_fp8")


@pytest.mark.parametrize("group", ["hardware", "model", "draft"])
def test_every_preset_builds(group):
    from sim.paths import preset_names

    for name in preset_names(group):
        if (group, name) not in (("model", "hf"), ("model", "gguf")):   # the model=hf:PATH and gguf:PATH slots
            getattr(config, group)(name)


def test_unknown_preset_lists_valid_names():
    with pytest.raises(ConfigError, match="unknown hardware 'rtx9090'.*rtx4090_pcie4"):
        config.hardware("rtx9090")


def test_bad_field_names_source_and_range():
    data = config.load_preset("hardware", "rtx4090_pcie4") | {"gpu_mem_eff": 1.5}
    with pytest.raises(ConfigError, match=r"hardware: field 'gpu_mem_eff' must lie in \(0, 1\]"):
        config.hardware(data)
    with pytest.raises(ConfigError, match="unknown field.*'pcie_gen'"):
        config.hardware(config.load_preset("hardware", "rtx4090_pcie4") | {"pcie_gen": 4})
    flat = dataclasses.asdict(config.hardware("rtx4090_pcie4"))   # a flat machine (as `real profile` writes)
    with pytest.raises(ConfigError, match="missing field.*vram_gib"):
        config.hardware({k: v for k, v in flat.items() if k != "vram_gib"})


def test_expert_bytes_match_published_sizes():
    assert M.expert_bytes == 9_437_184                     # 9.00 MiB in f16
    assert config.model("deepseek_v2_lite").expert_bytes == 17_301_504


def test_roofline_is_memory_bound_for_one_token_and_grows_with_tokens():
    cm = CostModel(HW, M, D)
    gpu, cpu = cm.gpu_expert_table(), cm.cpu_expert_table()
    # one token: weights read once: bytes / (bandwidth x efficiency) + overhead
    assert gpu[1] == pytest.approx(9_437_184 / (1008e9 * 0.8) + 5e-6)
    assert cpu[1] == pytest.approx(9_437_184 / (89.6e9 * 0.7) + 8e-6)
    assert gpu[0] == cpu[0] == 0.0
    assert all(b >= a for a, b in zip(cpu[1:], cpu[2:]))
    assert cpu[64] > cpu[1] * 2  # compute-bound at many tokens on the CPU
    assert cm.transfer_s() == pytest.approx(10e-6 + 9_437_184 / 25e9)


def test_measured_tables_override_the_roofline():
    hw = dataclasses.replace(HW, tables={"gpu_expert_us": [0, 11, 12], "cpu_expert_us": [0, 300, 310],
                                         "transfer_us": 420})
    cm = CostModel(hw, M, D)
    assert list(cm.gpu_expert_table()) == pytest.approx([0, 11e-6, 12e-6])
    assert cm.transfer_s() == pytest.approx(420e-6)
    table = cm.cost_table(8, 512)
    assert table.cpu(4) == pytest.approx(310e-6 + 2 * 10e-6)  # linear extrapolation past the end


def test_cost_table_prices_each_forward_size_up_to_the_verify_window():
    """A policy choosing gamma per step reads the fixed parts of a forward of g + 1 tokens, not the
    run's largest window: on a GPU slowed to 0.05 TFLOP/s the non-expert weights are compute-bound,
    so 9 tokens cost more than 1; past the window the largest one stands."""
    cm = CostModel(dataclasses.replace(HW, gpu_tflops=0.05), M, D)
    table = cm.cost_table(8, 512)
    assert len(table.layer_fixed_by_n) == len(table.step_fixed_by_n) == 9
    for n in (1, 5, 9):
        assert table.layer_fixed(n) == cm.layer_fixed_s(n, 512)
        assert table.step_fixed(n) == cm.step_fixed_s(n)
    assert table.layer_fixed(9) > 1.5 * table.layer_fixed(1)
    assert table.layer_fixed(12) == table.layer_fixed_s == cm.layer_fixed_s(9, 512)
    assert table.step_fixed(0) == table.step_fixed_s


def test_paper_machine_fits_017_and_fails_near_021():
    plan = plan_memory(HW, M, D, 0.17)
    assert plan.n_slots == round(0.17 * 6144)
    assert 0.20 < plan.max_ratio < 0.22  # the paper reports OOM near 0.21
    with pytest.raises(ConfigError, match=r"largest ratio that fits is 0\.2\d\d"):
        plan_memory(HW, M, D, 0.3)


def test_memory_plan_rejects_out_of_range_ratio():
    with pytest.raises(ConfigError, match="cache_ratio must lie in 0..1"):
        plan_memory(HW, M, D, 1.5)


def test_a_model_that_does_not_fit_even_without_slots_fails():
    laptop = config.hardware("laptop_rtx4060_pcie4")
    with pytest.raises(ConfigError, match="do not fit on laptop_rtx4060_pcie4 even without expert slots"):
        plan_memory(laptop, M, D, 0.0)
    assert plan_memory(laptop, M, config.draft("qwen3_0_6b"), 0.03).n_slots == round(0.03 * 6144)


def test_non_expert_costs_equal_hand_values_on_the_paper_machine():
    """Attention, fixed part, draft token and block copy of Qwen3-30B-A3B (f16) + Qwen3-4B-FP8 on the
    RTX 4090 preset, from the YAML numbers by hand: GPU 1008 GB/s x 0.8, 165.2 TFLOP/s x 0.5,
    5 us per kernel, 300 us per forward; PCIe 25 GB/s + 10 us."""
    from sim.machine.cost_model import CostModel
    cost = CostModel(config.hardware("rtx4090_pcie4"), config.model("qwen3_30b_a3b"), config.draft("qwen3_4b_fp8"))
    bw = 1008e9 * 0.8
    attn_w = (18874368 + 2048 * 128) * 2          # attention + router weights, f16
    kv = 4096 * 98304 / 48                        # this layer's share of the KV cache at 4096 tokens
    assert cost.layer_fixed_s(9, 4096) == pytest.approx((attn_w + kv) / bw + 8 * 5e-6, rel=1e-12)
    assert cost.step_fixed_s(9) == pytest.approx(311164928 * 2 / bw + 300e-6, rel=1e-12)
    draft = (4.022e9 * 1.0 + 4096 * 147456) / bw + 36 * 8 * 5e-6 + 0.5 * 300e-6
    assert cost.draft_token_s(4096) == pytest.approx(draft, rel=1e-12)
    assert cost.bulk_transfer_s(3) == pytest.approx(10e-6 + 3 * 4718592 * 2 / 25e9, rel=1e-12)
    assert cost.bulk_transfer_s(1) == cost.transfer_s()


def test_dense_layers_use_the_models_own_ffn_width():
    """DeepSeek-V2-Lite's dense layer 0 (FFN 10944 wide, from its config) is in the fixed part;
    a model with other widths would be charged its own."""
    import dataclasses

    from sim.machine.cost_model import CostModel
    hw, m, d = config.hardware("rtx4090_pcie4"), config.model("deepseek_v2_lite"), config.draft("none")
    bw = 1008e9 * 0.8
    dense = m.attn_params_per_layer + 3 * 2048 * 10944      # one dense layer: attention + its FFN
    want = (m.lm_head_params + dense) * m.bytes_per_param / bw + 300e-6
    assert m.dense_intermediate == 10944
    assert CostModel(hw, m, d).step_fixed_s(1) == pytest.approx(want, rel=1e-12)
    narrow = dataclasses.replace(m, dense_intermediate=1000)
    assert CostModel(hw, narrow, d).step_fixed_s(1) < CostModel(hw, m, d).step_fixed_s(1)


def test_a_malformed_yaml_file_is_one_line_naming_file_and_line(tmp_path):
    from sim.machine.specs import read_yaml

    path = tmp_path / "rt.yaml"
    path.write_text("name: x\ncpu_mem_eff: 0.5\ncpu_mem_eff: 0.6\n")     # YAML keeps one of two equal keys
    with pytest.raises(ConfigError, match=r"rt\.yaml line 3: found duplicate key") as err:
        read_yaml(path)
    assert "\n" not in str(err.value)
