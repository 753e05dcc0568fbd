"""PrefetchQueue.push_many against one push per item, and SP-MoE's vectorised queue order against
the per-layer loop it replaces."""
import numpy as np
import pytest

from sim.protocol.expert_cache import ExpertCache
from sim.policies.prefetch_queue import PrefetchQueue
from sim.policies.sp_moe import _queue_order


class _Present:
    """A cache stand-in: ``present`` from a set."""

    def __init__(self, items):
        self.items = set(items)

    def present(self, layer, expert):
        return (layer, expert) in self.items


@pytest.mark.parametrize("seed", range(6))
def test_push_many_pops_as_one_push_per_item(seed):
    rng = np.random.default_rng(seed)
    a, b = PrefetchQueue(), PrefetchQueue()
    for _ in range(300):
        op = rng.random()
        if op < 0.4:        # a batch, duplicates and re-keys included
            n = int(rng.integers(0, 40))
            items = [(int(rng.integers(0, 4)), int(rng.integers(0, 6)), (int(rng.integers(0, 3)), float(rng.random())))
                     for _ in range(n)]
            for item in items:
                a.push(*item)
            b.push_many(items)
        elif op < 0.5:
            layer = int(rng.integers(0, 4))
            a.drop_layer(layer)
            b.drop_layer(layer)
        elif op < 0.52:
            a.clear()
            b.clear()
        else:
            cache = _Present((int(rng.integers(0, 4)), int(rng.integers(0, 6))) for _ in range(5))
            assert a.pop(cache) == b.pop(cache)
        assert len(a) == len(b)
    cache = _Present(())
    assert [a.pop(cache) for _ in range(len(a) + 1)] == [b.pop(cache) for _ in range(len(b) + 1)]


def _plain_order(pred, cache):
    """SP-MoE's former per-layer loop."""
    out = []
    for layer in range(pred.shape[0]):
        want = (pred[layer] > 0).nonzero()[0]
        for e in want[np.lexsort((want, -pred[layer][want]))]:
            if not cache.present(layer, int(e)):
                out.append((layer, int(e), (layer, -int(pred[layer, e]))))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_sp_moe_queue_order_equals_the_per_layer_loop(seed):
    rng = np.random.default_rng(seed)
    L, E = 6, 9
    cache = ExpertCache(L, E, L * E)
    for flat in rng.choice(L * E, size=int(rng.integers(0, 20)), replace=False).tolist():
        (cache.load if rng.random() < 0.5 else cache.begin)(*divmod(flat, E))
    pred = rng.integers(0, 4, size=(L, E)) * (rng.random((L, E)) < 0.5)
    cut = int(rng.integers(0, L + 1))
    got = _queue_order(pred[:cut], cache.resident[:cut] | cache.inflight[:cut])
    assert got == _plain_order(pred[:cut], cache)
    assert [type(x) for x in got[0][2]] == [int, int] if got else True
