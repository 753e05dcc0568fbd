"""SP-MoE: draft-predicted prefetch during drafting, cut at a cost-derived layer; LRU; GPU only."""
import numpy as np

from sim.protocol.expert_cache import ExpertCache
from sim.policies import make_policy
from sim.policies.base import FETCH, Signals
from tests.policies.conftest import Driver, context, costs, random_counts


def _pred(L=4, E=5):
    pred = np.zeros((L, E), dtype=int)
    pred[:, 1] = 3
    pred[:, 4] = 1
    return pred


def test_cutoff_counts_the_transfers_that_land_before_their_layer():
    pol = make_policy("sp_moe")
    cache = ExpertCache(4, 5, 20)
    pol.reset(context(L=4, E=5, slots=20, gamma=4, cost=costs(transfer=10, draft=35, layer_fixed=5)), cache)
    # 2 absent predicted experts per layer: 20 <= 35, 40 <= 40, 60 > 45
    assert pol.cutoff(_pred(), cache) == 2
    cache.load(2, 1)
    cache.load(2, 4)                                   # layer 2 needs nothing: 40 <= 45, then 60 > 50
    assert pol.cutoff(_pred(), cache) == 3
    fixed = make_policy("sp_moe", cutoff_layer=1)
    fixed.reset(pol.ctx, cache)
    assert fixed.cutoff(_pred(), cache) == 1


def test_prefetch_queue_layer_order_most_predicted_first_up_to_cutoff():
    pol = make_policy("sp_moe")
    cache = ExpertCache(4, 5, 20)
    pol.reset(context(L=4, E=5, slots=20, gamma=4, cost=costs(transfer=10, draft=35, layer_fixed=5)), cache)
    pol.on_step_start(0, Signals(draft_pred=_pred()), cache)
    got = []
    while (item := pol.next_transfer(cache)) is not None:
        got.append(item)
    assert got == [(0, 1), (0, 4), (1, 1), (1, 4)]
    assert pol.speculative


def test_no_draft_prediction_means_no_prefetch():
    seq = random_counts(np.random.default_rng(0), S=10, L=3, E=5, k=2, window=3)
    d = Driver(make_policy("sp_moe"), context(L=3, E=5, k=2, slots=6, gamma=2), prefetch_budget=4).run(seq)
    assert d.prefetches == 0 and d.cpu == 0


def test_prefetch_spares_experts_predicted_for_coming_layers_demand_does_not():
    pol = make_policy("sp_moe", cutoff_layer=3)
    cache = ExpertCache(3, 4, 2)
    pol.reset(context(L=3, E=4, slots=2, gamma=2), cache)
    for item in [(2, 0), (1, 3)]:
        cache.load(*item)
        pol.on_transfer_done(*item, cache)
    pred = np.zeros((3, 4), dtype=int)
    pred[0, 1] = pred[2, 0] = pred[1, 3] = 1
    pol.on_step_start(0, Signals(draft_pred=pred), cache)
    assert pol.next_transfer(cache) == (0, 1)
    assert pol.victim(0, 1, cache, False) is None            # both residents are needed later this step
    where = pol.place(0, np.array([0, 1, 0, 0]), Signals(), cache).where
    assert where[1] == FETCH
    assert pol.victim(0, 1, cache, True) == (2, 0)           # the demand fetch takes the LRU one
