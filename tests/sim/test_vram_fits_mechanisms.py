"""The memory-plan mechanisms behind published runs that ran (or did not): CUDA unified memory,
ik_llama.cpp's placement, and the micro-batch / ``--n-cpu-moe`` frontier of a published 24 GB card."""
import pytest

from sim.machine import specs as config
from sim.machine.memory_plan import GIB
from sim.machine.specs import ConfigError
from sim.machine.vram import MemoryOptions
from sim.machine.vram.llamacpp import compute_bytes, llamacpp_terms
from sim.run.resolve import resolve
from sim.run.spec import RunSpec
from sim.run.user_input import UserInputError, check

SHORT = dict(workload="gsm8k", gen_tokens=8, prompt_tokens=64, draft="none", gamma=0)
RTX4070 = {"name": "rtx4070_box", "gpu": "rtx4070", "host": "i5_12600k_ddr5_2ch", "link": "pcie4_x16"}
RTX3090 = {"name": "rtx3090_box", "gpu": "rtx3090", "host": "desktop_ddr4_2ch", "link": "pcie4_x16"}


def _c3(**kw):
    """gpt-oss-120b with the experts of 5 layers on a 12 GB RTX 4070, 24k context, -ub 2048, q8_0/q4_0 KV."""
    args = dict(context=24576, ubatch=2048, cache_type_k="q8_0", cache_type_v="q4_0", **SHORT)
    return RunSpec.of(policy="llamacpp", policy_args={"n_cpu_moe": 31}, hardware=RTX4070, model="gpt_oss_120b",
                      quant="mxfp4", quant_dense="q8_0", **{**args, **kw})


def test_unified_memory_pages_the_overflow_to_host_instead_of_failing():
    """At 48k context the C-3 placement overflows the 12 GB card; with unified memory it pages instead.
    (C-3's own 24k run fits without the flag since the CUDA context is charged per SM.)"""
    assert resolve(_c3()).plan.n_slots == 640
    with pytest.raises(ConfigError, match="640 expert slots does not fit"):
        resolve(_c3(context=49152))
    p = resolve(_c3(unified_memory=True, context=49152)).plan
    t = p.terms
    used = t.model_bytes + p.n_slots * p.expert_bytes + t.kv + t.compute + t.context + t.pool
    assert p.spilled == pytest.approx(used - p.vram) and 0.1 * GIB < p.spilled < 0.5 * GIB
    assert p.max_slots == p.n_slots == 640 and p.free_for_experts == pytest.approx(p.n_slots * p.expert_bytes)
    assert "paged to host memory (unified memory)" in p.report()
    # a plan that fits spills nothing
    assert resolve(_c3(unified_memory=True, context=640, ubatch=512)).plan.spilled == 0.0


def test_unified_memory_is_a_llama_cpp_flag_only():
    spec = RunSpec.of(policy="moespac", hardware=dict(RTX4070), runtime="custom_cuda", model="gpt_oss_120b",
                      quant="mxfp4", cache_ratio=0.2, unified_memory=True, **SHORT)
    with pytest.raises(ConfigError, match="does not fit"):
        resolve(spec)
    assert check("unified_memory", True) is True
    with pytest.raises(UserInputError, match="unified_memory"):
        check("unified_memory", "yes")


@pytest.mark.parametrize("ubatch, n_cpu_moe, context, fits", [
    (256, 25, 4224, True), (512, 26, 4224, True), (2048, 25, 4224, True), (4096, 26, 4224, True),
    (4096, 25, 4224, False), (8192, 28, 8320, True), (8192, 27, 8320, False)])
def test_gpt_oss_120b_ubatch_frontier_on_a_24_gb_rtx3090(ubatch, n_cpu_moe, context, fits):
    """gpt-oss-120b-F16.gguf (MXFP4 experts, F16 rest) with llama-bench on a 24 GB RTX 3090: -ub 256 and
    2048 ran at --n-cpu-moe 25, 512 at 26; '-ub 4096 required --n-cpu-moe 26, and -ub 8192 needed 28'
    (r/LocalLLaMA post, reposted at ai-maestro.online/drastically-improve-prompt-processing-speed-for-
    n-cpu-moe-partially-offloaded-models-8/; pp4096 runs, the 8192 point from pp8192: -c = pp + 128)."""
    spec = RunSpec.of(policy="llamacpp", policy_args={"n_cpu_moe": n_cpu_moe}, hardware=RTX3090, model="gpt_oss_120b",
                      quant="mxfp4", quant_dense="f16", context=context, ubatch=ubatch, **SHORT)
    if fits:
        assert resolve(spec).plan.max_slots >= (36 - n_cpu_moe) * 128
    else:
        with pytest.raises(ConfigError, match="does not fit"):
            resolve(spec)


