"""MoE-SpAc as a whole policy: presets, the hook lifecycle on a hand example, invariants under a
small executor, hot/cold metrics and determinism."""
import numpy as np
import pytest

from sim.protocol.expert_cache import ExpertCache
from sim.policies import make_policy
from sim.machine.cost_table import CostTable
from sim.policies.base import CPU, GPU, PolicyContext, Signals
from sim.policies.moespac import MoESpAc
from sim.run.spec import RunSpec

PRESETS = ["moespac", "moespac_static", "moespac_no_estimator", "moespac_no_balancer",
           "moespac_sync", "moespac_ar"]


def context(L, E, slots, gamma=3, top_k=2, draft=5e-3):
    n = np.arange(32)
    costs = CostTable(gpu_expert_s=np.where(n > 0, 1e-5, 0.0), cpu_expert_s=np.where(n > 0, 1e-4, 0.0),
                      transfer_s=1e-4, layer_fixed_s=5e-5, draft_phase_s=draft, expert_bytes=1)
    return PolicyContext(n_layers=L, n_experts=E, top_k=top_k, n_slots=slots, gamma=gamma, costs=costs)


def make(policy, L, E, slots, **kw):
    pol = policy if isinstance(policy, MoESpAc) else make_policy(policy)
    cache = ExpertCache(L, E, slots)
    pol.reset(context(L, E, slots, **kw), cache)
    return pol, cache


def window_counts(rng, S, L, E, n, top_k, hot=6):
    """Counts [S, L, E]: each of n tokens picks top_k distinct experts, mostly from a hot subset."""
    counts = np.zeros((S, L, E), dtype=np.uint8)
    for s in range(S):
        for l in range(L):
            for _ in range(n):
                pool = rng.permutation(hot) if rng.random() < 0.7 else rng.permutation(E)
                counts[s, l, pool[:top_k]] += 1
    return counts


def drive(pol, cache, counts, xfers=2, check=None):
    """A minimal executor (the engine's protocol order); returns a log of every decision."""
    log, sig = [], Signals()
    L = cache.n_layers
    for s in range(counts.shape[0]):
        pol.on_step_start(s, sig, cache)
        for l in range(L):
            cache.pinned[l] = True
            pol.on_layer_start(l, cache)
            where = np.asarray(pol.place(l, counts[s, l], sig, cache).where)
            req = counts[s, l] > 0
            assert set(np.unique(where[req]).tolist()) <= {GPU, CPU}
            assert np.array_equal(where[req] == GPU, cache.resident[l][req])
            log.append(("place", s, l, where[req].tolist()))
            cache.pinned[l] = False
            pol.on_layer_end(l, counts[s, l], cache)
            for _ in range(xfers):
                item = pol.next_transfer(cache)
                if item is None:
                    break
                assert not cache.present(*item)
                if cache.n_free <= 0:
                    before = pol.tree.score.copy()           # the victim leaves the tree
                    v = pol.victim(*item, cache, False)
                    if check:
                        check(pol, v, before)
                    log.append(("victim", item, v))
                    if v is None:
                        continue
                    cache.evict(*v)
                cache.begin(*item)
                cache.land(*item)
                pol.on_transfer_done(*item, cache)
                log.append(("land", item))
            cache.check()
            # the tree indexes exactly the resident experts (the policy reads residency from it)
            assert np.array_equal(pol.tree.score >= 0, cache.resident)
            assert np.array_equal(pol.tree.key >= 0, cache.resident)
    return log


@pytest.mark.parametrize("preset, switches", [
    ("moespac_sync", {"overlap": False}), ("moespac_ar", {"speculative": False}),
    ("moespac_no_estimator", {"estimator_mode": "binary"}), ("moespac_no_balancer", {"use_balancer": False}),
    ("moespac_static", {"estimator_mode": "static", "use_balancer": False, "release": "zero", "eviction_order": "id"})])
