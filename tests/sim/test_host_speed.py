"""Host single-thread speed scales the eager per-op host cost (Python dispatch + launch): hand
numbers for the one function, its use in the cost model (graph replays unscaled), and the facts
every host preset carries."""
from dataclasses import replace

import pytest

from sim.machine import specs as config
from sim.machine.compose import load_yaml
from sim.machine.cost_model import CostModel, host_op_us
from sim.machine.presets import ConfigError
from sim.paths import preset_names
from tests.sim.doubles import NO_DRAFT, ROUND_HW, ROUND_MODEL

US = 1e-6


def test_host_op_us_hand_numbers():
    assert host_op_us(40.0, 4.0, 5.0) == pytest.approx(32.0)      # 40 us x 4 / 5
    assert host_op_us(40.0, 4.0, 2.0) == pytest.approx(80.0)      # half the clock: twice the cost
    assert host_op_us(40.0, 0.0, 5.0) == 40.0                     # runtime not host-bound
    assert host_op_us(40.0, 4.0, 0.0) == 40.0                     # host unknown


def test_cost_model_scales_eager_launches_not_graph_replays():
    hw = replace(ROUND_HW, gpu_kernel_us=40.0, eager_ref_ghz=4.0, host_single_thread_ghz=5.0)
    cm = CostModel(hw, ROUND_MODEL, NO_DRAFT)
    assert cm.forward_kernel_us(False) == pytest.approx(32.0)
    graphed = CostModel(replace(hw, gpu_graph_kernel_us=1.0), ROUND_MODEL, NO_DRAFT, graphs=True)
    assert graphed.kernel_us == 1.0
    slow = CostModel(replace(hw, host_single_thread_ghz=4.0), ROUND_MODEL, NO_DRAFT)
    # one launch per GPU expert: the faster host saves 40 - 32 = 8 us per expert call
    assert slow.gpu_expert_table()[1] - cm.gpu_expert_table()[1] == pytest.approx(8.0 * US)
    assert slow.gpu_expert_table()[0] == cm.gpu_expert_table()[0] == 0.0


def test_compose_carries_host_clock_and_runtime_reference():
    comp = {"gpu": "rtx4090", "link": "pcie4_x16"}
    ref = config.hardware({**comp, "host": "xeon5220r_ddr4_6ch"}, runtime="hybrimoe")
    fast = config.hardware({**comp, "host": "desktop_ddr5_2ch"}, runtime="hybrimoe")
    per_op = float(load_yaml("runtime", "hybrimoe")["gpu_kernel_us"])
    assert (ref.eager_ref_ghz, ref.host_single_thread_ghz, fast.host_single_thread_ghz) == (4.0, 4.0, 5.7)
    assert CostModel(ref, ROUND_MODEL, NO_DRAFT).kernel_us == pytest.approx(per_op)
    assert CostModel(fast, ROUND_MODEL, NO_DRAFT).kernel_us == pytest.approx(per_op * 4.0 / 5.7)
    graph_rt = config.hardware({**comp, "host": "desktop_ddr5_2ch"}, runtime="llama_cpp")
    assert graph_rt.eager_ref_ghz == 0.0   # compiled launches: not scaled


def test_every_host_preset_states_its_clock():
    for name in preset_names("host"):
        ghz = load_yaml("host", name).get("single_thread_ghz")
        assert ghz is not None and 2.0 <= ghz <= 6.5, name


def test_negative_clock_is_a_one_line_error():
    with pytest.raises(ConfigError, match="single_thread_ghz.*>= 0"):
        config.hardware({"gpu": "rtx4090", "link": "pcie4_x16",
                         "host": {**load_yaml("host", "desktop_ddr5_2ch"), "single_thread_ghz": -1.0}})


def test_generic_runtimes_are_unfitted_and_priced_by_mechanism():
    comp = {"gpu": "rtx4090", "link": "pcie4_x16", "host": "desktop_ddr5_2ch"}
    for name in ("generic_eager", "generic_graph"):
        data = load_yaml("runtime", name)
        assert "calibrate" not in data or not data["calibrate"], name   # nothing may be fitted
        assert data["by_kind"] == {}, name
    eager = CostModel(config.hardware(comp, runtime="generic_eager"), ROUND_MODEL, NO_DRAFT)
    assert eager.kernel_us == pytest.approx(15.0 * 4.0 / 5.7)          # 10.53 us per op on a 5.7 GHz core
    graph = config.hardware(comp, runtime="generic_graph")
    assert CostModel(graph, ROUND_MODEL, NO_DRAFT, graphs=True).kernel_us == 1.0
    assert CostModel(graph, ROUND_MODEL, NO_DRAFT).kernel_us == 5.0
