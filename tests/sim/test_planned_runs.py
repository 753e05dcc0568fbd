"""A policy's planned prefetch runs against the one-copy-at-a-time reference, on random states.

:meth:`sim.protocol.ProtocolCore.prefetch_run` asks a policy that implements
:meth:`~sim.policies.base.Policy.plan_prefetches` for a whole run at once. At every run of a
random engine simulation (random routing, slots and horizons), a copy of the core (policy and
cache included) runs the same call copy by copy: both must return the same copy, time and count,
report the same landings, and leave the cache, the tracker, the tallies and the policy's state
equal. The plan is chunked (``RUN_CHUNK`` = 1) in one case, so the chunk boundary is met too.
"""
import copy
import json
from dataclasses import asdict

import numpy as np
import pytest

import sim.protocol.core as core_mod
from sim.protocol import ProtocolCore
from tests.sim.test_link_coalesced import MODEL, _routing, simulate

PLANNING = ["moespac", "moespac_no_estimator", "moespac_no_balancer", "moespac_static", "moespac_sync",
            "moespac_ar"]


def _policy_state(p) -> str:
    """Everything a planned run may change in a policy, to the bit."""
    d = {k: v for k, v in vars(p).items() if k not in ("ctx", "est", "stats", "bal", "hc", "tree", "queue")}
    d["tree"] = {k: v for k, v in vars(p.tree).items()}
    d["queue"] = {k: [list(q) for q in v] if k == "levels" else v for k, v in vars(p.queue).items()}
    return json.dumps(d, sort_keys=True, default=repr)


def _state(core: ProtocolCore) -> tuple:
    cache = core.cache
    return (cache.resident.tolist(), cache.inflight.tolist(), cache.n_used, core.prefetched.flags.tolist(),
            core.prefetched.n, json.dumps(asdict(core.c), default=repr), _policy_state(core.policy))


def _checked(seen: list, rng):
    planned = ProtocolCore._planned_run

    def run(self, now, duration, horizon, on_landed=None):
        for h in (horizon, now + duration * rng.uniform(0, 12)):   # the link's, and a random one
            ref = copy.deepcopy(self)
            ref_told, told = [], []
            want = ref._copy_run(now, duration, h, lambda *a: ref_told.append(a))
            trial = copy.deepcopy(self)
            got = planned(trial, now, duration, h, lambda *a: told.append(a))
            assert got == want and told == ref_told
            assert _state(trial) == _state(ref)
            seen.append(want[2])
        return planned(self, now, duration, horizon, on_landed)
    return run


# the authors' release re-queues resident experts: a victim of a run may be popped again in it
CASES = [(name, case) for name in PLANNING for case in range(3)] + [("moespac_static", c) for c in range(3, 12)]


@pytest.mark.parametrize("name,case", CASES)
def test_planned_runs_equal_one_copy_at_a_time(name, case, monkeypatch):
    rng = np.random.default_rng(100 + case)
    seen: list = []
    monkeypatch.setattr(ProtocolCore, "_planned_run", _checked(seen, rng))
    if case == 2:
        monkeypatch.setattr(core_mod, "RUN_CHUNK", 1)
    n_slots = int(rng.integers(2, MODEL.n_layers * MODEL.n_experts // 2))
    eng, _, _ = simulate(name, _routing(rng, 40), 8, n_slots, coalesce=True)
    assert eng.core.planned_runs
    assert sum(seen) >= 5                      # runs that landed copies were compared
