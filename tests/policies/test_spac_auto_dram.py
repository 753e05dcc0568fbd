"""spac_auto prices the host DRAM its copies take from the CPU's experts (the cost model's shared
DRAM): exact on hand cases, equal to the cost model's own rule, and charged by the online comparison."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.machine.cost_model import GB, CostModel, dram_cpu_time, dram_speed
from sim.policies import make_policy
from sim.policies.auto.estimate import LayerRun, cpu_with_copies, layer_seconds, layer_times
from sim.policies.base import CPU, FETCH, GPU, Signals
from sim.policies.split import ExpertTimes
from tests.policies.conftest import Driver, context, costs, random_counts


def _tight(left_bps: float = 0.005):
    """The toy costs (cpu(1) = 100, transfer = 250, expert_bytes = 1) with ``left_bps`` of DRAM left:
    one CPU expert needs 0.01 bytes/s, so it runs at k = 0.5 while a copy runs."""
    return dataclasses.replace(costs(), dram_left_bps=left_bps)


def test_cpu_with_copies_hand_case():
    c = _tight()
    t = ExpertTimes(c)
    # one expert, 100 s of work at k = 0.5 under one 250 s copy: ends within it, 100 / 0.5
    assert cpu_with_copies([1], 1, c, t) == pytest.approx(200.0)
    # two experts (1 and 2 tokens: 100 + 150 s, 2 bytes -> need 0.008 b/s, k = 0.625) under one
    # 250 s copy: the work outlasts it, so 250 + 250 * (1 - 0.625)
    assert cpu_with_copies([1, 2], 1, c, t) == pytest.approx(250.0 + 250.0 * 0.375)
    assert cpu_with_copies([1], 0, c, t) == pytest.approx(100.0)       # no copy: full speed


def test_dram_speed_is_the_cost_models_rule():
    from sim.run.resolve import resolve
    from sim.run.spec import RunSpec
    spec = resolve(RunSpec.of(policy="spac_auto", hardware="rtx4090_pcie4", model="mixtral_8x7b",
                              draft="qwen3_0_6b", cache_ratio=0.05, runtime="custom_cuda"))
    cm = CostModel(spec.hw, spec.model, spec.draft)
    table = cm.cost_table(8, 4096)
    assert table.dram_left_bps == pytest.approx((spec.hw.host_dram_gbs - spec.hw.pcie_h2d_gbs) * GB)
    for n in (1, 3):
        cpu_s = n * float(table.cpu(1))
        nbytes = n * table.expert_bytes
        assert dram_speed(nbytes, cpu_s, table.dram_left_bps) == cm.dram_share(nbytes, cpu_s)
    assert dram_speed(1.0, 1.0, float("inf")) == 1.0


def test_layer_times_slow_only_the_cpu_side_while_copying():
    c = _tight()
    ctx = context(cost=c)
    t = ExpertTimes(c)
    counts = np.array([1, 1, 0, 0])
    present = np.array([False, True, False, False])
    where = np.array([CPU, GPU, CPU, CPU])
    free, slowed = layer_times(where, counts, present, ctx, t, 5.0, LayerRun(0.0, 1))
    assert free == pytest.approx(20.0 + 100.0 + 5.0)          # fixed + max(cpu 100, gpu 10) + sync
    assert slowed == pytest.approx(20.0 + 200.0 + 5.0)        # the CPU expert at half speed
    # the placement's own copy: expert 0 fetched, nothing on the CPU -> no contention
    where2 = np.array([FETCH, GPU, CPU, CPU])
    own = layer_seconds(where2, counts, present, ctx, t, 5.0)
    assert own == layer_times(where2, counts, present, ctx, t, 5.0, LayerRun(0.0, 0))[0]
    # DRAM not modelled: equal
    f, s = layer_times(where, counts, present, context(), ExpertTimes(costs()), 5.0, LayerRun(0.0, 3))
    assert f == s
    assert dram_cpu_time(100.0, 0.5, 250.0) == 200.0


def _run(left_bps: float):
    pol = make_policy("spac_auto", window=30, samples=8)
    prof = np.array([[9.0, 5.0, 1.0, 0.0], [0.0, 2.0, 8.0, 3.0]])
    cost = dataclasses.replace(costs(), dram_left_bps=left_bps)
    ctx = context(L=2, E=4, k=2, slots=2, gamma=0, cost=cost, seed=3, profile=prof)
    d = Driver(pol, ctx, prefetch_budget=1)
    rng = np.random.default_rng(3)
    for s in range(12):
        d.core.step_gamma(s, 0)
        d.step(s, random_counts(rng, 1, 2, 4, 2, window=1)[0])
        d.core.step_end(s, 1, 0)
    return pol


def test_online_comparison_charges_the_copies(monkeypatch):
    """The running strategy's measured time: the same decisions (prefetching held on in both, so that
    none reads the DRAM figure) cost more with tight DRAM; with one copy in flight, three CPU experts
    (300 s, k = 0.5 under a 250 s copy) take 300 + 250 * 0.5 = 425 s instead of 300."""
    from sim.policies.auto.policy import SpacAuto
    monkeypatch.setattr(SpacAuto, "prefetch_pays", lambda self, costs: True)
    loose, tight = _run(float("inf")), _run(0.005)
    assert loose.sec == pytest.approx(loose.sec_free)
    assert tight.sec_free == pytest.approx(loose.sec_free) and tight.sec >= tight.sec_free
    cache = tight.cache_ref
    assert tight.shadows and not cache.inflight.any() and not cache.resident[0, :3].any()
    cache.inflight[0, 3] = True
    tight.on_step_start(12, Signals(), cache)
    before = tight.step_free_s
    counts = np.array([1, 1, 1, 0])
    out = tight.place(0, counts, Signals(), cache)
    assert (np.asarray(out.where)[:3] == CPU).all()
    assert tight.step_s - tight.step_free_s == pytest.approx(125.0)
    # the expert phase AdaSpec priced is reused; it equals the phase priced from scratch
    ref = layer_times(np.asarray(out.where), counts, cache.resident[0], tight.ctx, ExpertTimes(tight.ctx.costs),
                      30e-6, LayerRun(tight.ctx.costs.transfer_s, 1, tight.g + 1))
    assert tight.step_free_s - before == pytest.approx(ref[0], rel=1e-12)
