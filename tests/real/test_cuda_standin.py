"""The CPU stand-in for CUDA (``tests/real/fake_cuda.py``) and the executor's CUDA branch on it.

First the stand-in itself on hand cases: copies land later and in stream order, and each hazard
(reading before the copy is ordered or a buffer never written, overwriting while read or in flight, re-recording an event
early, an asynchronous copy from pageable memory) raises. Then the live executor with the
stand-in as its device API: its CUDA branch (copy stream, events, guards, pinned host experts)
decodes exactly the tokens of plain greedy decoding, with no hazard, copies on the copy stream and
expert kernels on the compute stream. The mutations these tests catch are listed in
docs/validation.md ("The CUDA path on CPU").
"""
from __future__ import annotations

import pytest

from tests.real import need

torch = need("torch")
need("transformers")

from torch.nn import functional as F  # noqa: E402

from tests.real.fake_cuda import FakeCuda  # noqa: E402
from tests.real.fake_memory import Hazard, plain  # noqa: E402


def setup(copy_s: float = 0.0):
    """A stand-in, its copy stream, a two-slot buffer and two pinned host experts (2, 3)."""
    fake = FakeCuda(copy_s=copy_s)
    slots = fake.empty((2, 2, 3), torch.float32)
    host = fake.pin(torch.arange(12.0).reshape(2, 2, 3) + 1)
    return fake, fake.new_stream(), slots, host


def test_the_standin_has_exactly_the_device_apis_methods():
    from real.offload.device_api import CudaApi

    def public(cls):
        return {n for n in vars(cls) if not n.startswith("_") and callable(getattr(cls, n))}
    assert public(CudaApi) == public(FakeCuda) - {"kernel"}   # kernel: how stand-in buffers report ops


def copy_on(fake, stream, dst, src):
    with fake.use_stream(stream):
        fake.copy_async(dst, src)
        event = fake.new_event()
        fake.record(event, stream)
    return event


def test_copies_land_later_and_in_stream_order():
    fake, s, slots, host = setup(copy_s=0.03)
    first = copy_on(fake, s, slots[0], host[0])
    second = copy_on(fake, s, slots[1], host[1])
    assert second.at - first.at == pytest.approx(0.03, abs=1e-9)     # the FIFO: one after the other
    assert not fake.query(second) and plain(slots).abs().sum() == 0   # nothing has landed yet
    fake.event_sync(first)
    assert torch.equal(plain(slots[0]), host[0]) and plain(slots[1]).abs().sum() == 0
    fake.event_sync(second)
    assert fake.query(second) and torch.equal(plain(slots), host)


def test_reading_a_slot_before_its_copy_is_ordered_raises():
    fake, s, slots, host = setup(copy_s=10.0)                 # the copy would land in 10 s
    event = copy_on(fake, s, slots[0], host[0])
    x = torch.ones(1, 3)
    with pytest.raises(Hazard, match="read before the copy"):
        F.linear(x, slots[0])
    fake.wait_event(fake.default, event)                      # the compute stream waits for it
    y = F.linear(x, slots[0])                                  # ordered: the bytes are there
    assert y.tolist() == [[6.0, 15.0]] and len(fake.hazards) == 1


def test_overwriting_a_slot_that_a_queued_kernel_reads_raises():
    fake, s, slots, host = setup()
    fake.event_sync(copy_on(fake, s, slots[0], host[0]))
    F.linear(torch.ones(1, 3), slots[0])                       # a kernel on the compute stream reads it
    with pytest.raises(Hazard, match="kernel on stream default .* reads it"):
        copy_on(fake, s, slots[0], host[1])
    used = fake.new_event()                                     # the slot guard: wait for the reader
    fake.record(used, fake.default)
    fake.wait_event(s, used)
    fake.event_sync(copy_on(fake, s, slots[0], host[1]))
    assert torch.equal(plain(slots[0]), host[1])


def test_overwriting_a_slot_while_its_copy_is_in_flight_raises():
    fake, s, slots, host = setup(copy_s=10.0)
    copy_on(fake, s, slots[1], host[0])
    with pytest.raises(Hazard, match="still in flight"):
        copy_on(fake, s, slots[1], host[1])                    # same stream, but the slot was reused early
    copy_on(fake, s, slots[0], host[1])                        # another slot is fine


def test_re_recording_an_event_before_it_completed_raises():
    fake, s, slots, host = setup(copy_s=10.0)
    event = copy_on(fake, s, slots[0], host[0])
    with pytest.raises(Hazard, match="re-recorded"):
        fake.record(event, s)
    fake2, s2, slots2, host2 = setup()
    event = copy_on(fake2, s2, slots2[0], host2[0])
    fake2.event_sync(event)
    fake2.record(event, s2)                                    # seen complete: reuse is fine