def test_each_ablation_differs_from_moespac_only_in_its_switches(preset, switches):
    """An ablation preset must change exactly the switches it names (the authors' preset: the four
    of the released code), every other parameter as in ``moespac``."""
    base, other = vars(make_policy("moespac")), vars(make_policy(preset))
    differ = {k: v for k, v in other.items() if base.get(k) != v and k not in ("name", "params")}
    assert differ == switches


def test_an_out_of_range_tau_is_refused():
    with pytest.raises(ValueError):
        MoESpAc.from_params(tau=9)


def test_hand_example_lifecycle():
    """L=2, E=4, 3 slots, windows of 4 tokens x top-2, the authors' static setting but U=2."""
    pol, cache = make(MoESpAc.from_params(estimator="static", up=2, balancer=False, tau=1, release="zero",
                              eviction_order="id"), 2, 4, 3)
    sig = Signals()
    pol.on_step_start(0, sig, cache)
    c0 = np.array([4, 2, 2, 0], dtype=np.uint8)          # 4 tokens x 2 experts
    cache.pinned[0] = True
    pol.on_layer_start(0, cache)
    assert pol.place(0, c0, sig, cache).where.tolist() == [CPU] * 4   # empty cache: all on the CPU
    cache.pinned[0] = False
    pol.on_layer_end(0, c0, cache)
    assert pol.est.rows[0].tolist() == [1, 1, 1, 0]                  # c - 0 >= U = 2
    # three hot experts, three free slots: queued in id order at level 1
    got = [pol.next_transfer(cache) for _ in range(3)]
    assert got == [(0, 0), (0, 1), (0, 2)]
    for item in got:
        cache.begin(*item)
        cache.land(*item)
        pol.on_transfer_done(*item, cache)
    assert [pol.tree.score_of(0, e) for e in range(4)] == [1, 1, 1, -1]
    assert pol.next_transfer(cache) is None
    # layer 0 computes again: pinned at K+1, resident experts on the GPU, the rest on the CPU
    pol.on_step_start(1, sig, cache)
    cache.pinned[0] = True
    pol.on_layer_start(0, cache)
    assert [pol.tree.score_of(0, e) for e in range(3)] == [6, 6, 6]
    c1 = np.array([4, 0, 0, 4], dtype=np.uint8)
    assert pol.place(0, c1, sig, cache).where[[0, 3]].tolist() == [GPU, CPU]
    assert pol.victim(0, 3, cache, False) is None                           # pinned layer, no score < 1
    cache.pinned[0] = False
    pol.on_layer_end(0, c1, cache)                                   # released to score 0 (authors)
    assert pol.est.rows[0].tolist() == [2, 0, 0, 1]
    assert [pol.tree.score_of(0, e) for e in range(4)] == [0, 0, 0, -1]
    # the queue re-scores the resident hot expert (no copy) and copies the new one
    assert pol.next_transfer(cache) == (0, 3)
    assert pol.tree.score_of(0, 0) == 2 and pol.n_rescored == 1
    v = pol.victim(0, 3, cache, False)
    assert v == (0, 1)                                               # smallest (0, layer, expert)
    assert pol.tree.score_of(0, 1) == -1


def test_level_release_keeps_utility_and_victims_stay_below_tau():
    pol, cache = make("moespac_no_balancer", 2, 4, 2)
    sig = Signals()
    pol.on_step_start(0, sig, cache)
    for l in (0, 1):
        cache.pinned[l] = True
        pol.on_layer_start(l, cache)
        cache.pinned[l] = False
        pol.on_layer_end(l, np.array([4, 4, 0, 0], dtype=np.uint8), cache)
    for _ in range(2):
        item = pol.next_transfer(cache)
        cache.begin(*item)
        cache.land(*item)
        pol.on_transfer_done(*item, cache)
    # both slots hold hot (level 1) experts of layer 0; layer 1's hot experts find no victim
    assert [pol.tree.score_of(0, e) for e in (0, 1)] == [1, 1]
    assert pol.next_transfer(cache) is None and pol.n_waits == 1
    # layer 0's next pass asks for other experts: its residents fall to level 0 and may go
    pol.on_step_start(1, sig, cache)
    cache.pinned[0] = True
    pol.on_layer_start(0, cache)
    cache.pinned[0] = False
    pol.on_layer_end(0, np.array([0, 0, 4, 4], dtype=np.uint8), cache)
    assert [pol.tree.score_of(0, e) for e in (0, 1)] == [0, 0]
    item = pol.next_transfer(cache)
    assert item[0] == 1 and pol.victim(*item, cache, False)[0] == 0


