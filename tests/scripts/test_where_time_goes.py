"""benchmarks/where_time_goes.py: every profiled second lands in exactly one layer, outside code
(numpy wrappers, C builtins) in its callers' layers as cProfile split it."""
from __future__ import annotations

import cProfile
import importlib.util
import pstats
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
_SPEC = importlib.util.spec_from_file_location("where_time_goes", ROOT / "benchmarks" / "where_time_goes.py")
wtg = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(wtg)

LAYER = {"pol": "policy", "core": "protocol", "eng": "engine", "simpy": "simpy", "run": "setup"}


def _layer(filename: str):
    return LAYER.get(filename)          # "np", "c": outside the project


def f(file: str, name: str):
    return (file, 1, name)


def test_outside_time_goes_to_callers_as_recorded_and_through_outside_callers_by_cumulative_time():
    P, Q, E, N1, N2, ROOT_ = f("pol", "pick"), f("core", "apply"), f("eng", "layer"), f("np", "wrap"), \
        f("c", "item"), f("run", "main")
    stats = {   # func: (cc, nc, tt, ct, {caller: (cc, nc, tt, ct)})
        ROOT_: (1, 1, 0.5, 10.0, {}),
        E: (1, 1, 1.0, 9.5, {ROOT_: (1, 1, 1.0, 9.5)}),
        P: (1, 1, 2.0, 4.0, {E: (1, 1, 2.0, 4.0)}),
        Q: (1, 1, 1.0, 4.5, {E: (1, 1, 1.0, 4.5)}),
        # numpy wrapper: own 1.0 s, 0.75 of it recorded under the policy, 0.25 under the core;
        # its cumulative time per caller is 3.0 (policy) and 1.0 (core)
        N1: (2, 2, 1.0, 4.0, {P: (1, 1, 0.75, 3.0), Q: (1, 1, 0.25, 1.0)}),
        # a C builtin called by the wrapper (2.0 s) and by the engine (0.5 s)
        N2: (3, 3, 2.5, 2.5, {N1: (2, 2, 2.0, 2.0), E: (1, 1, 0.5, 0.5)}),
    }
    got = wtg.attribute(stats, _layer)
    # N1's own time as recorded: policy 0.75, core 0.25; N2's 2.0 under N1 split by N1's
    # cumulative time per caller (3:1): policy 1.5, core 0.5; N2's 0.5 under the engine
    assert got == pytest.approx({"policy": 2.0 + 0.75 + 1.5, "protocol": 1.0 + 0.25 + 0.5,
                                 "engine": 1.0 + 0.5, "simpy": 0.0, "setup": 0.5}, abs=1e-12)
    assert sum(got.values()) == pytest.approx(sum(v[2] for v in stats.values()), abs=1e-12)


def test_a_cycle_of_outside_functions_ends_in_setup_and_loses_nothing():
    A, B, P = f("np", "a"), f("np", "b"), f("pol", "p")
    stats = {P: (1, 1, 1.0, 3.0, {}),
             A: (1, 2, 1.0, 2.0, {B: (1, 1, 0.5, 1.0), P: (1, 1, 0.5, 1.0)}),
             B: (1, 1, 1.0, 1.5, {A: (1, 1, 1.0, 1.5)})}
    got = wtg.attribute(stats, _layer)
    assert sum(got.values()) == pytest.approx(3.0, abs=1e-12)
    assert got["policy"] >= 1.5                 # P's own second and A's half recorded under P
    assert got["setup"] > 0                     # what circles between A and B


def test_a_real_profile_is_conserved_and_files_map_to_layers():
    def inner(n):
        return sum(i * i for i in range(n))

    prof = cProfile.Profile()
    prof.enable()
    inner(20000)
    sorted(range(1000))
    prof.disable()
    stats = pstats.Stats(prof).stats
    got = wtg.attribute(stats)
    assert sum(got.values()) == pytest.approx(sum(v[2] for v in stats.values()), rel=1e-9, abs=1e-12)
    assert wtg.layer_of(str(ROOT / "sim/policies/moespac/policy.py")) == "policy"
    assert wtg.layer_of(str(ROOT / "sim/protocol/core.py")) == "protocol"
    assert wtg.layer_of(str(ROOT / "sim/protocol/expert_cache.py")) == "protocol"
    assert wtg.layer_of(str(ROOT / "sim/engine/link.py")) == "engine"
    assert wtg.layer_of(str(ROOT / "sim/run/runner.py")) == "setup"
    assert wtg.layer_of("/usr/lib/python3/site-packages/simpy/core.py") == "simpy"
    assert wtg.layer_of("/usr/lib/python3/site-packages/numpy/_core/numeric.py") is None
    assert wtg.layer_of("~") is None            # C builtins
