"""Attention over the context (sim/machine/attention.py): exact FLOPs and seconds on hand cases.

DeepSeek-V3 (absorbed MLA, 128 heads, kv_lora 512, rope 64, 61 layers): per layer, per query and
context token, 2 x 128 x 576 (scores over the 576-wide latent row) + 2 x 128 x 512 (values) =
147456 + 131072 = 278528 FLOP. One decode token at N_KV 32768 on an RTX 5090 (209.5 TFLOP/s FP16
tensor, 1792 GB/s) with gpu_mem_eff 0.8 and gpu_attn_eff 0.145:
  FLOPs   278528 x 32768 = 9 126 805 504 -> / (209.5e12 x 0.145 = 30.3775e12) = 300.446 us
  KV read 576 x 2 B x 32768 = 37 748 736 B -> / 1433.6e9 = 26.331 us
  roofline max: 300.446 us (compute-bound: 128 heads share one latent row).
Qwen3-30B-A3B (GQA 32 heads x 128, 4 KV heads): 4 x 32 x 128 = 16384 FLOP per context token;
at 32768: 536 870 912 FLOP = 17.673 us, KV 2 x 4 x 128 x 2 B x 32768 = 67 108 864 B = 46.811 us:
memory-bound, 46.811 us.
"""
import itertools
from dataclasses import replace

import pytest

from sim.machine import specs
from sim.machine.attention import attended, attention_kernel_s, context_flops, layer_attention_work, per_token_flops
from sim.machine.cost_model import CostModel
from sim.machine.presets import ConfigError
from tests.sim.doubles import NO_DRAFT, ROUND_HW

US = 1e-6
RTX5090 = replace(ROUND_HW, gpu_mem_bw_gbs=1792.0, gpu_mem_eff=0.8, gpu_tflops=209.5, gpu_attn_eff=0.145,
                  gpu_kernel_us=0.0, kernels_per_layer=0)
BW, RATE = 1792e9 * 0.8, 209.5e12 * 0.145


def test_mla_and_gqa_flops_per_context_token_follow_the_kernels():
    assert per_token_flops(True, 128, kv_lora=512, rope=64) == 278528
    assert per_token_flops(False, 32, head_dim=128) == 16384
    v3 = specs.model("deepseek_v3")
    assert v3.attn_flops_per_token == 61 * 278528 and v3.attn_swa_flops_per_token == 0
    q3 = specs.model("qwen3_30b_a3b")
    assert q3.attn_flops_per_token == 48 * 16384


def test_deepseek_v3_one_layer_at_32k_on_an_rtx5090():
    v3 = specs.model("deepseek_v3")
    kv, flops = layer_attention_work(v3, 1, 32768)
    assert kv == 37748736 and flops == 9126805504
    assert attention_kernel_s(kv, flops, BW, RATE) == pytest.approx(300.44623500946 * US, rel=1e-9)
    cost = CostModel(RTX5090, v3, NO_DRAFT)
    grow = cost.layer_fixed_s(1, 32768) - cost.layer_fixed_s(1, 1)
    short = max(1152 / BW, 278528 / RATE)             # the one-token context still costs its roofline
    assert grow == pytest.approx(300.44623500946 * US - short, rel=1e-9)


def test_gqa_at_32k_is_memory_bound_so_the_kv_read_prices_it():
    q3 = specs.model("qwen3_30b_a3b")
    kv, flops = layer_attention_work(q3, 1, 32768)
    assert kv == 67108864 and flops == 536870912
    assert attention_kernel_s(kv, flops, BW, RATE) == pytest.approx(46.81142857142857 * US, rel=1e-12)


def test_sliding_window_layers_are_capped_at_their_window():
    """gpt-oss-20b: 24 layers, 12 of them with a 128-token window, 64 heads x 64: 16384 FLOP per
    layer and context token. At N_KV 32768 a full layer attends 32768 tokens, a window layer 128;
    the per-layer mean is 16384 x (12 x 32768 + 12 x 128) / 24."""
    m = specs.model("gpt_oss_20b")
    assert (m.attn_flops_per_token, m.attn_swa_flops_per_token, m.sliding_window) == (12 * 16384, 12 * 16384, 128)
    assert context_flops(m, 1, 32767) == 16384 * (12 * 32768 + 12 * 128) / 24
    assert attended(1, 32767, 128) == 128
    assert attended(4, 126, 128) == 127 + 128 + 128 + 128       # the window fills at the second query


def test_attended_equals_a_brute_force_count():
    for n, cached, window in itertools.product(range(0, 7), range(0, 9), (0, 1, 3, 5, 8)):
        brute = sum(min(cached + i, window) if window else cached + i for i in range(1, n + 1))
        assert attended(n, cached, window) == brute, (n, cached, window)


def test_prefill_and_decode_share_one_count():
    """A prefill micro-batch of n after c prices n c + n (n + 1) / 2 attended tokens; two micro-batches
    of 2 equal one of 4 (conservation of the causal triangle)."""
    m = specs.model("deepseek_v3")
    assert context_flops(m, 2, 0) + context_flops(m, 2, 2) == context_flops(m, 4, 0) == 278528 * 10


def test_attention_on_the_cpu_is_charged_at_the_cpus_rate():
    """A layer offloaded whole: 1 GFLOP/s CPU, 0.4 GB/s at cpu_kv_eff 0.5 for the cache; 100 FLOP
    per context token over 2 layers (50 per layer), 8 KV bytes per token (4 per layer). At N_KV 1000:
    50 000 FLOP / 1e9 = 50 us vs 4000 B / 0.2e9 = 20 us: compute-bound, 50 us more than with no FLOPs."""
    hw = replace(ROUND_HW, cpu_tflops=0.001, cpu_flops_eff=1.0, cpu_kv_eff=0.5)
    base = replace(specs.model("deepseek_v3"), n_layers=2, n_dense_layers=0, kv_bytes_per_token=8,
                   attn_flops_per_token=0, attn_params_per_layer=0, n_shared_experts=0, hidden=8, n_experts=4)
    with_flops = replace(base, attn_flops_per_token=100)
    a = CostModel(hw, base, NO_DRAFT).cpu_layer_fixed_s(1, 1000)
    b = CostModel(hw, with_flops, NO_DRAFT).cpu_layer_fixed_s(1, 1000)
    assert b - a == pytest.approx(50 * US - 20 * US, rel=1e-9)


def test_out_of_range_attention_efficiency_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="gpu_attn_eff"):
        specs.hardware({"name": "x", "gpu": "rtx5090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"},
                       runtime={"name": "llama_cpp", "gpu_attn_eff": 1.5})
