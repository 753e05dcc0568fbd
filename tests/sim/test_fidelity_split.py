"""The training / held-out split of the collected measurements (scripts/split_collected.py), the
runtime each collected engine maps to, and the runtime profiles' fitted values against their stated
bounds."""
import importlib.util
from pathlib import Path

import pytest
import yaml

from sim.fidelity.calibrate import _value, bounds_of, calibration_order
from sim.fidelity.points import load_points
from sim.machine.compose import compose, load_yaml, runtime_spec

ROOT = Path(__file__).resolve().parents[2]
VAL = ROOT / "conf" / "validation"


def _split():
    spec = importlib.util.spec_from_file_location("split_collected", ROOT / "scripts" / "split_collected.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_fourth_source_from_the_second_is_held_out():
    pts = [{"source": s} for s in "hgfedcbaihgfedcba"]          # 9 distinct names a..i, repeated
    assert _split().held_out_sources(pts) == ["b", "f"]          # a b c d e f g h i -> positions 1, 5


def test_ik_points_map_to_ik_llama_unless_repacking_is_off():
    rt = _split().runtime_of
    assert rt({"engine": "ik_llama.cpp 3772", "config": "-rtr 1 -fmoe"}) == "ik_llama"
    assert rt({"engine": "ik_llama.cpp", "config": "as U-258-2 without run-time repacking (-rtr 0)"}) == "llama_cpp"
    assert rt({"engine": "llama.cpp (2026 build)", "config": ""}) is None


def test_held_out_sources_are_never_in_the_training_set_and_training_takes_grades_a_b():
    collected = yaml.safe_load((VAL / "collected.yaml").read_text())["points"]
    held = set(_split().held_out_sources(collected))
    train, hold = load_points(VAL / "train.yaml").points, load_points(VAL / "holdout.yaml").points
    assert {p.source for p in hold} == held
    assert not held & {p.source for p in train}
    by_id = {p["id"]: p for p in collected}
    from_collected = [p for p in train if p.id in by_id]
    assert {p.id for p in from_collected} == {i for i, p in by_id.items() if p["source"] not in held and p["grade"] in "AB"}
    assert len(hold) == sum(p["source"] in held for p in collected)


def test_ik_llama_inherits_llama_cpp_and_fuses_moe_ops():
    ik, base = load_yaml("runtime", "ik_llama"), load_yaml("runtime", "llama_cpp")
    assert ik["cpu_dequant_ops"] == base["cpu_dequant_ops"] and ik["kernels_per_layer"] == base["kernels_per_layer"]
    assert ik["cpu_ops_per_layer"] == 22 < base["cpu_ops_per_layer"]
    assert calibration_order().index("llama_cpp") < calibration_order().index("ik_llama")


@pytest.mark.parametrize("runtime", calibration_order())
def test_every_fitted_value_lies_within_its_stated_bounds(runtime):
    data = load_yaml("runtime", runtime)
    for name, (lo, hi) in bounds_of(runtime).items():
        assert lo <= _value(data, name) <= hi, (runtime, name)


def test_ktransformers_default_build_reads_one_node_and_the_numa_build_every_node():
    # kTransformers' plain install has no NUMA support; USE_NUMA=1 shards experts per node
    # (doc/en/install.md); 4 x Xeon 8280: 4 x 140.784 GB/s theoretical, one node 140.784
    base = {"gpu": "rtx4090", "host": "xeon8280_ddr4_6ch_4s", "link": "pcie4_x16"}
    plain = compose(base, runtime_spec("ktransformers"))
    numa = compose(base, runtime_spec({"name": "ktransformers", "numa_aware": True}))
    assert load_yaml("runtime", "ktransformers")["numa_aware"] is False
    assert plain["host_dram_gbs"] == pytest.approx(140.784 * 0.8)
    assert numa["host_dram_gbs"] == pytest.approx(4 * 140.784 * 0.8)
    assert numa["cpu_mem_bw_gbs"] > plain["cpu_mem_bw_gbs"]
