"""spac_auto: deterministic, blind to the future, its load-time choice equal to running the candidates,
and its pieces (the profile sampler, the restore of a static set, the parameter checks) exact."""
from __future__ import annotations

import numpy as np
import pytest

from sim.policies import make_policy
from sim.policies.auto.estimate import profile_tokens
from sim.policies.auto.restore import Restore
from sim.protocol.expert_cache import ExpertCache
from sim.run.runner import run_one
from sim.run.spec import RunSpec
from tests.policies.conftest import Driver, context, costs, random_counts

CELL = dict(workload="alpaca", draft="qwen3_0_6b", gamma=8, gen_tokens=8, runtime="custom_cuda")


class Poison:
    """Any use of the trace's future fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the policy read ctx.future_counts ({name})")

    def __array__(self, *a, **k):
        raise AssertionError("the policy read ctx.future_counts")

    def __getitem__(self, key):
        raise AssertionError("the policy read ctx.future_counts")

    def __bool__(self):
        raise AssertionError("the policy read ctx.future_counts")


def _drive(seed: int, future=None):
    """spac_auto on a toy model (2 layers x 4 experts, 2 slots, gamma up to 12) for 24 steps."""
    pol = make_policy("spac_auto", window=4, samples=8)
    prof = np.array([[9.0, 5.0, 1.0, 0.0], [0.0, 2.0, 8.0, 3.0]])
    ctx = context(L=2, E=4, k=1, slots=2, gamma=12, cost=costs(draft=40.0, n_max=16), seed=seed,
                  profile=prof, future=future)
    d = Driver(pol, ctx, prefetch_budget=1)
    rng = np.random.default_rng(seed)
    for s in range(24):
        g = d.core.step_gamma(s, 12)
        d.step(s, random_counts(rng, 1, 2, 4, 1, window=g + 1)[0])
        d.core.step_end(s, g + 1, g // 2)
    return pol, d


def test_never_reads_the_future_and_asks_for_none():
    assert make_policy("spac_auto").needs_future is False
    pol, d = _drive(0, future=Poison())       # decisions through the executors' core, future poisoned
    assert pol.metrics()["auto_choice"] in (0.0, 1.0, 2.0)


def test_deterministic_from_the_seed():
    """The same seed gives the same decisions (toy driver) and the same run (engine)."""
    (p1, d1), (p2, d2) = _drive(5), _drive(5)
    assert p1.metrics() == p2.metrics()
    assert all((a == b).all() for a, b in zip(d1.placements, d2.placements)) and len(d1.placements) == 48
    args = dict(CELL, policy="spac_auto", hardware="rtx4090_pcie4", model="olmoe_1b_7b", cache_ratio=0.05)
    a, b = (run_one(RunSpec.of(**args)).row for _ in range(2))
    keys = ("tps", "decode_s", "hit_rate", "pcie_gb", "auto_choice", "auto_switched", "gamma_mean")
    assert [a.get(k) for k in keys] == [b.get(k) for k in keys]


@pytest.mark.parametrize("hardware, model, ratio", [("rtx4090_pcie4", "mixtral_8x7b", 0.12),
                                                    ("rtx3090_ddr4", "mixtral_8x7b", 0.12),
                                                    ("laptop_rtx4060_pcie4", "olmoe_1b_7b", 0.05)])
def test_load_time_choice_is_the_brute_force_best(hardware, model, ratio):
    """Between Fiddler's and kTransformers' placements, the closed-form estimate picks the one that
    runs faster through the engine (either, when both run alike: with every hit on the GPU and every
    one-token miss on the CPU, the two can make the same decisions); delegating to it reproduces its
    run exactly."""
    args = dict(CELL, hardware=hardware, model=model, cache_ratio=ratio)
    cands = ["fiddler", "ktransformers"]
    ours = run_one(RunSpec.of(policy="spac_auto", policy_args={"candidates": cands}, **args)).row
    tps = [run_one(RunSpec.of(policy=p, **args)).row["tps"] for p in cands]
    choice = int(ours["auto_choice"])
    assert tps[choice] == max(tps)
    assert ours["tps"] == pytest.approx(tps[choice], rel=1e-9)


def test_profile_tokens_follow_the_profile():
    """Distinct experts per (token, layer); a never-used expert is drawn at its +1 share only."""
    prof = np.array([[1000.0, 1000.0, 0.0, 0.0]])
    t = profile_tokens(prof, 1, 4, 2, 400, seed=3)
    assert t.shape == (400, 1, 2) and (t[:, 0, 0] != t[:, 0, 1]).all()
    share = np.isin(t, [0, 1]).mean()
    assert share > 0.99
    assert (profile_tokens(prof, 1, 4, 2, 50, 3) == t[:50]).all()   # the seed fixes the draw


def test_restore_brings_the_static_set_back():
    cache = ExpertCache(2, 3, 3)
    for l, e in [(0, 0), (0, 1), (1, 2)]:
        cache.load(l, e)
    r = Restore([(1, 0), (0, 0), (1, 1)])
    assert r.next(cache) == (1, 0)
    cache.pinned[0] = True
    assert r.victim(cache) == (1, 2)          # outside the set, not in the pinned layer 0
    cache.pinned[0] = False
    cache.pinned[1] = True
    assert r.victim(cache) == (0, 1)
    assert r.next(cache) == (1, 1) and r.next(cache) is None   # (0, 0) is resident: skipped


@pytest.mark.parametrize("args, message", [({"margin": 1.5}, "policy.margin must be in [0, 1), got 1.5"),
                                           ({"window": 0}, "policy.window must be an integer >= 1, got 0"),
                                           ({"candidates": []}, "policy.candidates must name")])
def test_bad_parameters_are_refused_in_one_line(args, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)").replace("(", r"\(")):
        make_policy("spac_auto", **args)


def test_online_switch_restores_the_static_set():
    """Seed 1 of the toy case: the dynamic start loses to kTransformers' shadow after ``window``
    steps, the policy switches, and the restore prefetches bring back exactly its static set."""
    pol, d = _drive(1)
    assert pol.switched and pol.choice == 2 and type(pol.active).__name__ == "KTransformers"
    wanted = np.zeros((2, 4), dtype=bool)
    for l, e in pol.active.initial_residency():
        wanted[l, e] = True
    assert (d.cache.resident == wanted).all()
    assert pol.g == 0                         # a static strategy decodes autoregressively


@pytest.mark.parametrize("ratio, pays", [(2.5, True), (2.6, False)])
def test_prefetch_only_where_a_copy_costs_enough_cpu_work(ratio, pays):
    """Toy costs: a copy 250, one CPU expert-token 100: prefetching is on up to ratio 2.5, and off
    beyond it the dynamic strategy queues nothing."""
    pol = make_policy("spac_auto", prefetch_min_ratio=ratio, candidates=["adaspec"])
    ctx = context(L=2, E=4, k=1, slots=2, gamma=12, cost=costs(n_max=16), profile=np.ones((2, 4)))
    d = Driver(pol, ctx, prefetch_budget=1)
    for s, row in enumerate(random_counts(np.random.default_rng(0), 6, 2, 4, 1)):
        d.core.step_gamma(s, 12)
        d.step(s, row)
        d.core.step_end(s, 1, 0)
    assert pol.prefetching is pays and pol.metrics()["auto_prefetch"] == float(pays)
    assert (pol.metrics()["prefetch_offered"] > 0) is pays


@pytest.mark.parametrize("slots, left_per_need, pays", [
    (2, 0.5, True),      # the cache holds a token's experts per layer: copies may slow the CPU
    (1, 1.0, True),      # one slot for two layers, but the DRAM left during a copy covers a CPU expert's need
    (1, 0.5, False),     # neither: every prefetch evicts an expert a coming layer needs and slows the CPU
])
def test_prefetch_needs_room_in_the_cache_or_dram_to_spare(slots, left_per_need, pays):
    """Toy costs (a copy 250, one CPU expert-token 100, so the copy rule holds): with k=1 over two
    layers the cache holds a token's experts per layer from 2 slots; one CPU expert reads
    ``expert_bytes`` in 100, so a copy leaves it its full speed while ``dram_left_bps`` >= that rate."""
    import dataclasses
    base = costs(n_max=16)
    need = base.expert_bytes / float(base.cpu(1))
    pol = make_policy("spac_auto", candidates=["adaspec"])
    ctx = context(L=2, E=4, k=1, slots=slots, gamma=12, profile=np.ones((2, 4)),
                  cost=dataclasses.replace(base, dram_left_bps=left_per_need * need))
    pol.reset(ctx, ExpertCache(2, 4, slots))
    assert pol.prefetching is pays
