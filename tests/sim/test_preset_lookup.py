"""One preset-file lookup for the machine parts and the presets; one set of K-quant constants."""
import pytest

from sim.machine import compose, quant, specs
from sim.machine.presets import ConfigError
from sim.machine.vram import gguf_layout


@pytest.mark.parametrize("load", [compose.load_yaml, specs.load_preset])
def test_unknown_preset_names_the_group_and_the_valid_ones(load):
    with pytest.raises(ConfigError, match=r"unknown gpu 'rtx9090'; valid: .*rtx4090"):
        load("gpu", "rtx9090")


def test_both_loaders_read_the_same_file():
    assert compose.load_yaml("gpu", "rtx4090") == specs.load_preset("gpu", "rtx4090")


def test_k_mixes_are_ggml_block_sizes_and_the_gguf_layout_uses_them():
    """block_q3_K 110 B, q4_K 144 B, q5_K 176 B, q6_K 210 B per 256 weights (ggml-common.h)."""
    assert quant.K_MIXES == {"q4_k_m": (4.5, 6.5625), "q5_k_m": (5.5, 6.5625), "q3_k_m": (3.4375, 4.5)}
    assert quant.FORMATS["q4_k_m"].bits == (2 * 4.5 + 0.5 * 4.5 + 0.5 * 6.5625) / 3
    assert quant.FORMATS["q3_k_m"].bits == (2 * 3.4375 + 4.5) / 3
    m = specs.model("qwen3_30b_a3b", "q4_k_m", "q4_k_m")
    lay = gguf_layout.layout(m, 0.25)
    assert lay.output == 210 / 256 and lay.embed == 4.5 / 8
    assert lay.shared == lay.dense == (4.5 * (1 - 1 / 6) + 6.5625 / 6) / 8
