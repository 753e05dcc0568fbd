"""The oracle: Belady eviction (hit count equal to a brute-force optimum), next-use prefetch that
never evicts something needed sooner, and no policy faster than it on small seeded runs."""
from functools import lru_cache

import numpy as np
import pytest

from sim.protocol.expert_cache import ExpertCache
from sim.policies import make_policy
from sim.policies.belady import NEVER, NextUse
from tests.policies.conftest import Driver, context, costs, random_counts
from sim.run.spec import RunSpec


def _optimal_hits(seq, initial, C):
    """Most hits any demand-paging cache of C slots can get, by exhaustive search."""
    @lru_cache(maxsize=None)
    def best(t, content):
        if t == len(seq):
            return 0
        x = seq[t]
        if x in content:
            return 1 + best(t + 1, content)
        if len(content) < C:
            return best(t + 1, content | {x})
        return max(best(t + 1, (content - {v}) | {x}) for v in content)
    return best(0, frozenset(initial))


@pytest.mark.parametrize("seed", range(8))
def test_belady_hits_equal_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    E, C, S = 5, int(rng.integers(1, 4)), 12
    keys = rng.integers(0, E, size=S)
    future = np.zeros((S, 1, E), dtype=int)
    future[np.arange(S), 0, keys] = 1
    pol = make_policy("oracle_ar")
    ctx = context(L=1, E=E, slots=C, future=future, cost=costs(cpu=1e9, transfer=1.0))
    d = Driver(pol, ctx, pin=False).run(future)
    initial = [e for _, e in pol.initial_residency()]
    assert d.fallbacks == 0 and d.cpu == 0
    assert d.hits == _optimal_hits(tuple(int(k) for k in keys), initial, C)


def test_next_use_index():
    fc = np.zeros((3, 2, 3), dtype=int)
    fc[0, 1, 2] = fc[2, 1, 2] = fc[1, 0, 0] = 1
    idx = NextUse(fc)
    assert idx.next_use(1, 2, 0) == 1 and idx.next_use(1, 2, 2) == 5
    assert idx.next_use(0, 0, 3) == NEVER and idx.next_use(0, 1, 0) == NEVER
    assert idx.first_uses(2) == [(1, 2), (0, 0)]
    assert idx.uses_at(1) == [2]


def test_prefetch_is_next_use_ordered_and_never_evicts_something_needed_sooner():
    rng = np.random.default_rng(11)
    L, E = 3, 6
    future = random_counts(rng, S=25, L=L, E=E, k=2, window=2)
    pol = make_policy("oracle")
    ctx = context(L=L, E=E, k=2, slots=7, gamma=1, future=future)
    log = []
    offer, victim = pol.next_transfer, pol.victim

    def spy_offer(cache):
        item = offer(cache)
        if item is not None:
            q = pol.index.next_use(*item, pol.pos)
            for p in range(pol.pos, q):                   # everything needed before it is present
                assert all(cache.present(p % L, e) for e in pol.index.uses_at(p))
        return item

    def spy_victim(layer, expert, cache, demand):
        v = victim(layer, expert, cache, demand)
        if v is not None and not demand:
            log.append((pol.index.next_use(layer, expert, pol.pos), pol.index.next_use(*v, pol.pos)))
        return v

    pol.next_transfer, pol.victim = spy_offer, spy_victim
    d = Driver(pol, ctx, prefetch_budget=2).run(future)
    assert d.prefetches > 0 and log
    assert all(brought < evicted for brought, evicted in log)


def test_oracle_flags_and_requires_the_future():
    assert make_policy("oracle").needs_future and make_policy("oracle").speculative
    assert make_policy("oracle_ar").needs_future and not make_policy("oracle_ar").speculative
    with pytest.raises(ValueError):
        make_policy("oracle").reset(context(), ExpertCache(2, 4, 2))


def _random_configs(n, seed=2024):
    rng = np.random.default_rng(seed)
    workloads = ["gsm8k", "alpaca", "qa", "cnn_dm", "mt_bench", "humaneval", "mmlu_pro"]
    for _ in range(n):
        yield dict(workload=str(rng.choice(workloads)), cache_ratio=float(rng.uniform(0.03, 0.2)),
                   hardware=str(rng.choice(["rtx4090_pcie4", "h200_pcie5"])), seed=int(rng.integers(100)),
                   gen_tokens=int(rng.integers(10, 20)), gamma=int(rng.integers(2, 9)))


@pytest.mark.slow
@pytest.mark.parametrize("cfg", list(_random_configs(8)), ids=lambda c: f"{c['workload']}-{c['cache_ratio']:.2f}")
def test_no_policy_beats_the_oracle_on_small_seeded_runs(cfg):
    """Each registered policy against the oracle of its own decoding mode (SD: oracle, AR:
    oracle_ar), same trace, machine and budget; kTransformers with its CPU speedup set to 1 so
    that both run on the same CPU."""
    from sim.policies import policy_names
    from sim.run.runner import run_one

    bound = {True: run_one(RunSpec.of(policy="oracle", **cfg)).row["tps"], False: run_one(RunSpec.of(policy="oracle_ar", **cfg)).row["tps"]}
    beaten = []
    for name in policy_names():
        if name in ("heuristic_oracle", "heuristic_oracle_ar") or make_policy(name).adaptive_gamma:
            continue   # an adaptive-gamma policy has no oracle of its mode (sim/bound covers it)
        args = {"cpu_speedup": 1.0} if name == "ktransformers" else None
        tps = run_one(RunSpec.of(policy=name, policy_args=args, **cfg)).row["tps"]
        if tps > bound[make_policy(name).speculative] * (1 + 1e-9):
            beaten.append((name, tps))
    assert not beaten, f"oracle {bound} beaten by {beaten}"
