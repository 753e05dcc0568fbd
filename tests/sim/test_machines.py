"""Machines composed of gpu x host x link x runtime, the runtime profiles and the quant formats."""
import dataclasses

import pytest

from sim.machine import specs as config
from sim.machine.specs import ConfigError
from sim.machine.cost_model import CostModel
from sim.paths import preset_names
from sim.machine.compose import HostSpec
from sim.machine.numa import numa_read
from sim.machine.quant import FORMATS, bytes_per_weight

# conf/hardware/rtx4090_pcie4.yaml before machines were split into parts (commit cb3b2a0)
OLD_RTX4090 = dict(
    name="rtx4090_pcie4", gpu="GeForce RTX 4090", vram_gib=24.0, gpu_mem_bw_gbs=1008.0, gpu_mem_eff=0.80,
    gpu_tflops=165.2, gpu_flops_eff=0.50, gpu_kernel_us=5.0, pcie_h2d_gbs=25.0, pcie_latency_us=10.0,
    cpu="desktop 16-core, dual-channel DDR5-5600 (paper does not name the CPU)", cpu_mem_bw_gbs=89.6,
    cpu_mem_eff=0.70, cpu_tflops=2.3, cpu_flops_eff=0.35, cpu_threads=16, cpu_expert_us=8.0, layer_sync_us=30.0,
    step_overhead_us=300.0, reserved_gib=0.6)


