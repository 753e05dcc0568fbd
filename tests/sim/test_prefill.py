"""Prefill: exact timelines of a two-micro-batch prefill on the real cost model, both choices;
the cost-optimal rule against brute force; conservation of touched experts; the cache handoff.

Machine (real :class:`CostModel`, no overrides): GPU 4 GB/s, 1 TFLOP/s, 1 us per kernel; PCIe
1 GB/s + 10 us latency; CPU 0.4 GB/s and 0.4 GFLOP/s (compute-bound from one token); join 5 us;
host overhead 4 us per forward. Model: 2 MoE layers x 4 experts (top-2) of 20k f16 params (40 kB,
40 kFLOP per token); attention 1968 params/layer (q_dim 1968 / 16 = 123), router 8 x 4, lm_head 2000,
no KV; score + value products 4 x 123 = 492 FLOP per query and context token per layer (984 over
the two), at 1 TFLOP/s (``gpu_attn_eff`` 1). Hence:

* expert on the GPU: max(40 kB / 4 GB/s, n x 0.04 us) + 1 kernel = 11 us for n <= 250 tokens;
* expert on the CPU: max(40 kB / 0.4 GB/s, n x 40 kFLOP / 0.4 GFLOP/s) = 100 n us;
* one copy: 10 + 40 = 50 us;
* attention of n tokens after c: (1968 + 32) x 2 B / 4 GB/s + 8 kernels = 9 us, plus the score
  products 492 x (n c + n (n + 1) / 2) FLOP (sim.machine.attention, causal queries): for the micro-batch
  (n=2, c=0) 1476 FLOP = 0.001476 us, for (n=2, c=2) 3444 FLOP = 0.003444 us;
* head: 4 us host overhead; the last micro-batch adds the lm_head, 4000 B / 4 GB/s = 1 us.
"""
import itertools

from dataclasses import replace

import numpy as np
import pytest

from sim.machine.cost_model import CostModel
from sim.prefill.costs import PrefillCosts
from sim.prefill.decision import CostOptimal, TokenThreshold, make_rule
from sim.prefill.phase import simulate_prefill
from tests.sim.doubles import NO_DRAFT, ROUND_HW, ROUND_MODEL

US = 1e-6
HW = replace(ROUND_HW, cpu_tflops=0.0004, gpu_attn_eff=1.0)
MODEL = replace(ROUND_MODEL, n_experts=4, top_k=2, attn_params_per_layer=1968, kv_bytes_per_token=0,
                attn_flops_per_token=984)
# 4 prompt tokens x 2 layers x top-2; micro-batches of 2 tokens
PROMPT = np.array([[[0, 1], [3, 1]], [[0, 2], [3, 1]],      # micro-batch 0
                   [[0, 1], [2, 3]], [[0, 1], [0, 3]]], dtype=np.int16)   # micro-batch 1
RESIDENT = np.zeros((2, 4), dtype=bool)
RESIDENT[0, 0] = True                                        # expert 0 of layer 0 is in VRAM


def costs():
    return PrefillCosts.build(CostModel(HW, MODEL, NO_DRAFT), 2)


def spans(res, lane):
    return [(label, round(a / US, 6), round(b / US, 6)) for ln, label, a, b in res.events if ln == lane]


def test_the_round_machine_costs_what_the_docstring_says():
    c = costs()
    assert c.gpu_experts_s(np.array([2])) == pytest.approx(11 * US) and c.cpu_experts_s(np.array([2])) == pytest.approx(200 * US)
    assert c.cpu_experts_s(np.array([1])) == pytest.approx(100 * US) and c.transfer_s == pytest.approx(50 * US)
    assert c.attention_s(2, 0) == pytest.approx(9.001476 * US, rel=1e-12)
    assert c.attention_s(2, 2) == pytest.approx(9.003444 * US, rel=1e-12)
    assert c.head_s(2, last=False) == pytest.approx(4 * US) and c.head_s(2, last=True) == pytest.approx(5 * US)


def test_copying_every_layer_serialises_copies_and_gpu_kernels():
    """Micro-batch 0, layer 0: experts 1 and 2 (host) are copied, then 0, 1, 2 run on the GPU;
    layer 1: 1 and 3 copied, two kernels; micro-batch 1: layer 0 copies 1; layer 1 copies 0, 2, 3."""
    res = simulate_prefill(costs(), make_rule("gpu"), PROMPT, RESIDENT, timeline=True)
    assert spans(res, "PCIe") == [("U0 L0 copy x2", 13.001476, 113.001476), ("U0 L1 copy x2", 155.002952, 255.002952),
                                  ("U1 L0 copy x1", 291.006396, 341.006396), ("U1 L1 copy x3", 372.00984, 522.00984)]
    gpu = spans(res, "GPU")
    assert gpu[:5] == [("U0 head", 0, 4), ("U0 L0 attn", 4, 13.001476), ("U0 L0 experts", 113.001476, 146.001476),
                       ("U0 L1 attn", 146.001476, 155.002952), ("U0 L1 experts", 255.002952, 277.002952)]
    assert gpu[5] == ("U1 head", 277.002952, 282.002952)
    assert res.ttft_s == pytest.approx(555.00984 * US, rel=1e-12)
    assert spans(res, "CPU") == [] and res.copies == 8 and res.cpu_execs == 0
    assert res.pcie_bytes == 8 * MODEL.expert_bytes and res.tok_s == pytest.approx(4 / (555.00984 * US))