def test_stale_entries_are_dropped_when_their_layer_starts():
    pol, cache = make("moespac", 2, 8, 8)
    sig = Signals()
    pol.on_step_start(0, sig, cache)
    for l in (0, 1):
        cache.pinned[l] = True
        pol.on_layer_start(l, cache)
        cache.pinned[l] = False
        pol.on_layer_end(l, np.array([2, 2, 2, 2, 0, 0, 0, 0], dtype=np.uint8), cache)
    assert {l for l, e, lv in pol.queue.live()} == {0, 1}
    pol.on_step_start(1, sig, cache)
    pol.on_layer_start(0, cache)                    # too late for layer 0's entries
    popped = []
    while (item := pol.next_transfer(cache)) is not None:
        popped.append(item)
        cache.begin(*item)
        cache.land(*item)
    assert popped and all(l == 1 for l, e in popped)
    assert pol.queue.stale_dropped == 4


def test_hot_cold_precision_and_recall():
    pol, cache = make(MoESpAc.from_params(estimator="binary", balancer=False, tau=1), 1, 4, 4)
    sig = Signals()
    for s, req in enumerate([[0, 1, 2], [1, 2, 3], [1]]):
        c = np.zeros(4, dtype=np.uint8)
        c[req] = 1
        pol.on_step_start(s, sig, cache)
        pol.on_layer_start(0, cache)
        pol.on_layer_end(0, c, cache)
    m = pol.metrics()
    # pass 2: predicted {0,1,2}, asked {1,2,3}: 2 of 3; pass 3: predicted {1,2,3}, asked {1}
    assert m["hot_precision"] == pytest.approx(3 / 6) and m["hot_recall"] == pytest.approx(3 / 4)
    assert m["hot_precision_by_layer"] == [pytest.approx(0.5)]


@pytest.mark.parametrize("name", ["moespac", "moespac_static", "moespac_no_estimator"])
def test_hot_cold_tallies_equal_a_brute_force_count(name):
    """The tracker's tallies (from the pass histogram) against masks counted expert by expert: the
    standing prediction of a layer is its levels >= its tau after its last pass."""
    rng = np.random.default_rng(3)
    L, E, slots, gamma, top_k = 3, 16, 12, 8, 2
    counts = window_counts(rng, 25, L, E, gamma + 1, top_k)
    pol, cache = make(name, L, E, slots, gamma=gamma, top_k=top_k)
    pred, tp, n_pred, n_req = [None] * L, [0] * L, [0] * L, [0] * L
    for s in range(counts.shape[0]):
        pol.on_step_start(s, Signals(), cache)
        for l in range(L):
            c = counts[s, l]
            pol.on_layer_start(l, cache)
            pol.on_layer_end(l, c, cache)
            if pred[l] is not None:
                tp[l] += int((pred[l] & (c > 0)).sum())
                n_pred[l] += int(pred[l].sum())
                n_req[l] += int((c > 0).sum())
            pred[l] = pol.est.rows[l] >= pol.bal.tau[l]
            for _ in range(2):          # some copies, so that residency (and tau) moves
                item = pol.next_transfer(cache)
                if item is None:
                    break
                if cache.n_free <= 0:
                    v = pol.victim(*item, cache, False)
                    if v is None:
                        break
                    cache.evict(*v)
                cache.begin(*item)
                cache.land(*item)
                pol.on_transfer_done(*item, cache)
    assert (pol.hc.tp, pol.hc.n_pred, pol.hc.n_req) == (tp, n_pred, n_req)
    assert sum(tp) > 0 and sum(n_pred) > sum(tp)