def test_reading_a_buffer_nothing_was_copied_into_raises():
    fake, s, slots, host = setup()
    fake.event_sync(copy_on(fake, s, slots[0], host[0]))
    F.linear(torch.ones(1, 3), slots[0])
    with pytest.raises(Hazard, match="nothing was written"):
        F.linear(torch.ones(1, 3), slots[1])


def test_asynchronous_copy_from_pageable_memory_raises():
    fake, s, slots, _ = setup()
    with pytest.raises(Hazard, match="pageable"):
        copy_on(fake, s, slots[0], torch.ones(2, 3))


# --- the executor's CUDA branch on the stand-in ----------------------------------------------

POLICIES = ("moespac", "llamacpp_sd", "ondemand_lru")   # prefetch, static placement, demand fetches


@pytest.fixture(scope="module")
def runs():
    """``get(policy, copy_s)``: the stand-in's log of the policy's run, the counters and tokens of one prompt,
    plain greedy's tokens and the stand-in (one model load and one offload for every policy; a
    failed run fails only its own tests)."""
    from real.offload.models import load_models, offload
    from real.offload.options import RunOptions, parse
    from real.offload.run import load_hardware, prompt_list, reference_tokens
    from real.offload.session import OffloadSession

    def options(policy):
        return parse(RunOptions, ["target=tiny:qwen3_moe", "draft=tiny:dense", f"policy={policy}",
                                  "cache_ratio=0.3", "gamma=4", "max_new_tokens=12", "prompts=tiny:1",
                                  "prompt_len=8", "quiet=true", "warmup=0"])
    models = load_models(options(POLICIES[0]))
    prompts = prompt_list(options(POLICIES[0]), models)
    reference = reference_tokens(models, prompts, options(POLICIES[0]))[0]
    state, done = {}, {}

    def fresh(models):
        state["models"], state["fake"] = models, FakeCuda(copy_s=0.002)
        state["executor"] = offload(models, api=state["fake"])
    fresh(models)

    def get(policy, copy_s=0.002):
        key = (policy, copy_s)
        if key not in done:
            fake, start = state["fake"], len(state["fake"].log)
            fake.copy_s = copy_s
            try:
                session = OffloadSession(state["models"], state["executor"], options(policy),
                                         load_hardware(options(policy).hardware))
                _, counters, _, tokens = session.run_prompt(*prompts[0], 0)
                settled = all(fake.known.get(st, 0) >= st.seq for st in fake.streams[1:])   # copies seen landed
                done[key] = (fake.log[start:], counters, tokens, reference, list(fake.hazards), settled)
            except Exception as exc:   # a hazard left the executor mid-run: the next policy starts afresh
                done[key] = exc
                state["executor"].close()
                fresh(load_models(options(policy)))
            fake.copy_s = 0.002
        if isinstance(done[key], Exception):
            raise done[key]
        return done[key]
    yield get
    state["executor"].close()


@pytest.mark.parametrize("policy", POLICIES)
def test_cuda_branch_on_the_standin_equals_plain_greedy(runs, policy):
    log, c, tokens, reference, hazards, settled = runs(policy)
    assert tokens == reference and hazards == []
    assert settled        # at the end of a prompt every copy in flight has landed and was seen to
    assert c.gpu_execs > 0 and c.gpu_execs + c.cpu_execs == c.requests
    slot_reads = [op for op in log if op[0] == "linear"]
    assert len(slot_reads) == 2 * c.gpu_execs          # gate_up and down of each device expert


@pytest.mark.parametrize("policy", ["moespac", "ondemand_lru"])
def test_transfers_go_on_the_copy_stream_and_kernels_on_the_compute_stream(runs, policy):
    log, c, _, _, _, _ = runs(policy)
    copies = [op for op in log if op[2] == "expert-copy"]
    assert c.prefetches + c.demand_fetches > 0 and len(copies) == 2 * (c.prefetches + c.demand_fetches + c.streams)
    assert {op[1] for op in copies} == {"s1"} and {op[0] for op in copies} == {"copy"}
    assert {op[1] for op in log if op[0] == "linear"} == {"default"}


def test_a_slow_link_keeps_the_tokens_and_a_prompt_ends_with_its_copies_landed(runs):
    _, c, tokens, reference, hazards, settled = runs("moespac", copy_s=0.03)   # copies in flight at the end
    assert tokens == reference and hazards == [] and settled and c.prefetches > 0
