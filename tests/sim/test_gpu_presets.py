"""GPU presets: every one composes into a machine and names its source; the consumer cards' tensor
throughput is the product of their datasheet SM/CU count, per-clock rate and boost clock."""
import re

import pytest

from sim.machine import specs as config
from sim.paths import CONF_DIR, preset_names

# name: (SMs or CUs, FP16 FLOP per clock per SM/CU, boost GHz), from the sources in each file.
DERIVED = {"rtx4070": (46, 512, 2.475), "rtx4060ti_16gb": (34, 512, 2.535), "rtx3070": (46, 512, 1.725),
           "rtx3080": (68, 512, 1.71), "rx7900xtx": (96, 512, 2.498), "rx7900xt": (84, 512, 2.4)}


@pytest.mark.parametrize("name", preset_names("gpu"))
def test_every_gpu_preset_composes_and_cites_a_source(name):
    head = (CONF_DIR / "gpu" / f"{name}.yaml").read_text().splitlines()[0]
    assert head.startswith("# ") and "Datasheet facts only. Source:" in head
    hw = config.hardware({"gpu": name, "host": "desktop_ddr5_2ch", "link": "pcie4_x16"})
    assert hw.vram_gib > 0 and hw.gpu_mem_bw_gbs > 0 and hw.gpu_tflops > 0


@pytest.mark.parametrize("name", sorted(DERIVED))
def test_consumer_cards_tensor_rate_is_units_times_rate_times_clock(name):
    units, per_clk, ghz = DERIVED[name]
    g = config.load_preset("gpu", name)
    assert g["sms"] == units
    assert g["fp16_tflops"] == pytest.approx(units * per_clk * ghz / 1000, abs=0.06)
    nvidia = name.startswith("rtx")
    # GeForce: INT8 dense = 4x FP16 with FP32 accumulate; RDNA 3: INT8 WMMA at the FP16 rate, no FP8
    assert g["int8_tops"] == pytest.approx(g["fp16_tflops"] * (4 if nvidia else 1), abs=0.2)
    assert g["fp8"] == (nvidia and g["gpu"].startswith("GeForce RTX 40"))
    assert re.search(r"\d+(\.\d+)? GB/s", (CONF_DIR / "gpu" / f"{name}.yaml").read_text())
