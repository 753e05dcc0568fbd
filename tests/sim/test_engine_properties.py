"""Conservation laws, the independent fast evaluator, determinism and monotonicity of the engine."""
import numpy as np
import pytest

from sim.machine import specs as config
from sim.machine.cost_model import CostModel
from sim.engine.decode import Engine
from sim.protocol.expert_cache import ExpertCache
from sim.policies.base import PolicyContext
from tests.sim.doubles import FetchFIFO, StaticGPU, toy_trace
from traces.windows import build_schedule

HW, MODEL = config.hardware("rtx4090_pcie4"), config.model("qwen3_30b_a3b")


def random_trace(rng, T=40, L=6, E=16, k=4):
    ex = np.stack([np.stack([rng.choice(E, k, replace=False) for _ in range(L)]) for _ in range(T)])
    return toy_trace(ex, n_experts=E)


def setup(policy, trace, n_slots, gamma=0, hw=HW, seed=0):
    import dataclasses

    m = dataclasses.replace(MODEL, n_layers=trace.n_layers, n_experts=trace.n_experts, top_k=trace.top_k)
    d = config.draft("qwen3_0_6b" if gamma else "none")
    cost = CostModel(hw, m, d)
    sched = build_schedule(trace, gamma, trace.n_tokens - gamma - 1, 0.7, seed)
    cache = ExpertCache(m.n_layers, m.n_experts, n_slots)
    ctx = PolicyContext(m.n_layers, m.n_experts, m.top_k, n_slots, gamma, cost.cost_table(gamma, 256))
    policy.reset(ctx, cache)
    return cost, sched, cache, ctx


def simulate(policy, trace, n_slots, gamma=0, hw=HW):
    cost, sched, cache, ctx = setup(policy, trace, n_slots, gamma, hw)
    c = Engine(cost, policy, cache, sched, ctx).run()
    cache.check()
    return c, cost


@pytest.mark.parametrize("gamma", [0, 4])
def test_blocking_prefetch_time_is_charged_once_and_every_request_runs_once(gamma):
    """With ``overlap=False`` the decode is draft + fixed parts + layers + one transfer per
    prefetch (the drains), exactly; each request runs once; bytes follow the transfers."""
    trace = random_trace(np.random.default_rng(1))
    pol = FetchFIFO(prefetch=[(2, 3), (4, 5), (5, 1)], overlap=False)
    pol.speculative = gamma > 0
    c, cost = simulate(pol, trace, 12, gamma)
    assert c.prefetches > 0 and c.demand_fetches > 0
    drains = c.prefetches * cost.transfer_s()
    assert c.decode_s == pytest.approx(c.draft_s + c.step_fixed_s + sum(c.layer_s) + drains, rel=1e-12)
    n = c.demand_fetches + c.prefetches + c.streams
    assert c.pcie_bytes == n * cost.expert_bytes
    assert c.gpu_execs + c.cpu_execs == c.requests


def test_full_cache_warm_start_needs_no_transfers():
    trace = random_trace(np.random.default_rng(2))
    everything = [(l, e) for l in range(trace.n_layers) for e in range(trace.n_experts)]
    pol = StaticGPU(everything)
    c, _ = simulate(pol, trace, len(everything))
    assert c.pcie_bytes == 0 and c.hits == c.requests and c.cpu_execs == 0


def test_same_config_same_result():
    trace = random_trace(np.random.default_rng(3))
    a, _ = simulate(FetchFIFO(prefetch=[(1, 1)]), trace, 10, 2)
    b, _ = simulate(FetchFIFO(prefetch=[(1, 1)]), trace, 10, 2)
    assert a.row() == b.row()


def test_a_prediction_read_twice_is_the_same_draw():
    from sim.protocol.signals import LazySignals

    counts = np.zeros((1, 3, 16), dtype=np.uint8)
    counts[0, 1, [1, 2, 3, 4]] = 1
    sig = LazySignals(counts, 0, np.random.default_rng(0), next_acc=0.5, draft_acc=0.5)
    first = sig.next_pred
    assert all((sig.next_pred == first).all() for _ in range(5))
    assert first.sum() == 4
    sig.layer = 2
    assert sig.next_pred is None


@pytest.mark.parametrize("accuracy", [1.0, 0.0])
def test_the_engine_simulates_the_predictor_accuracy_the_policy_declares(accuracy):
    """``next_layer_accuracy`` (declared in the protocol) sets the simulated next-layer guess:
    exact at 1.0, never a requested expert at 0.0 (6 x 16 experts, top-4: free experts exist)."""
    trace = random_trace(np.random.default_rng(4))
    seen = []

    class Spy(StaticGPU):
        next_layer_accuracy = accuracy

        def place(self, layer, counts, signals, cache):
            if signals.next_pred is not None:
                seen.append((signals.next_pred.copy(), layer))
            return super().place(layer, counts, signals, cache)

    pol = Spy()
    cost, sched, cache, ctx = setup(pol, trace, 4)
    Engine(cost, pol, cache, sched, ctx).run()
    truth = [sched.counts[i // 5, layer + 1] for i, (_, layer) in enumerate(seen)]
    overlap = [int(np.count_nonzero((p > 0) & (t > 0))) for (p, _), t in zip(seen, truth)]
    assert len(seen) == sched.n_steps * 5
    assert overlap == ([4] * len(seen) if accuracy == 1.0 else [0] * len(seen))


def test_recorded_signals_replace_the_simulated_ones():
    """A captured trace's next-layer prediction and gate weights are read as the live executor
    computes them: counts of the recorded next-layer ids, and the mean gate weight per expert."""
    from sim.protocol.signals import LazySignals

    counts = np.zeros((1, 2, 4), dtype=np.uint8)
    counts[0, 0, [0, 1]] = 1
    rec = {"next_pred": [np.array([[[2, 3], [-1, -1]]])], "weights": [np.array([[[0.75, 0.25], [0.5, 0.5]]])],
           "experts": [np.array([[[0, 1], [2, 3]]])]}
    sig = LazySignals(counts, 0, np.random.default_rng(0), next_acc=0.0, draft_acc=0.0, recorded=rec)
    assert sig.next_pred.tolist() == [0, 0, 1, 1]          # not the accuracy-0 simulated guess
    assert sig.router_scores.tolist() == [0.75, 0.25, 0.0, 0.0]
    sig.layer = 1
    assert sig.next_pred is None and sig.router_scores.tolist() == [0.0, 0.0, 0.5, 0.5]
