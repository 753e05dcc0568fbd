"""A replayed trace brings its model, workload and acceptance (QA case D27; captured tiny models)."""
import numpy as np

from sim.run.resolve import record_acceptance, resolve
from sim.run.runner import run_one
from sim.run.workload import workload_acceptance
from tests.traces.helpers import small_trace
from traces.schema import SDRecord
from sim.run.spec import RunSpec

TINY = {"name": "tiny:qwen3_moe", "n_layers": 3, "n_dense_layers": 0, "n_experts": 8, "top_k": 2,
        "n_shared_experts": 0, "hidden": 64, "moe_intermediate": 32, "expert_params": 6144,
        "non_expert_params": 119488.0, "attn_params_per_layer": 12320, "lm_head_params": 32768,
        "kv_bytes_per_token": 1024, "precision": "f32"}


def test_a_trace_with_a_model_spec_simulates_without_a_preset():
    tr = small_trace(tokens=40)
    tr.meta.update(model="tiny:qwen3_moe", model_spec=TINY, workload="humaneval")
    r = resolve(RunSpec.of(policy="moespac", model=None, workload=None, trace=tr, gen_tokens=32))
    assert r.model.name == "tiny:qwen3_moe" and r.model.n_experts == 8
    assert r.workload == "humaneval" and r.acceptance == workload_acceptance("humaneval") == r.identity["acceptance"]
    tr.meta["acceptance"] = 0.5
    assert resolve(RunSpec.of(policy="moespac", model=None, workload=None, trace=tr)).acceptance == 0.5
    row = run_one(RunSpec.of(policy="moespac", model=None, workload=None, trace=tr, gen_tokens=32)).row
    assert row["model"] == "tiny:qwen3_moe" and row["workload"] == "humaneval" and row["gen_tokens"] == 32
    assert row["trace_sha256"] and row["model_spec"].startswith("{")


def test_acceptance_of_an_sd_record():
    tr = small_trace(tokens=12)
    # 3 verify steps of gamma=3: accepted 3 (no rejection), 1 and 0 (one rejection each)
    tr.sd = SDRecord(3, np.zeros((3, 4, 3, 2), np.int16), np.array([3, 1, 0]), np.array([4, 4, 4]))
    assert record_acceptance(tr) == 4 / 6