@pytest.mark.parametrize("name", PRESETS)
def test_invariants_under_a_small_executor(name):
    rng = np.random.default_rng(11)
    L, E, slots, gamma, top_k = 4, 16, 10, 8, 2     # 9-token windows: the static U=5 can rise
    n = 1 if name == "moespac_ar" else gamma + 1
    counts = window_counts(rng, 40, L, E, n, top_k)
    pol, cache = make(name, L, E, slots, gamma=0 if name == "moespac_ar" else gamma, top_k=top_k)

    def check(p, v, score):
        if v is not None:          # never at or above its layer's tau, never a computing layer
            assert 0 <= score[v] < p.bal.tau[v[0]] and not cache.pinned[v[0]]
            assert not p.tree.pinned[v[0]]
    log = drive(pol, cache, counts, xfers=3, check=check)
    assert sum(x[0] == "land" for x in log) == pol.n_victims + min(slots, sum(x[0] == "land" for x in log))
    cache.check()


def test_deterministic():
    rng = np.random.default_rng(5)
    counts = window_counts(rng, 30, 3, 12, 4, 2)
    runs = []
    for _ in range(2):
        pol, cache = make("moespac", 3, 12, 8, top_k=2)
        runs.append((drive(pol, cache, counts), pol.metrics()))
    assert runs[0][0] == runs[1][0]
    assert repr(runs[0][1]) == repr(runs[1][1])


def test_end_to_end_run_is_deterministic():
    import sim.run.runner as runner
    rows = [runner.run_one(RunSpec.of(policy="moespac", workload="gsm8k", gen_tokens=48)).row for _ in range(2)]
    for r in rows:
        r.pop("sim_wall_s", None)
    assert repr(rows[0]) == repr(rows[1])


def test_end_to_end_beats_llamacpp_and_the_authors_setting():
    """Qwen3-30B-A3B, RTX 4090 + PCIe 4.0, cache ratio 0.17, gamma 8, a short gsm8k run."""
    import sim.run.runner as runner
    tps = {p: runner.run_one(RunSpec.of(policy=p, workload="gsm8k", cache_ratio=0.17, gen_tokens=192)).row["tps"]
           for p in ("moespac", "moespac_static", "llamacpp", "llamacpp_sd")}
    assert tps["moespac"] >= 1.2 * max(tps["llamacpp"], tps["llamacpp_sd"])
    assert tps["moespac"] >= tps["moespac_static"]


@pytest.mark.parametrize("release", ["zero", "level"])
def test_only_experts_at_or_above_tau_are_queued(release):
    """With a fixed tau of 2 no expert at level 1 is queued, whichever release rule (the "zero"
    release re-queues resident hot experts too, "level" only the absent ones)."""
    pol, cache = make(MoESpAc.from_params(estimator="static", up=1, down=1, balancer=False, tau=2, release=release),
                      L=1, E=4, slots=4)
    cache.load(0, 0)
    c = np.array([3, 3, 1, 0], dtype=np.uint8)
    for _ in range(2):      # levels rise by one per step: experts 0, 1 to 2, expert 2 to 1
        pol.on_step_start(0, None, cache)
        cache.pinned[0] = True
        pol.on_layer_start(0, cache)
        cache.pinned[0] = False
        pol.on_layer_end(0, c, cache)
    assert pol.est.rows[0].tolist() == [2, 2, 1, 0]
    queued = {e for _, e, _ in pol.queue.live()}
    assert queued == ({0, 1} if release == "zero" else {1})
