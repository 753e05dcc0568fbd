"""llama.cpp's VRAM terms (sim/machine/vram/llamacpp.py) against published load logs and hand cases."""
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from sim.machine import specs as config
from sim.machine.memory_plan import GIB, plan_memory
from sim.machine.vram import MemoryOptions
from sim.machine.vram.cuda_context import cuda_context_bytes
from sim.machine.vram.llamacpp import compute_bytes, kv_bytes, llamacpp_terms, pad
from sim.machine.vram.options import CACHE_TYPE_BYTES

MIB = 2 ** 20
LOGS = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "llamacpp_load_logs.yaml").read_text())["logs"]
HW = config.hardware({"name": "m", "gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"},
                     runtime="llama_cpp")
NONE = config.draft("none")


def _predict(run: dict) -> dict:
    """Every term the logs quote, predicted (MiB); ``runtime`` picks the llama.cpp fork (default llama_cpp)."""
    m = config.model(run["model"], run["quant"], run.get("quant_dense"))
    hw = HW if run.get("runtime", "llama_cpp") == "llama_cpp" else config.hardware(
        {"name": "m", "gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}, runtime=run["runtime"])
    opts = MemoryOptions(ubatch=run["ubatch"], flash_attn=run["flash_attn"], n_seq=run.get("n_seq", 1),
                         swa_full=run.get("swa_full", False))
    slots = m.n_layers * m.n_experts if run["gpu_experts"] == "all" else int(run["gpu_experts"])
    t = llamacpp_terms(hw, m, NONE, run["context"], 0, opts, slots)
    return {"gpu_model": (t.model_bytes + slots * m.expert_bytes) / MIB, "host_embd": t.host_weights / MIB,
            "kv": t.kv / MIB, "compute": t.compute / MIB}


def test_the_logs_cover_three_models_and_every_term():
    assert len(LOGS) >= 6
    files = {log["model_file"].split()[0] for log in LOGS}
    assert len(files) >= 4 and {"gpt_oss_20b", "qwen3_30b_a3b", "gpt_oss_120b"} <= {log["run"]["model"] for log in LOGS}
    assert {"gpu_model", "host_embd", "kv", "compute"} <= {k for log in LOGS for k in log["mib"]}


@pytest.mark.parametrize("log", LOGS, ids=[log["id"] for log in LOGS])
def test_each_term_within_5_percent_or_0_2_gib(log):
    got = _predict(log["run"])
    for term, quoted in log["mib"].items():
        tol = max(0.05 * quoted, 0.2 * 1024)
        assert got[term] == pytest.approx(quoted, abs=tol), f"{log['id']} {term}: {got[term]:.2f} vs {quoted} MiB"


def test_kv_by_cache_type_and_sliding_window_cells():
    m = config.model("gpt_oss_20b")              # 12 full + 12 sliding layers, 1024 K+V elements each per token
    f16 = MemoryOptions()
    full = 12 * 4096 * 1024 * 2                  # 4096 cells
    swa = 12 * pad(128 + 512) * 1024 * 2         # window + micro-batch, padded to 256 = 768 cells
    assert kv_bytes(m, 4096, f16) == full + swa
    q8 = MemoryOptions("q8_0", "q8_0")
    assert kv_bytes(m, 4096, q8) == pytest.approx((full + swa) * (34 / 32) / 2)
    mixed = MemoryOptions("q8_0", "q4_0")
    assert kv_bytes(m, 4096, mixed) == pytest.approx((full + swa) / 2 * (34 / 32 + 18 / 32) / 2)
    assert kv_bytes(m, 4096, MemoryOptions(swa_full=True)) == 2 * full
    assert kv_bytes(m, 4000, f16) == kv_bytes(m, 4096, f16)           # cells padded to 256
    mla = config.model("deepseek_v3")                                    # latent cached as K only
    assert kv_bytes(mla, 1024, MemoryOptions("q8_0", "q4_0")) == pytest.approx(1024 * 70272 / 2 * 34 / 32)
    assert CACHE_TYPE_BYTES["q4_0"] == 18 / 32 and CACHE_TYPE_BYTES["q5_1"] == 24 / 32


def test_compute_buffer_is_the_largest_phase():
    m = config.model("qwen3_30b_a3b", quant="q4_k_m")
    ub, vocab = 512, 151936
    logits = ub * vocab * 4 + 2.5 * ub * 2048 * 4
    assert compute_bytes(m, 4096, MemoryOptions(), True, False) == pytest.approx(logits)
    # the head on the CPU (-ngl short of the output layer): the MoE phase is the largest
    moe = 2.5 * ub * 8 * 768 * 4
    assert compute_bytes(m, 4096, MemoryOptions(), False, False) == pytest.approx(moe)
    # experts in host memory: one layer's expert tensors are copied in for a prompt micro-batch
    assert compute_bytes(m, 4096, MemoryOptions(), False, True) == pytest.approx(moe + 128 * m.expert_bytes)
    assert compute_bytes(m, 4096, MemoryOptions(ubatch=16), False, True) == pytest.approx(moe / 32)
    # without flash attention the F32 KQ of 32 heads x n_ctx x ubatch dominates at long context
    kq = ub * (32 * 32768 * 4 + 7 * 4096 * 4)
    assert compute_bytes(m, 32768, MemoryOptions(flash_attn=False), True, True) == pytest.approx(kq)


def test_token_embedding_stays_in_host_memory_and_output_follows_ngl():
    m = config.model("qwen3_30b_a3b", quant="q8_0")
    opts = MemoryOptions()
    gpu = llamacpp_terms(HW, m, NONE, 4096, 0, opts, 0)
    part = llamacpp_terms(HW, m, NONE, 4096, 6, opts, 0)     # -ngl: the first 6 layers whole on the CPU
    names = [n for n, _ in gpu.model]
    assert "output head" in names and "output head" not in [n for n, _ in part.model]
    assert gpu.host_weights == pytest.approx(m.embed_params * 34 / 32)
    assert gpu.model_bytes - part.model_bytes == pytest.approx(
        6 * (m.attn_params_per_layer * 34 / 32 + (m.non_expert_params - 48 * m.attn_params_per_layer
                                                   - 2 * m.embed_params) / 48 * 4) + m.lm_head_params * 34 / 32)
    assert part.kv == pytest.approx(gpu.kv * 42 / 48)


def test_plan_parts_add_up_and_the_report_prints_each_term():
    m = config.model("gpt_oss_20b", quant="mxfp4")
    plan = plan_memory(HW, m, NONE, 0.5)
    t = plan.terms
    assert plan.non_expert == t.model_bytes and plan.kv == t.kv and plan.workspace == t.compute
    assert plan.reserved == t.context + t.pool and t.context == cuda_context_bytes(128)   # the RTX 4090's 128 SMs
    used = plan.vram - plan.free_for_experts + plan.n_slots * plan.expert_bytes
    assert used == pytest.approx(sum(b for _, b in t.rows(plan.n_slots * plan.expert_bytes)))
    text = plan.report()
    for word in ("attention, norms, router", "output head", "expert slots", "KV cache", "compute buffer",
                 "CUDA context", "CUDA pool", "token embedding in host memory"):
        assert word in text
    # the generic runtime keeps its own parts (the plan of every other runtime is unchanged)
    generic = plan_memory(config.hardware("rtx4090_pcie4"), m, NONE, 0.5)
    assert generic.terms is None and generic.workspace == pytest.approx(1.0 * GIB)


def test_gpt_oss_dense_weights_are_q8_0_in_the_gguf_file_unless_f16_is_asked():
    m = config.model("gpt_oss_20b", quant="mxfp4")
    assert m.dense_quant == "bf16"            # the checkpoint's own format
    q8 = dict(llamacpp_terms(HW, m, NONE, 4096, 0, MemoryOptions(), 0).model)
    f16 = dict(llamacpp_terms(HW, replace(m, quant_dense="f16"), NONE, 4096, 0, MemoryOptions(), 0).model)
    assert q8["output head"] == pytest.approx(m.lm_head_params * 34 / 32)
    assert f16["output head"] == pytest.approx(m.lm_head_params * 2)