def test_cpu_choice_runs_host_experts_on_the_cpu_beside_the_resident_ones():
    """llama.cpp's rule at 2 tokens (< 32): no copy; the resident expert 0 of layer 0 runs on the GPU
    while the host experts run on the CPU, then the 5 us join."""
    res = simulate_prefill(costs(), make_rule("llamacpp"), PROMPT, RESIDENT, timeline=True)
    assert spans(res, "CPU") == [("U0 L0 experts", 13.001476, 213.001476), ("U0 L1 experts", 227.002952, 627.002952),
                                 ("U1 L0 experts", 646.006396, 846.006396), ("U1 L1 experts", 860.00984, 1260.00984)]
    assert ("U0 L0 experts", 13.001476, 24.001476) in spans(res, "GPU")
    assert spans(res, "PCIe") == [] and res.copies == 0
    assert res.ttft_s == pytest.approx(1265.00984 * US, rel=1e-12)


class Fixed:
    """A test rule: copy exactly the (micro-batch, layer) pairs given, in call order."""

    name = "fixed"

    def __init__(self, choices):
        self.choices = iter(choices)

    def copy(self, n_tokens, host_n, resident_n, costs):
        return next(self.choices)


def test_cost_optimal_equals_the_best_of_every_assignment():
    c = costs()
    slow_link = PrefillCosts.build(CostModel(HW.__class__(**{**HW.__dict__, "pcie_h2d_gbs": 0.4}), MODEL, NO_DRAFT), 2)
    for pc in (c, slow_link):
        best = min(simulate_prefill(pc, Fixed(a), PROMPT, RESIDENT).ttft_s for a in itertools.product([0, 1], repeat=4))
        assert simulate_prefill(pc, CostOptimal(), PROMPT, RESIDENT).ttft_s == pytest.approx(best, rel=1e-12)
    slow = simulate_prefill(slow_link, CostOptimal(), PROMPT, RESIDENT)
    # link 0.4 GB/s: a copy is 110 us; U0 L0 copies two (220 + 33 us) against 200 + 5 us on the CPU:
    # the CPU wins there; U0 L1 (242 vs 405), U1 L0 (132 vs 205), U1 L1 (363 vs 405) copy
    assert [list(x) for x in slow.copied_layers] == [[False, True], [True, True]]


def test_every_touched_host_expert_is_copied_or_computed_on_the_cpu():
    from sim.machine import specs as config
    from sim.prefill.routing import prompt_routing, ubatch_counts

    m = config.model("qwen3_30b_a3b", "q4_k_m", None)
    hw = config.hardware("rtx4090_pcie4", default_runtime="llama_cpp")
    experts = prompt_routing(m.name, "gsm8k", 300, 3, None)
    resident = np.zeros((m.n_layers, m.n_experts), dtype=bool)
    resident[:, :20] = True
    pc = PrefillCosts.build(CostModel(hw, m, config.draft("none")), 64)
    res = simulate_prefill(pc, CostOptimal(), experts, resident)
    touched = host = 0
    for s in range(0, 300, 64):
        counts = ubatch_counts(experts, s, min(300, s + 64), m.n_experts)
        touched += int((counts > 0).sum())
        host += int(((counts > 0) & ~resident).sum())
    assert res.host_touched == host and res.copies + res.cpu_execs == host
    assert res.gpu_execs + res.cpu_execs == touched
    assert len(res.ubatch_s) == 5 and sum(res.ubatch_s) == pytest.approx(res.ttft_s)
    assert res.pcie_bytes == res.copies * m.expert_bytes


def test_threshold_rules():
    assert make_rule("llamacpp").min_tokens == 32
    assert make_rule("ik_llama", n_experts=128, top_k=8).min_tokens == 512
    assert make_rule("ktransformers", threshold=700) == TokenThreshold("ktransformers", 700)
    assert make_rule("auto", "llamacpp_sd").name == "llamacpp" and make_rule("auto", "moespac").name == "optimal"
    with pytest.raises(ValueError, match="prefill_rule=nope"):
        make_rule("nope")


def test_the_last_micro_batch_reads_the_dense_layers_once():
    """One dense layer (1968 attention + 3 x 8 x 1000 MLP = 25968 params, 51936 B): every micro-batch
    reads it once (12.984 us at 4 GB/s) plus the 4 us host overhead; the last one reads the 2000-param
    lm_head with it in one pass, (2000 + 25968) x 2 B / 4 GB/s = 13.984 us (not the dense weights twice)."""
    model = replace(MODEL, n_dense_layers=1, dense_intermediate=1000)
    c = PrefillCosts.build(CostModel(HW, model, NO_DRAFT), 2)
    assert c.head_s(2, last=False) == pytest.approx(16.984 * US, rel=1e-12)
    assert c.head_s(2, last=True) == pytest.approx(17.984 * US, rel=1e-12)
