"""The CUDA context charged per SM (llama.cpp PR #23604), ggml-cuda's pool peak, and the published
C-6 run they let fit (carteakey/lllms bench-results.md: 9697 MiB of model, 12 MiB free, 28.46 t/s)."""
import pytest

from sim.machine import specs as config
from sim.machine.memory_plan import GIB
from sim.machine.specs import ConfigError
from sim.machine.vram import MemoryOptions
from sim.machine.vram.cuda_context import MIB, cuda_context_bytes
from sim.machine.vram.llamacpp import context_bytes, pool_bytes
from sim.run.resolve import resolve
from sim.run.spec import RunSpec

SHORT = dict(workload="gsm8k", gen_tokens=8, prompt_tokens=64, draft="none", gamma=0)


def _hw(gpu: str):
    return config.hardware({"name": "m", "gpu": gpu, "host": "desktop_ddr5_2ch", "link": "pcie4_x16"},
                           runtime="llama_cpp")


def test_context_is_the_line_through_the_two_published_measurements():
    assert cuda_context_bytes(34) == pytest.approx(107 * MIB)      # RTX 4060 Ti
    assert cuda_context_bytes(188) == pytest.approx(555 * MIB)     # RTX PRO 6000 Blackwell
    assert cuda_context_bytes(46) == pytest.approx((107 + 12 * 448 / 154) * MIB)   # RTX 4070: 141.9 MiB
    with pytest.raises(ConfigError, match="sms=0"):
        cuda_context_bytes(0)


def test_cuda_gpus_pay_per_sm_and_other_gpus_the_runtime_reserve():
    assert context_bytes(_hw("rtx4070")) == cuda_context_bytes(46)
    assert context_bytes(_hw("rtx4060ti_16gb")) == pytest.approx(107 * MIB)
    amd = _hw("rx7900xtx")                                         # ROCm/HIP: no CUDA context
    assert amd.cuda_sms == 0 and context_bytes(amd) == amd.reserved_gib * GIB


def test_gpu_vendor_is_checked():
    from sim.machine.compose import GpuSpec
    with pytest.raises(ConfigError, match="vendor='intel'"):
        GpuSpec("g", "G", "desktop", 8.0, 100.0, 10.0, 20.0, False, 10, vendor="intel")


def test_pool_peak_is_the_larger_of_the_moe_and_flash_attention_temporaries():
    m = config.model("gpt_oss_120b", quant="mxfp4")                 # hidden 2880, top-4, 8 x 64 K/V heads
    # MMQ MUL_MAT_ID: 512 x 4 rows of 3072 (2880 padded to 512) q8_1 values, 36 B per 32
    assert pool_bytes(m, 4096, MemoryOptions(ubatch=512)) == 512 * 4 * 3072 * 36 / 32
    # q8_0 K and V at 32768 cells: each converted to f16 for one layer, 32768 x 512 x 2 B
    assert pool_bytes(m, 32768, MemoryOptions(cache_type_k="q8_0", cache_type_v="q8_0")) == 2 * 32768 * 512 * 2
    assert pool_bytes(m, 32768, MemoryOptions(cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=False)) == \
        512 * 4 * 3072 * 36 / 32


def test_c6_gpt_oss_120b_blk_0_to_4_on_a_12_gb_rtx4070_at_32k_fits():
    """C-6 (conf/validation/holdout.yaml): -ot blk 5+ experts on the CPU, -c 32768, q8_0 KV, RTX 4070.
    It ran with 12 MiB free; the plan's model buffer is the log's 9697 MiB within 25 MiB."""
    spec = RunSpec.of(policy="llamacpp", policy_args={"n_cpu_moe": 31}, model="gpt_oss_120b", quant="mxfp4",
                      quant_dense="q8_0", context=32768, cache_type_k="q8_0", cache_type_v="q8_0",
                      hardware={"name": "ck", "gpu": "rtx4070", "host": "i5_12600k_ddr5_2ch", "link": "pcie4_x16"},
                      **SHORT)
    p = resolve(spec).plan
    t = p.terms
    assert p.n_slots == 640 <= p.max_slots and p.free_for_experts >= p.n_slots * p.expert_bytes
    assert abs(t.model_bytes + p.n_slots * p.expert_bytes - 9697 * MIB) < 25 * MIB
    assert t.context == cuda_context_bytes(46) and t.pool == 2 * 32768 * 512 * 2
