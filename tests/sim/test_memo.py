"""What a sweep's runs share is built once, read-only, and equal to building it afresh."""
from __future__ import annotations

import numpy as np
import pytest

from sim.run import runner, workload
from traces.windows import build_schedule
from sim.run.spec import RunSpec


def test_preset_specs_are_shared_mappings_are_built():
    assert workload.preset_spec("hardware", "rtx4090_pcie4") is workload.preset_spec("hardware", "rtx4090_pcie4")
    from sim.machine.specs import load_preset

    patched = dict(load_preset("hardware", "rtx4090_pcie4"), name="patched")
    assert workload.preset_spec("hardware", patched).name == "patched"


def test_memoised_schedule_equals_a_fresh_one_and_is_read_only():
    key = ("qwen3_30b_a3b", "gsm8k", 16 + 4 + 1, 0, None)
    trace = workload.synthetic_trace(*key)
    shared = workload.schedule(trace, key, 4, 16, 0.7, 0)
    assert workload.schedule(trace, key, 4, 16, 0.7, 0) is shared
    fresh = build_schedule(trace, 4, 16, 0.7, 0)
    for a, b in ((shared.counts, fresh.counts), (shared.n_verify, fresh.n_verify),
                 (shared.produced, fresh.produced)):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="read-only"):
        shared.counts[0, 0, 0] = 1
    assert workload.schedule(trace, None, 4, 16, 0.7, 0) is not shared     # a loaded trace: not memoised


def test_runs_sharing_a_schedule_give_the_rows_of_a_cold_start():
    args = dict(workload="qa", gen_tokens=16, gamma=4)
    warm = [runner.run_one(RunSpec.of(policy=p, **args)).row for p in ("moespac", "oracle", "moespac")]
    workload._synthetic_schedule.cache_clear()
    cold = runner.run_one(RunSpec.of(policy="moespac", **args)).row
    def exact(row):  # repr keeps NaN comparable and every float bit
        return repr(sorted((k, v) for k, v in row.items() if k != "sim_wall_s"))

    assert exact(warm[0]) == exact(warm[2]) == exact(cold)


def test_request_lists_are_shared_for_read_only_counts_only():
    from sim.engine.decode import requests_by_layer, shared_requests

    key = ("qwen3_30b_a3b", "gsm8k", 16 + 4 + 1, 0, None)
    counts = workload.schedule(workload.synthetic_trace(*key), key, 4, 16, 0.7, 0).counts
    req, nreq = shared_requests(counts)
    assert shared_requests(counts)[0] is req                   # built once per read-only array
    fresh = requests_by_layer(counts)
    assert all(np.array_equal(a, b) for ra, rb in zip(req, fresh[0]) for a, b in zip(ra, rb))
    assert all(np.array_equal(a, b) for ra, rb in zip(nreq, fresh[1]) for a, b in zip(ra, rb))
    own = counts.copy()                                        # writeable: never shared
    assert shared_requests(own)[0] is not shared_requests(own)[0]
