"""The whole-layer offload P12 is modelled with: llama.cpp builds before ``--override-tensor`` (PR #11397,
merged 2025-04-02) could only place whole layers on the GPU (``-ngl``), and of DeepSeek-V3 Q4_K_M an
RTX 4090 beside a 2-socket Xeon holds the last 3 layers, not 4."""
import pytest

from sim.machine.specs import ConfigError
from sim.run.resolve import resolve
from sim.run.spec import RunSpec

BOX = {"name": "p12_box", "gpu": "rtx4090", "host": "xeon_ddr5_8ch_2s", "link": "pcie4_x16"}
RUN = dict(policy="llamacpp", hardware=BOX, model="deepseek_v3", quant="q4_k_m", workload="gsm8k",
           gen_tokens=8, prompt_tokens=500, context=1024, draft="none", gamma=0)


def test_deepseek_v3_q4_k_m_ngl_3_fits_an_rtx4090():
    """-ngl 3: the experts of the last 3 MoE layers (3 x 256) are resident."""
    r = resolve(RunSpec.of(policy_args={"gpu_layers": 3}, **RUN))
    assert r.plan.n_slots == 3 * 256


def test_deepseek_v3_q4_k_m_ngl_4_is_refused_on_an_rtx4090():
    with pytest.raises(ConfigError, match="1024 expert slots does not fit"):
        resolve(RunSpec.of(policy_args={"gpu_layers": 4}, **RUN))
