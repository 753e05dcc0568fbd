"""Steps built online with a per-step gamma: windows, tokens and the engine's draft time."""
import numpy as np
import pytest

from sim.engine.decode import Engine
from tests.sim.doubles import RoundCosts, StaticGPU, context_for, make_cache, tiny_specs, toy_trace
from traces.acceptance import AcceptanceModel
from traces.online import OnlineSchedule, model_schedule
from traces.windows import build_schedule, window_rows


class Plan:
    adaptive_gamma = True

    def __init__(self, gammas):
        self.gammas = gammas

    def choose_gamma(self, step):
        return self.gammas[step % len(self.gammas)]


def _trace(n=12):
    ex = np.random.default_rng(0).integers(0, 3, size=(n, 2, 1))
    return toy_trace(ex)


def test_full_acceptance_gives_gamma_plus_one_tokens_per_step():
    tr = _trace()
    s = OnlineSchedule(tr, 9, AcceptanceModel(1.0), 0, 3)
    plan, step = Plan([0, 2, 3]), 0
    while not s.done:
        s.begin_step(step, plan.choose_gamma(step))
        step += 1
    assert list(s.produced[:s.n_steps]) == [1, 3, 4, 1]
    assert list(s.n_verify[:s.n_steps]) == [1, 3, 4, 1]
    for k, t in enumerate(np.cumsum([0, 1, 3, 4])):
        assert (s.rows[k] == window_rows(tr.experts, None, int(t), int(s.gammas[k]), int(s.accepted[k]))).all()


def test_fixed_gamma_model_schedule_equals_the_iid_builder_at_full_acceptance():
    tr = _trace()
    a = model_schedule(tr, 2, 9, AcceptanceModel(1.0, decay=0.999), 0)
    b = build_schedule(tr, 2, 9, 1.0, 0)
    assert (a.counts == b.counts).all() and (a.produced == b.produced).all()


def test_gamma_out_of_range_is_refused():
    s = OnlineSchedule(_trace(), 4, AcceptanceModel(1.0), 0, 2)
    with pytest.raises(ValueError, match="allowed 0..2"):
        s.begin_step(0, 3)


def test_the_core_asks_only_a_choosing_policy_and_checks_its_choice():
    """ProtocolCore.step_gamma: None for a fixed-gamma policy, the choice in 0..gamma, else an error."""
    from sim.protocol import ProtocolCore

    hw, m, d = tiny_specs()
    cost = RoundCosts(hw, m, d)
    pol = StaticGPU([(0, 0)])
    core = ProtocolCore(pol, make_cache(m, 2), expert_bytes=1, gpu_tab=np.zeros(4), cpu_tab=np.zeros(4))
    pol.reset(context_for(cost, m, 2, 2), core.cache)
    assert core.step_gamma(0, 2) is None
    pol.adaptive_gamma, pol.choose_gamma = True, Plan([1, 3]).choose_gamma
    assert core.step_gamma(0, 2) == 1
    with pytest.raises(ValueError, match="chose gamma 3 at step 1; allowed 0..2"):
        core.step_gamma(1, 2)


def test_engine_charges_each_steps_own_draft_decodes():
    """Gammas 2 then 0 then 1 (acceptance 1, one layer resident): draft 7 us per decode."""
    hw, m, d = tiny_specs()
    cost = RoundCosts(hw, m, d)
    tr = toy_trace([[[0], [1]]] * 8)
    sched = OnlineSchedule(tr, 5, AcceptanceModel(1.0), 0, 2)
    pol = StaticGPU([(0, 0), (1, 1)])
    pol.speculative, pol.adaptive_gamma = True, True
    plan = iter([2, 0, 1, 2])
    pol.choose_gamma = lambda step: next(plan)
    cache = make_cache(m, 2)
    ctx = context_for(cost, m, 2, 2)
    pol.reset(ctx, cache)
    c = Engine(cost, pol, cache, sched, ctx).run()
    # per step: draft 7*g, fixed 1, two layers of 2 us attention + one GPU expert with n tokens
    expect = sum(7 * g + 1 + 2 * (2 + 10 * (g + 1)) for g in (2, 0, 1)) * 1e-6
    assert list(sched.gammas[:3]) == [2, 0, 1] and c.tokens == 5
    assert c.decode_s == pytest.approx(expect) and c.draft_s == pytest.approx(21e-6)
