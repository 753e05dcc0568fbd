"""Writing a fit: a fitted key set in the runtime file's body becomes a comment, so YAML keeps one value."""
import yaml

from sim.fidelity.calibrate import shadow_fitted

BODY = """name: toy
# per-op cost, sourced start
gpu_kernel_us: 20.0   # Python dispatch
gpu_quant_eff:
  hqq2: 0.05
  hqq3: 0.1
cpu_mem_eff: 0.6
calibrate:
  gpu_kernel_us: [10, 50]
"""


def test_fitted_keys_in_the_body_become_comments_and_the_rest_stays():
    text = shadow_fitted(BODY, ["gpu_kernel_us", "gpu_quant_eff", "by_kind"])
    assert "# (fitted below) gpu_kernel_us: 20.0   # Python dispatch" in text
    assert "# (fitted below)   hqq2: 0.05" in text and "# (fitted below)   hqq3: 0.1" in text
    data = yaml.safe_load(text + "gpu_kernel_us: 22.2\ngpu_quant_eff: {hqq2: 0.06}\n")
    assert data["gpu_kernel_us"] == 22.2 and data["gpu_quant_eff"] == {"hqq2": 0.06}
    assert data["cpu_mem_eff"] == 0.6 and data["calibrate"] == {"gpu_kernel_us": [10, 50]}
    assert data["name"] == "toy"


def test_a_body_without_the_fitted_keys_is_unchanged():
    assert shadow_fitted(BODY, ["step_overhead_us"]) == BODY
