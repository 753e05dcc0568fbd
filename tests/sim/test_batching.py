"""B concurrent requests: union of experts per layer, sum of tokens per expert, per-request speeds."""
import numpy as np
import pytest

from sim.run.batching import merge_schedules
from sim.run.user_input import UserInputError
from traces.windows import Schedule
from sim.run.spec import RunSpec


def sched(counts, n_verify, produced, gamma=2):
    counts = np.asarray(counts, dtype=np.uint8)
    rows = [np.zeros((int(n), counts.shape[1], 1), dtype=np.int16) for n in n_verify]
    return Schedule(counts, np.asarray(n_verify), np.asarray(produced), rows, gamma)


A = sched([[[1, 2, 0]], [[0, 3, 0]]], [3, 3], [2, 1])        # 2 steps, 1 layer, 3 experts
B = sched([[[0, 1, 2]]], [3], [3])                            # 1 step


def test_a_step_runs_the_union_of_experts_with_summed_tokens():
    b = merge_schedules([A, B])
    assert b.schedule.counts.tolist() == [[[1, 3, 2]], [[0, 3, 0]]]
    assert b.schedule.n_verify.tolist() == [6, 3] and b.schedule.produced.tolist() == [5, 1]
    assert [r.shape[0] for r in b.schedule.rows] == [6, 3]       # each request verifies its own window
    assert b.tokens.tolist() == [3, 3] and b.last_step.tolist() == [1, 0]
    assert b.request_tps([0.1, 0.2]).tolist() == pytest.approx([3 / 0.3, 3 / 0.1])


def test_a_batch_of_one_is_the_request_itself():
    b = merge_schedules([A])
    assert b.schedule is A and b.last_step.tolist() == [1]


def test_counts_widen_past_uint8():
    big = sched([[[200, 0, 0]]], [3], [1])
    assert merge_schedules([big, big]).schedule.counts.max() == 400


def test_a_batched_run_requests_the_union_and_reports_each_request():
    from sim.run.runner import run_one

    args = dict(policy="moespac", gen_tokens=32, cache_ratio=0.17)
    one = run_one(RunSpec.of(**args)).row
    two = run_one(RunSpec.of(batch=2, **args))
    row = two.row
    single = [run_one(RunSpec.of(seed=s, **args)) for s in (0, 1)]
    assert row["gen_tokens"] == 64 and row["batch"] == 2
    assert row["n_steps"] == max(r.row["n_steps"] for r in single)
    assert row["mean_accepted"] == pytest.approx(np.mean([r.row["mean_accepted"] for r in single]))
    merged = two.engine.sched.counts
    req = [r.engine.sched.counts for r in single]
    S = min(len(req[0]), len(req[1]))
    union = ((req[0][:S] > 0) | (req[1][:S] > 0))
    assert ((merged[:S] > 0) == union).all()
    assert (merged[:S].astype(int) == req[0][:S].astype(int) + req[1][:S].astype(int)).all()
    assert row["tps_request_min"] <= row["tps_per_request"] < row["tps"]
    assert one["tps_per_request"] == one["tps"] and one["batch"] == 1
    assert row["run_id"] != one["run_id"]


def test_combinations_not_modelled_are_refused():
    from sim.run.runner import run_one
    from traces.synth import synthesize

    with pytest.raises(UserInputError, match="stagger=2 with prefill=true"):
        run_one(RunSpec.of(policy="llamacpp", batch=2, stagger=2, prefill=True, gen_tokens=8))
    with pytest.raises(UserInputError, match="batch=2: concurrent requests need independent traces"):
        run_one(RunSpec.of(policy="llamacpp", batch=2, gen_tokens=8, trace=synthesize("qwen3_30b_a3b", "gsm8k", 16, 0)))


def test_staggered_arrivals_join_later_and_are_timed_from_their_first_step():
    b = merge_schedules([A, B], stagger=1)                    # B joins at step 1
    assert b.schedule.counts.tolist() == [[[1, 2, 0]], [[0, 4, 2]]]
    assert b.schedule.n_verify.tolist() == [3, 6] and b.schedule.produced.tolist() == [2, 4]
    assert b.first_step.tolist() == [0, 1] and b.last_step.tolist() == [1, 1]
    assert b.request_tps([0.1, 0.2]).tolist() == pytest.approx([3 / 0.3, 3 / 0.2])
    with pytest.raises(UserInputError, match="stagger=3: no request is decoding at step 2"):
        merge_schedules([A, B], stagger=3)


def test_a_staggered_batch_runs_end_to_end():
    from sim.run.runner import run_one

    row = run_one(RunSpec.of(policy="hybrimoe", batch=3, stagger=4, gen_tokens=24)).row
    assert row["gen_tokens"] == 72 and row["stagger"] == 4 and row["n_steps"] == 24 + 2 * 4
    with pytest.raises(UserInputError, match="stagger=2: arrivals need concurrent requests"):
        run_one(RunSpec.of(policy="hybrimoe", stagger=2, gen_tokens=8))


def test_concurrent_prompts_are_prefilled_one_after_another():
    from sim.run.runner import run_one

    args = dict(policy="hybrimoe", gen_tokens=8, prompt_tokens=300, ubatch=128, prefill=True, quant="q4_k_m")
    first, second = (run_one(RunSpec.of(seed=s, **args)).row for s in (0, 1))
    both = run_one(RunSpec.of(batch=2, **args)).row
    assert both["ttft_max_s"] == pytest.approx(first["ttft_s"] + second["ttft_s"], rel=1e-12)
    assert both["ttft_s"] == pytest.approx((2 * first["ttft_s"] + second["ttft_s"]) / 2, rel=1e-12)
    assert both["prefill_tok_s"] == pytest.approx(600 / both["ttft_max_s"])
    assert both["e2e_tok_s"] == pytest.approx(both["gen_tokens"] / (both["ttft_max_s"] + both["decode_s"]))
