"""Fiddler's per-expert rule as its code runs (src/fiddler/mixtral.py, ``cpu_offload`` branch):
resident experts always on the GPU, a miss copied only when no slower than the CPU."""
import numpy as np

from sim.policies import make_policy
from sim.policies.base import CPU, FETCH, GPU
from sim.policies.resident_first import resident_first
from tests.policies.conftest import Driver, context, costs

# A GPU expert slower than a CPU one (like an eager runtime's 11 launches per expert):
# gpu 300; cpu(n) = 100 + 50 (n - 1); a copy costs 150 + 300 = 450 = cpu(8).
SLOW_GPU = dict(gpu=300.0, cpu=100.0, cpu_per_token=50.0, transfer=150.0)


def fiddler_enumeration(counts, present, cost):
    """Fiddler's own search: every config (bit set = CPU), least sum of per-expert costs (CPU
    ``cpu(n)``, GPU 0 when resident else ``transfer + gpu(n)``), the first config wins ties."""
    req = np.flatnonzero(counts)
    best, best_cfg = np.inf, -1
    for cfg in range(1 << len(req)):
        total = 0.0
        for b, e in enumerate(req):
            n = counts[e]
            total += cost.cpu_expert_s[n] if cfg >> b & 1 else (
                0.0 if present[e] else cost.transfer_s + cost.gpu_expert_s[n])
        if total < best:
            best, best_cfg = total, cfg
    on_gpu = np.zeros(len(counts), dtype=bool)
    on_gpu[[e for b, e in enumerate(req) if not best_cfg >> b & 1]] = True
    return on_gpu


def test_two_layer_hand_case_exact_decisions():
    prof = np.array([[9, 1, 0, 0], [0, 0, 8, 2]], dtype=float)
    pol = make_policy("fiddler")                       # 3 slots - 1 placeholder: (0,0) and (1,2)
    d = Driver(pol, context(L=2, E=4, slots=3, profile=prof, cost=costs(**SLOW_GPU)))
    assert sorted(pol.initial_residency()) == [(0, 0), (1, 2)]
    step1 = np.array([[1, 1, 0, 0],                    # hit 300 on the GPU (CPU 100 would be faster)
                      [8, 7, 1, 0]])                   # miss x8: copy 450 == cpu 450 (tie: GPU); x7: cpu 400
    step2 = np.array([[0, 9, 0, 8],                    # savings 500-450=50 and 0; one spare slot
                      [0, 0, 0, 0]])
    d.run(np.array([step1, step2]))
    p = d.placements
    assert list(p[0][:2]) == [GPU, CPU]
    assert list(p[1][:3]) == [FETCH, CPU, GPU]
    assert p[2][1] == FETCH and p[2][3] == CPU         # the larger saving takes the only spare slot
    assert d.fetches == 2 and d.evicted == [(1, 0)]    # the temporary copy, never a static expert


def test_one_token_misses_run_on_the_cpu_and_hits_on_the_gpu():
    cost = costs(**SLOW_GPU)
    counts = np.array([1, 1, 1, 0, 1])
    present = np.array([True, False, False, True, True])
    on_gpu = resident_first(counts, present, cost, max_fetch=4)
    assert on_gpu.tolist() == [True, False, False, False, True]


def test_equals_fiddlers_enumeration_without_a_copy_limit():
    rng = np.random.default_rng(3)
    for _ in range(80):
        cost = costs(gpu=float(rng.uniform(1, 400)), cpu=float(rng.uniform(20, 200)),
                     cpu_per_token=float(rng.integers(0, 120)), transfer=float(rng.integers(5, 400)))
        counts = np.zeros(8, dtype=int)
        k = int(rng.integers(1, 8))
        counts[rng.choice(8, size=k, replace=False)] = rng.integers(1, 17, size=k)
        present = rng.random(8) < 0.4
        got = resident_first(counts, present, cost, max_fetch=8)
        assert got.tolist() == fiddler_enumeration(counts, present, cost).tolist()


def test_no_copy_without_a_spare_slot():
    cost = costs(**SLOW_GPU)
    counts = np.array([12, 9, 0])
    present = np.zeros(3, dtype=bool)
    assert resident_first(counts, present, cost, max_fetch=0).tolist() == [False, False, False]
    assert resident_first(counts, present, cost, max_fetch=1).tolist() == [True, False, False]
