"""Accelerate: first layers static, an offloaded layer is copied whole when it runs (LRU over layers)."""
import numpy as np

from sim.policies import make_policy
from sim.policies.base import CPU, Signals
from tests.policies.conftest import Driver, context, onehot


def test_static_first_layers_and_whole_layer_fetch():
    pol = make_policy("accelerate")
    E = 3
    d = Driver(pol, context(L=4, E=E, slots=9))       # 3 whole layers: layers 0, 1 static, 1 staging
    assert set(zip(*np.nonzero(d.cache.resident))) == {(l, e) for l in (0, 1) for e in range(E)}
    p = pol.place(2, onehot(E, 1), Signals(), d.cache)
    assert sorted(p.extra_fetch) == [0, 2]            # the unrequested rest of the layer moves too
    assert CPU not in p.where[[1]]


def test_offloaded_layers_thrash_the_staging_area_lru_over_layers():
    E = 3
    seq = np.array([[onehot(E, 0), onehot(E, 1), onehot(E, 2), onehot(E, 0)]] * 3)
    d = Driver(make_policy("accelerate"), context(L=4, E=E, slots=9)).run(seq)
    # layers 2 and 3 alternate in the 3 staging slots: every visit moves the whole layer
    assert d.fetches == 3 * 2 * E
    assert {l for l, _ in d.evicted} <= {2, 3}
    assert d.hits == 3 * 2 and d.cpu == 0


def test_partial_layer_when_staging_is_smaller_than_a_layer():
    pol = make_policy("accelerate", buffer_layers=0)
    d = Driver(pol, context(L=2, E=4, slots=6))      # layer 0 static (4 slots), 2 staging slots
    p = pol.place(1, onehot(4, 3), Signals(), d.cache)
    assert len(p.extra_fetch) == 1
