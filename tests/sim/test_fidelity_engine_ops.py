"""Per-engine op counts: an engine that calls a GPU expert op by op from Python (HybriMoE's
kTransformers fork) pays ``gpu_ops_per_expert`` launches per expert; kTransformers' CPU kernels
count once, in the runtime profile, not again as a policy factor."""
from dataclasses import replace

import numpy as np

from sim.cost_model import CostModel
from sim.protocol import policy_cost_model
from sim.policies.registry import make_policy, policy_runtime
from sim.specs.machine import runtime_spec
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
