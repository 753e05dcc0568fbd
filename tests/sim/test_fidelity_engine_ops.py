"""Per-engine op counts: an engine that calls a GPU expert op by op from Python (HybriMoE's
kTransformers fork) pays ``gpu_ops_per_expert`` launches per expert; kTransformers' CPU kernels
count once, in the runtime profile, not again as a policy factor."""
from dataclasses import replace

import numpy as np

from sim.machine.cost_model import CostModel
from sim.protocol import policy_cost_model
from sim.policies.registry import make_policy, policy_runtime
from sim.machine.compose import runtime_spec
from tests.sim.doubles import ROUND_HW, ROUND_MODEL, NO_DRAFT

US = 1e-6


def test_gpu_expert_pays_one_launch_per_eager_op():
    # 20000 params x 2 B = 40 kB at 4 GB/s = 10 us; one launch 1 us -> 11 us; 11 launches -> 21 us
    one = CostModel(ROUND_HW, ROUND_MODEL, NO_DRAFT).gpu_expert_table()
    eleven = CostModel(replace(ROUND_HW, gpu_ops_per_expert=11), ROUND_MODEL, NO_DRAFT).gpu_expert_table()
    assert one[0] == 0.0 and eleven[0] == 0.0
    assert np.isclose(one[1], 11 * US) and np.isclose(eleven[1], 21 * US)
    assert np.allclose(eleven[1:] - one[1:], 10 * US)   # the launches do not depend on the tokens


def test_hybrimoe_profile_is_ktransformers_cpu_with_eager_gpu_experts():
    kt, hm = runtime_spec("ktransformers"), runtime_spec("hybrimoe")
    assert policy_runtime("hybrimoe") == "hybrimoe" and policy_runtime("ktransformers") == "ktransformers"
    for field in ("cpu_mem_eff", "cpu_flops_eff", "cpu_core_lines", "cpu_dequant_ops", "numa_aware",
                  "step_overhead_us"):
        assert getattr(hm, field) == getattr(kt, field), field
    assert (kt.gpu_ops_per_expert, hm.gpu_ops_per_expert) == (1, 11)
    assert (kt.kernels_per_layer, hm.kernels_per_layer) == (8, 60)
    assert set(hm.calibrate) == {"gpu_kernel_us"}


def test_ktransformers_cpu_speed_is_the_runtimes_alone():
    # the preset's cpu_speedup is 1: a CPU expert costs what the runtime profile says
    hw = replace(ROUND_HW, cpu_mem_bw_gbs=0.4)
    cm = policy_cost_model(make_policy("ktransformers"), hw, ROUND_MODEL, NO_DRAFT, 0)
    # 40 kB at 0.4 GB/s = 100 us
    assert np.isclose(cm.cpu_expert_table()[1], 100 * US)


def test_hqq_linears_add_their_dequant_ops_to_experts_and_attention():
    # 6 extra ops per HQQ linear: an expert (3 linears) pays 1 + 18 = 19 launches of 1 us over its
    # 10 us read; the layer's 4 attention projections add 24 launches to its fixed cost
    hw = replace(ROUND_HW, gpu_quant_ops={"hqq2": 6})
    m = replace(ROUND_MODEL, quant="hqq2")
    plain = CostModel(ROUND_HW, m, NO_DRAFT)
    hqq = CostModel(hw, m, NO_DRAFT)
    assert m.expert_quant == "hqq2" and m.dense_quant == "hqq2"
    assert np.isclose(hqq.gpu_expert_table()[1] - plain.gpu_expert_table()[1], 18 * US)
    assert np.isclose(hqq.layer_fixed_s(1, 0) - plain.layer_fixed_s(1, 0), 24 * US)
    # formats the table does not name add nothing
    f16 = replace(ROUND_MODEL, quant="f16")
    assert CostModel(hw, f16, NO_DRAFT).gpu_expert_table()[1] == CostModel(ROUND_HW, f16, NO_DRAFT).gpu_expert_table()[1]


def test_moe_infinity_profile_dispatches_experts_from_cpp():
    hf, mi = runtime_spec("hf_transformers"), runtime_spec("moe_infinity")
    assert (hf.gpu_ops_per_expert, mi.gpu_ops_per_expert) == (11, 1)
    assert mi.kernels_per_layer == hf.kernels_per_layer and mi.cpu_mem_eff == hf.cpu_mem_eff
    # only its own per-op cost is fitted (on its own points), every other value is hf_transformers'
    assert list(mi.calibrate) == ["gpu_kernel_us"] and policy_runtime("moe_infinity") == "moe_infinity"


def test_uva_streamed_layer_also_reads_its_dense_weights():
    # attention 1976 + router 8 x 3 = 2000 params x 2 B = 4 kB per layer, one routed expert per token:
    # a stream is 10 us + (40 kB + 4 kB) / 1 GB/s = 54 us instead of 50 us
    plain = CostModel(ROUND_HW, ROUND_MODEL, NO_DRAFT)
    uva = CostModel(replace(ROUND_HW, stream_dense=True), ROUND_MODEL, NO_DRAFT)
    assert plain.stream_dense_bytes() == 0.0 and uva.stream_dense_bytes() == 4000.0
    assert np.isclose(plain.transfer_s(), 50 * US) and np.isclose(uva.transfer_s(), 54 * US)
    # top-2: each of the two streamed experts carries half of the layer's dense bytes
    two = CostModel(replace(ROUND_HW, stream_dense=True), replace(ROUND_MODEL, top_k=2), NO_DRAFT)
    assert two.stream_dense_bytes() == 2000.0
    assert runtime_spec("vllm").stream_dense and not runtime_spec("custom_cuda").stream_dense
