"""The oracle's next-use index (built at once from the whole future) against the plain per-query
computations it replaced: a scan of the future for the next use, a sort of each position's
requests, and a sort of every expert's first use."""
import numpy as np
import pytest

from sim.policies.belady import NEVER, NextUse
from tests.policies.conftest import random_counts


def _next_use(fc, layer, expert, pos):
    S, L, _ = fc.shape
    for s in range(S):
        p = s * L + layer
        if p >= pos and fc[s, layer, expert] != 0:
            return p
    return NEVER


def _uses_at(fc, pos):
    row = fc[divmod(pos, fc.shape[1])]
    return sorted((e for e in range(len(row)) if row[e] > 0), key=lambda e: (-row[e], e))


@pytest.mark.parametrize("seed", range(5))
def test_next_use_index_equals_plain_scans(seed):
    rng = np.random.default_rng(seed)
    S, L, E = int(rng.integers(1, 9)), int(rng.integers(1, 4)), int(rng.integers(2, 7))
    fc = random_counts(rng, S=S, L=L, E=E, k=min(2, E), window=int(rng.integers(1, 4)))
    index = NextUse(fc)
    for pos in range(S * L + 3):
        for layer in range(L):
            want = [_next_use(fc, layer, e, pos) for e in range(E)]
            assert [index.next_use(layer, e, pos) for e in range(E)] == want
            experts = rng.permutation(E)[: int(rng.integers(0, E + 1))].tolist()
            assert index.next_uses(layer, experts, pos) == [want[e] for e in experts]
        if pos < S * L:
            assert index.uses_at(pos) == _uses_at(fc, pos)
    firsts = sorted((_next_use(fc, l, e, 0), l * E + e) for l in range(L) for e in range(E)
                    if _next_use(fc, l, e, 0) < NEVER)
    for n in (0, 1, 3, L * E + 1):
        assert index.first_uses(n) == [divmod(k, E) for _, k in firsts[:n]]


def test_empty_future_has_no_uses():
    index = NextUse(np.zeros((0, 2, 3), dtype=np.int64))
    assert index.first_uses(4) == [] and index.next_use(1, 2, 0) == NEVER