def test_the_paper_machine_composes_to_its_old_flat_numbers():
    hw = config.hardware("rtx4090_pcie4")
    assert {k: getattr(hw, k) for k in OLD_RTX4090} == OLD_RTX4090
    assert hw.workspace_gib + hw.draft_workspace_gib == 4.4 and hw.draft_overhead_us == 150.0
    assert hw.parts == {"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}


@pytest.mark.parametrize("runtime", preset_names("runtime"))
def test_every_runtime_differs_from_custom_cuda_only_where_its_file_says(runtime):
    from sim.machine.compose import load_yaml

    ref = dataclasses.asdict(config.hardware("rtx4090_pcie4", runtime="custom_cuda"))
    got = dataclasses.asdict(config.hardware("rtx4090_pcie4", runtime=runtime))
    own = set(load_yaml("runtime", runtime)) if runtime not in ("custom_cuda", "policy") else set()
    if own & {"cpu_core_gbs", "numa_aware"}:
        own.add("cpu_mem_bw_gbs")          # derived: per-core limit / sockets seen
    differ = {k for k in ref if k != "runtime" and got[k] != ref[k]}
    assert differ <= own, f"{runtime} changes {sorted(differ - own)} without setting them"
    if "calibrate" not in own and not runtime.startswith("generic_"):   # uncalibrated: custom_cuda's values
        assert differ <= {"numa_aware", "stream_dense"}   # but for sourced mechanism switches
    # generic_*: engines priced from mechanisms before any fit (their files source each value)


def test_device_kinds_select_the_runtime_values_of_the_old_presets():
    h200, laptop = config.hardware("h200_pcie5"), config.hardware("laptop_rtx4060_pcie4")
    assert (h200.gpu_mem_eff, h200.gpu_flops_eff, h200.gpu_kernel_us, h200.cpu_expert_us, h200.step_overhead_us,
            h200.reserved_gib, h200.cpu_mem_bw_gbs, h200.cpu_threads) == (0.75, 0.40, 4.0, 10.0, 250.0, 1.0, 460.8, 48)
    assert (laptop.cpu_mem_eff, laptop.layer_sync_us, laptop.step_overhead_us, laptop.workspace_gib,
            laptop.pcie_h2d_gbs, laptop.pcie_latency_us) == (0.60, 35.0, 400.0, 0.5, 12.0, 12.0)


def test_parts_replace_and_fields_override():
    hw = config.hardware({"name": "rtx4090_pcie4", "gpu": "rtx2080", "host": "hedt_ddr4_4ch", "link": "pcie3_x16"})
    assert (hw.name, hw.vram_gib, hw.cpu_mem_bw_gbs, hw.pcie_h2d_gbs) == (
        "rtx2080+hedt_ddr4_4ch+pcie3_x16", 8.0, 102.4, 12.5)
    gpu = config.load_preset("gpu", "rtx4090") | {"vram_gib": 8}
    hw = config.hardware(config.load_preset("hardware", "rtx4090_pcie4") | {"gpu": gpu, "pcie_h2d_gbs": 12})
    assert (hw.name, hw.vram_gib, hw.pcie_h2d_gbs) == ("rtx4090[vram_gib=8]+desktop_ddr5_2ch+pcie4_x16", 8, 12)


def test_unknown_part_and_bad_field_are_named():
    with pytest.raises(ConfigError, match="unknown gpu 'rtx9090'; valid: .*rtx4090"):
        config.hardware({"gpu": "rtx9090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"})
    with pytest.raises(ConfigError, match="unknown field.*'vram'.*valid"):
        config.hardware({"gpu": config.load_preset("gpu", "rtx4090") | {"vram": 8}, "host": "desktop_ddr5_2ch",
                         "link": "pcie4_x16"})
    with pytest.raises(ConfigError, match="unknown runtime 'tensorrt'; valid: .*llama_cpp"):
        config.hardware("rtx4090_pcie4", runtime="tensorrt")


@pytest.mark.parametrize("name", preset_names("host"))
def test_host_bandwidth_is_channels_times_rate_times_8_bytes(name):
    h = config.build_spec(HostSpec, config.load_preset("host", name), name)
    assert h.mem_bw_gbs == pytest.approx(h.mem_channels * h.mem_mts * 8 / 1000)


def test_a_numa_aware_runtime_sees_every_socket():
    h = config.build_spec(HostSpec, config.load_preset("host", "xeon_ddr5_8ch_2s"), "x")
    assert numa_read(h, "replicate").dram_gbs == pytest.approx(2 * 307.2)
    assert numa_read(h, "first_touch").dram_gbs == pytest.approx(307.2)   # weights on one node
    hw = config.hardware("xeon2s_rtx4090", runtime={"name": "ktransformers", "numa_aware": True, "cpu_core_gbs": 0.0})
    assert hw.cpu_mem_bw_gbs == pytest.approx(614.4) and hw.runtime == "ktransformers"


def test_quant_bits_from_the_format_definitions():
    assert [FORMATS[n].bits for n in ("q8_0", "q4_0", "q6_k", "q2_k", "iq4_xs", "mxfp4", "nvfp4", "int4")] == \
        [8.5, 4.5, 6.5625, 2.625, 4.25, 4.25, 4.5, 4.125]
    assert FORMATS["q4_k_m"].bits == pytest.approx((2 * 4.5 + 0.5 * 4.5 + 0.5 * 6.5625) / 3)
    assert all(FORMATS[n].source for n in FORMATS)
    with pytest.raises(KeyError, match="unknown quant 'q9'"):
        bytes_per_weight("q9")


def test_quantised_experts_move_fewer_bytes_and_runtime_scales_per_format():
    hw, d = config.hardware("rtx4090_pcie4"), config.draft("none")
    m = config.model("qwen3_30b_a3b", quant="q4_k_m")
    assert m.expert_bytes == int(4718592 * 4.84375 / 8) and m.dense_quant == "q4_k_m"
    cm = CostModel(hw, m, d)
    assert cm.transfer_s() == pytest.approx(10e-6 + m.expert_bytes / 25e9)
    slow = CostModel(dataclasses.replace(hw, cpu_quant_eff={"q4_k_m": 0.5}), m, d)
    assert slow.cpu_expert_table()[1] - 8e-6 == pytest.approx(2 * (cm.cpu_expert_table()[1] - 8e-6))
    with pytest.raises(ConfigError, match="field 'quant' must be one of"):
        config.model("qwen3_30b_a3b", quant="q9")


def test_runtime_policy_lets_every_profile_field_be_set_on_the_command_line():
    """``runtime.<field>=value`` works for every field of a runtime profile: conf/runtime/policy.yaml
    (the default runtime group entry) lists each RuntimeSpec field, so Hydra accepts the override."""
    from sim.machine.compose import RuntimeSpec, load_yaml

    listed = set(load_yaml("runtime", "policy"))
    assert {f.name for f in dataclasses.fields(RuntimeSpec)} <= listed
