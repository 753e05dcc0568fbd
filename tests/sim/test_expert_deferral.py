"""Expert Deferral (kTransformers, SOSP'25): a layer's deferred CPU experts run during the next
layer's attention and are joined at its end; exact timelines on round measured-table costs."""
import pytest

from sim.engine.decode import Engine, EngineOptions
from sim.policies.registry import make_policy
from tests.sim.doubles import RoundCosts, StaticGPU, context_for, make_cache, tiny_specs, toy_trace
from traces.windows import build_schedule

US = 1e-6


def run(defer: int, gamma: int = 0, tokens=([[0, 1], [0, 1], [0, 1]],)):
    """3 layers, 2 CPU experts per layer per token (100 us each), attention 2 us, join 5 us."""
    hw, m, d = tiny_specs(n_layers=3, n_experts=3, top_k=2)
    cost = RoundCosts(hw, m, d)
    sched = build_schedule(toy_trace(list(tokens)), gamma, len(tokens), 1.0)
    cache = make_cache(m, 1)
    ctx = context_for(cost, m, 1, gamma)
    pol = StaticGPU([], speculative=gamma > 0)
    pol.deferred_experts = defer
    pol.reset(ctx, cache)
    return Engine(cost, pol, cache, sched, ctx, EngineOptions()).run()


def test_deferred_experts_run_during_the_next_layers_attention():
    # without: 1 (head) + 3 x (2 attention + 200 CPU + 5 join) = 622 us. With one of two deferred:
    # L0 ends at 3 + 100 + 5 = 108 (its other expert runs on to 203); L1's attention 108-110, then
    # 93 us left of L0's expert + 100 of its own: 303 + 5 = 308; L2 (the last defers none) 310 +
    # 93 + 200 + 5 = 608: the attention and join of two layers (14 us) hidden
    plain, deferred = run(0), run(1)
    assert plain.decode_s == pytest.approx(622 * US)
    assert deferred.decode_s == pytest.approx(608 * US)
    assert deferred.cpu_busy_s == pytest.approx(plain.cpu_busy_s) == pytest.approx(600 * US)


def test_a_forward_of_several_tokens_defers_nothing():
    tokens = ([[0, 1], [0, 1], [0, 1]], [[0, 1], [0, 1], [0, 1]])
    assert run(1, gamma=1, tokens=tokens).decode_s == pytest.approx(run(0, gamma=1, tokens=tokens).decode_s)


def test_ktransformers_takes_the_artifacts_count_and_refuses_a_bad_one():
    assert make_policy("ktransformers").deferred_experts == 0
    assert make_policy("ktransformers", deferred_experts=3).deferred_experts == 3
    with pytest.raises(ValueError, match="policy.deferred_experts must be an integer >= 0, got -1"):
        make_policy("ktransformers", deferred_experts=-1)


def test_each_deferral_point_is_its_training_twin_with_deferred_experts():
    from sim.fidelity.points import load_points
    from sim.paths import CONF_DIR

    train = {p.id: p for p in load_points(CONF_DIR / "validation" / "train.yaml").points}
    deferral = load_points(CONF_DIR / "validation" / "deferral.yaml").points
    assert len(deferral) == 6
    for p in deferral:
        twin = train[p.id.replace("KD-", "K-")]
        run = dict(p.run)
        assert run.pop("policy.deferred_experts") > 0 and run == dict(twin.run)
        assert p.source == twin.source and p.measured_tok_s > twin.measured_tok_s