def test_ik_llama_places_as_llama_cpp_without_the_expert_copy():
    """ik_llama.cpp keeps the token embedding in host memory as llama.cpp does, and its repacked host
    experts are never copied into the compute buffer (issue 629: 1264 MiB with IQ3_K, 1251 MiB with Q8_0)."""
    m = config.model("qwen3_235b_a22b", "q8_0", "q8_0")
    opts, d = MemoryOptions(ubatch=2048), config.draft("none")
    box = {"name": "m", "gpu": "rtx5090", "host": "desktop_ddr5_2ch", "link": "pcie5_x16"}
    ik = llamacpp_terms(config.hardware(box, runtime="ik_llama"), m, d, 32768, 0, opts, 768)
    lc = llamacpp_terms(config.hardware(box, runtime="llama_cpp"), m, d, 32768, 0, opts, 768)
    assert ik.host_weights == lc.host_weights == pytest.approx(151936 * 4096 * 34 / 32)
    assert ik.model == lc.model and ik.kv == lc.kv
    assert ik.compute == compute_bytes(m, 32768, opts, True, False)
    assert lc.compute == compute_bytes(m, 32768, opts, True, True) > ik.compute + GIB   # one layer: 2.39 GiB


def test_no_op_offload_drops_exactly_one_layers_expert_copy_and_prefills_on_the_cpu():
    """``--no-op-offload`` (op_offload=False): the compute buffer loses the copy of one layer's host
    experts (DeepSeek-V3 f16: 256 x 3 x 7168 x 2048 x 2 B = 21 GiB) and is what it is without host experts; the prompt's
    host experts are computed on the CPU (the ``auto`` prefill rule of llamacpp), and the plan's
    llama-server and llama-bench lines carry the flag."""
    from sim.prefill.decision import make_rule

    m = config.model("deepseek_v3", "f16")
    on, off = MemoryOptions(), MemoryOptions(op_offload=False)
    moe_activations = 512 * 2.5 * 8 * 2048 * 4                 # -ub 512, top-8, F32 gate/up/product
    assert compute_bytes(m, 1024, on, True, True) == pytest.approx(moe_activations + 256 * 3 * 7168 * 2048 * 2)
    assert compute_bytes(m, 1024, off, True, True) == compute_bytes(m, 1024, on, True, False)
    a100 = {"name": "a100_box", "gpu": "a100_40gb", "host": "xeon8452y_ddr5_8ch_2s", "link": "pcie4_x16"}
    spec = dict(policy="llamacpp", policy_args={"n_cpu_moe": 58}, hardware=a100, model="deepseek_v3",
                quant="f16", context=1024, **SHORT)
    with pytest.raises(ConfigError, match=r"do not fit .* It fits with op_offload=false .* 20\.80 GiB less"):
        resolve(RunSpec.of(**spec))
    assert resolve(RunSpec.of(op_offload=False, **spec)).plan.free_for_experts > 0
    assert make_rule("auto", "llamacpp", op_offload=False).name == "cpu"
    assert make_rule("auto", "llamacpp").name == "llamacpp" and make_rule("auto", "moespac", op_offload=False).name == "optimal"
    with pytest.raises(UserInputError, match="op_offload"):
        check("op_offload", "no")


def test_plan_prints_no_op_offload_when_the_plan_charged_no_copy():
    from sim.plan.flags import common_flags

    class A:   # the EngineArgs fields the flags read
        context, threads, cpu, n_layers, n_dense = 4096, 8, "cpu", 48, 0
        mem = MemoryOptions(op_offload=False)

    class C:
        engine = "llama_cpp"
    assert any(f.flag == "--no-op-offload" for f in common_flags(C, A))
    assert not any(f.flag == "--no-op-offload" for f in common_flags(C, type("B", (A,), {"mem": MemoryOptions()})))
