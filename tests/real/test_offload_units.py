"""Pieces of the offloaded executor: expert math, routing order, slots, copy engine, timing, CLI."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tests.real import need

torch = need("torch")
need("transformers")

from real.cli import main  # noqa: E402
from real.offload.copier import DEMAND, PREFETCH, CopyEngine, Faults, Transfer  # noqa: E402
from real.offload.expert_math import LayerRouting, routed_rows  # noqa: E402
from real.offload.experts_fn import moe_modules, take_model_experts  # noqa: E402
from real.offload.host import HostExperts  # noqa: E402
from real.offload.layer import bypass  # noqa: E402
from real.offload.options import OptionError, RunOptions, parse  # noqa: E402
from real.offload.slots import SlotPool  # noqa: E402
from real.offload.timed_policy import TimedPolicy  # noqa: E402
from real.tiny_models import build_tiny  # noqa: E402
from sim.policies import make_policy  # noqa: E402


@pytest.mark.parametrize("kind", ["qwen3_moe", "deepseek_v2"])
def test_offloaded_expert_math_is_bit_identical_to_eager(kind):
    """One layer's experts from host weights (the executor's code path) == the eager module."""
    model = build_tiny(kind)
    _, experts, gates = moe_modules(model)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(9, experts[0].gate_up_proj.shape[-1], generator=gen)
    with torch.inference_mode():
        _, weights, index = gates[0](x)
        want = experts[0](x, index, weights)
        host = take_model_experts(model, torch.device("cpu"))

        class Ex:   # the executor attributes bypass() reads
            pass
        ex = Ex()
        ex.host, ex.acts = host, [m.act_fn for m in experts]
        got = bypass(ex, 0, experts[0], x, index, weights)
    assert torch.equal(got, want)


def test_routed_rows_follow_the_eager_order():
    index = np.array([[3, 1], [1, 2], [0, 3]])
    pos, tok = routed_rows(index, 3)
    assert pos.tolist() == [0, 1] and tok.tolist() == [0, 2]    # top-k slot first, then token
    routing = LayerRouting(torch.tensor(index), 5)
    assert routing.counts.tolist() == [1, 2, 1, 2, 0] and routing.counts.dtype == np.uint8
    routing.to_device(torch.device("cpu"))
    assert routing.rows(1)[1].tolist() == [1, 0] and routing.rows(1)[0].tolist() == [0, 1]


def test_slot_pool_assigns_and_frees():
    pool = SlotPool(2, ((4, 3), (3, 2)), torch.float32, torch.device("cpu"))
    a, b = pool.take((0, 1)), pool.take((1, 1))
    assert {a, b} == {0, 1} and not pool.free
    pool.release((0, 1))
    assert pool.take((2, 0)) == a
    with pytest.raises(RuntimeError):
        pool.take((2, 0))
    s = pool.acquire_stage()
    pool.release_stage(s)
    assert pool.acquire_stage() == s and pool.buffers(("stage", s))[0].shape == (4, 3)


def test_copy_engine_serves_demand_before_prefetch_and_copies_bytes():
    host = HostExperts([torch.arange(24.0).reshape(2, 4, 3)], [torch.arange(12.0).reshape(2, 3, 2)])
    pool = SlotPool(3, host.expert_shapes, torch.float32, torch.device("cpu"))
    order, gate = [], threading.Event()
    offered = [Transfer.one(0, 0, PREFETCH, ("slot", 2))]

    def landed(job):
        order.append((job.kind, job.expert))
        if len(order) == 1:
            gate.wait()                     # the link is busy with the first demand...
    engine = CopyEngine(host, pool, lambda: offered.pop() if offered else None, landed, Faults())
    try:
        first, second = Transfer.one(0, 1, DEMAND, ("slot", 0)), Transfer.one(0, 0, DEMAND, ("slot", 1))
        engine.submit(first)
        deadline = time.monotonic() + 30
        while not order:
            assert time.monotonic() < deadline, "the copy engine never served the first demand"
            time.sleep(0.001)
        engine.wake()                       # ...a prefetch is wanted and a second demand arrives
        engine.submit(second)
        gate.set()
        engine.wait(second)
        while offered:
            assert time.monotonic() < deadline, "the copy engine never asked for the prefetch"
            time.sleep(0.001)
        engine.close()
        assert order == [(DEMAND, 1), (DEMAND, 0), (PREFETCH, 0)]
        assert torch.equal(pool.gate_up[0], host.gate_up[0][1]) and torch.equal(pool.down[1], host.down[0][0])
    finally:
        engine.close()


def test_copy_engine_moves_a_block_in_one_job():
    """A block :class:`Transfer` (several experts of a layer) is copied whole and landed once."""
    from sim.protocol import Copy
    host = HostExperts([torch.arange(36.0).reshape(3, 4, 3)], [torch.arange(18.0).reshape(3, 3, 2)])
    pool = SlotPool(3, host.expert_shapes, torch.float32, torch.device("cpu"))
    landed = []
    engine = CopyEngine(host, pool, lambda: None, landed.append, Faults())
    try:
        job = Transfer(Copy(0, (2, 0), DEMAND), (("slot", 1), ("slot", 0)))
        engine.submit(job)
        engine.wait(job)
        assert landed == [job] and job.ok
        assert torch.equal(pool.gate_up[1], host.gate_up[0][2]) and torch.equal(pool.down[0], host.down[0][0])
    finally:
        engine.close()


def test_faults_fail_every_nth_transfer_of_chosen_kinds():
    f = Faults(fail_every=2, kinds=(DEMAND,))
    jobs = [Transfer.one(0, i, DEMAND if i % 3 else PREFETCH, ("slot", 0)) for i in range(9)]
    failed = [j.expert for j in jobs if f.strike(j)]
    assert failed == [2, 5, 8][:len(failed)] and f.failed == len(failed) == 3


def test_timed_policy_delegates_and_measures():
    policy = TimedPolicy(make_policy("llamacpp"))
    assert policy.name == "llamacpp" and policy.speculative is False
    policy.overlap = False
    assert policy.inner.overlap is False
    policy.on_step_start(0, None, None)
    policy.on_layer_start(0, None)
    assert policy.calls == 2 and policy.take() > 0.0 and policy.take() == 0.0


def test_options_report_bad_keys_and_values():
    with pytest.raises(OptionError, match="valid keys"):
        parse(RunOptions, ["nosuchkey=1"])
    with pytest.raises(OptionError, match="gamma"):
        parse(RunOptions, ["gamma=many"])
    opts = parse(RunOptions, ["policy_args.tau=2", "sync=true", "layers=3"])
    assert opts.policy_args == {"tau": 2} and opts.sync is True and opts.layers == 3


def test_cli_exit_codes(capsys):
    assert main(["--help"]) == 0
    assert main(["frobnicate"]) == 2
    assert main(["run", "nosuchkey=1"]) == 2
    assert main(["run", "target=tiny:qwen3_moe", "draft=tiny:dense", "policy=nosuch"]) == 2
    assert "unknown policy" in capsys.readouterr().err
    assert main(["run", "--help"]) == 0
