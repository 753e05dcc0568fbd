"""Fate: ARC cache (checked against a hand trace and a literal ARC), next-layer gate prefetch."""
import numpy as np
import pytest

from sim.policies import make_policy
from sim.policies.arc import ARC
from sim.policies.base import FETCH, Signals
from tests.policies.conftest import Driver, context, onehot


def test_arc_hand_sequence():
    """c = 2, traced by hand from Megiddo & Modha's Fig. 4 (cases I-IV, p up and down)."""
    arc = ARC(2)
    seq = "ABACBADCEF"
    expect = [(False, None), (False, None), (True, None), (False, "B"), (False, "A"),
              (False, "C"), (False, "B"), (False, "A"), (False, "C"), (False, "D")]
    ps = [0, 0, 0, 0, 1, 0, 0, 1, 1, 1]
    for key, want, p in zip(seq, expect, ps):
        assert arc.request(key) == want, key
        assert arc.p == p, key
    assert (list(arc.t1), list(arc.t2), list(arc.b1), list(arc.b2)) == (["E", "F"], [], [], ["A", "C"])


class LiteralARC:
    """ARC exactly as printed (Fig. 4), lists as Python lists, LRU at index 0."""

    def __init__(self, c):
        self.c, self.p = c, 0.0
        self.T1, self.T2, self.B1, self.B2 = [], [], [], []

    def _replace(self, x):
        if self.T1 and ((x in self.B2 and len(self.T1) == self.p) or len(self.T1) > self.p):
            self.B1.append(self.T1.pop(0))
            return self.B1[-1]
        self.B2.append(self.T2.pop(0))
        return self.B2[-1]

    def request(self, x):
        c = self.c
        if x in self.T1 or x in self.T2:
            (self.T1 if x in self.T1 else self.T2).remove(x)
            self.T2.append(x)
            return True, None
        if x in self.B1:
            self.p = min(c, self.p + max(len(self.B2) / len(self.B1), 1))
            v = self._replace(x)
            self.B1.remove(x)
            self.T2.append(x)
            return False, v
        if x in self.B2:
            self.p = max(0, self.p - max(len(self.B1) / len(self.B2), 1))
            v = self._replace(x)
            self.B2.remove(x)
            self.T2.append(x)
            return False, v
        v = None
        if len(self.T1) + len(self.B1) == c:
            if len(self.T1) < c:
                self.B1.pop(0)
                v = self._replace(x)
            else:
                v = self.T1.pop(0)
        elif len(self.T1) + len(self.T2) + len(self.B1) + len(self.B2) >= c:
            if len(self.T1) + len(self.T2) + len(self.B1) + len(self.B2) == 2 * c:
                self.B2.pop(0)
            v = self._replace(x)
        self.T1.append(x)
        return False, v


@pytest.mark.parametrize("seed", range(6))
def test_arc_equals_literal_arc(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(1, 6))
    keys = rng.zipf(1.5, size=400) % (3 * c + 2)
    a, ref = ARC(c), LiteralARC(c)
    for k in keys:
        assert a.request(int(k)) == ref.request(int(k))
    assert (list(a.t1), list(a.t2), list(a.b1), list(a.b2)) == (ref.T1, ref.T2, ref.B1, ref.B2)


def test_fate_cache_is_arc_on_a_plain_request_sequence():
    rng = np.random.default_rng(5)
    E, c = 9, 3
    keys = rng.zipf(1.6, size=300) % E
    seq = np.array([[onehot(E, int(k))] for k in keys])
    d = Driver(make_policy("fate"), context(L=1, E=E, slots=c), pin=False).run(seq)
    ref = LiteralARC(c)
    assert d.hits == sum(ref.request((0, int(k)))[0] for k in keys)


def test_fate_prefetches_the_predicted_next_layer_and_drops_stale_entries():
    pol = make_policy("fate")
    d = Driver(pol, context(L=3, E=5, slots=4))
    pol.on_layer_start(0, d.cache)
    where = pol.place(0, onehot(5, 2), Signals(next_pred=onehot(5, 4, 1, 1)), d.cache).where
    assert where[2] == FETCH
    assert pol.next_transfer(d.cache) == (1, 1)         # most predicted first
    pol.on_layer_start(1, d.cache)
    assert pol.next_transfer(d.cache) is None           # (1, 4) was for layer 1: stale now
    assert not pol.speculative


def test_fate_without_prediction_only_fetches_on_demand():
    rng = np.random.default_rng(1)
    seq = np.array([[onehot(6, *rng.choice(6, 2, replace=False)) for _ in range(3)] for _ in range(15)])
    d = Driver(make_policy("fate"), context(L=3, E=6, k=2, slots=7), prefetch_budget=3).run(seq)
    assert d.prefetches == 0 and d.cpu == 0 and d.fetches > 0
