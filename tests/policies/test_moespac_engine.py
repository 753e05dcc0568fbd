"""MoE-SpAc's asynchronous engine decisions: the multi-level prefetch queue and the eviction tree."""
import numpy as np

from sim.policies.moespac.prefetch_queue import PrefetchQueue
from sim.policies.moespac.score_cache import ScoreTree


# --- prefetch queue ----------------------------------------------------------------------------
def test_queue_serves_highest_level_first_fifo_within_a_level():
    q = PrefetchQueue(n_layers=3, n_experts=8, K=5)
    q.push_levels(0, [1, 2, 3], [2, 5, 2])
    q.push_levels(1, [4, 5], [5, 2])
    got = [q.pop() for _ in range(5)]
    assert got == [(0, 2, 5), (1, 4, 5), (0, 1, 2), (0, 3, 2), (1, 5, 2)]
    assert q.pop() is None


def test_queue_min_level_leaves_lower_levels_queued():
    q = PrefetchQueue(2, 8, K=5)
    q.push_levels(0, [1, 2], [1, 3])
    assert q.pop(min_level=2) == (0, 2, 3)
    assert q.pop(min_level=2) is None
    assert q.pop() == (0, 1, 1)


def test_stale_entries_of_a_starting_layer_are_dropped():
    q = PrefetchQueue(3, 8, K=5)
    q.push_levels(0, [1], [5])
    q.push_levels(1, [2, 3], [5, 1])
    q.push_levels(2, [4], [3])
    q.drop_layer(1)                    # layer 1 starts: its entries are too late
    assert q.live() == [(0, 1, 5), (2, 4, 3)]
    assert [q.pop(), q.pop(), q.pop()] == [(0, 1, 5), (2, 4, 3), None]
    assert q.stale_dropped == 2
    q.push_levels(1, [6], [2])         # the next plan of layer 1 is live again
    assert q.pop() == (1, 6, 2)


def test_push_front_returns_an_entry_to_the_head():
    q = PrefetchQueue(1, 8, K=2)
    q.push_levels(0, [1, 2], [2, 2])
    l, e, lv = q.pop()
    q.push_front(l, e, lv)
    assert q.pop() == (0, 1, 2)


def test_queue_compacts_stale_entries():
    q = PrefetchQueue(1, 2, K=1)       # limit 4 * 1 * 2 = 8 entries
    for _ in range(20):
        q.push_levels(0, [0, 1], [1, 1])
        q.drop_layer(0)
    assert q.size <= 8 and q.live() == []


class PlainQueue:
    """Reference: every pop scans the levels from K down; stale entries are dropped as met."""

    def __init__(self, n_layers, K):
        self.K, self.levels, self.gen, self.stale = K, [[] for _ in range(K + 1)], [0] * n_layers, 0

    def push(self, layer, experts, levels):
        for e, s in zip(experts, levels):
            self.levels[s].append((layer, e, self.gen[layer]))

    def pop(self, min_level):
        for level in range(self.K, max(1, min_level) - 1, -1):
            q = self.levels[level]
            while q:
                layer, e, g = q.pop(0)
                if g == self.gen[layer]:
                    return layer, e, level
                self.stale += 1
        return None


def test_queue_equals_a_plain_scan_under_random_operations():
    rng = np.random.default_rng(17)
    for _ in range(40):
        L, E, K = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
        q, ref, last = PrefetchQueue(L, E, K), PlainQueue(L, K), None
        q.limit = 10 ** 9                  # no compaction here (it counts stale entries early)
        for _ in range(300):
            op = rng.random()
            if op < 0.35:
                layer, n = int(rng.integers(L)), int(rng.integers(0, E + 1))
                experts = rng.permutation(E)[:n].tolist()
                levels = rng.integers(1, K + 1, n).tolist()
                q.push_levels(layer, experts, levels)
                ref.push(layer, experts, levels)
            elif op < 0.45:
                layer = int(rng.integers(L))
                q.drop_layer(layer)
                ref.gen[layer] += 1
            elif op < 0.55 and last is not None:
                q.push_front(*last)
                ref.levels[last[2]].insert(0, (last[0], last[1], ref.gen[last[0]]))
                last = None
            else:
                lo = int(rng.integers(1, K + 1)) if rng.random() < 0.3 else 1
                last = q.pop(lo)
                assert last == ref.pop(lo)
            assert q.stale_dropped == ref.stale
            assert q.live() == [(l, e, lv) for lv in range(K, 0, -1) for (l, e, g) in ref.levels[lv]
                                if g == ref.gen[l]]


# --- eviction tree -------------------------------------------------------------------------------
def hand_tree(order):
    """L=3 layers x E=4 experts, K=5: scores chosen to exercise every rule."""
    t = ScoreTree(3, 4, K=5, order=order)
    for l, e, s in [(0, 0, 2), (0, 1, 0), (1, 2, 0), (1, 3, 4), (2, 0, 1), (2, 3, 0)]:
        t.insert(l, e, s)
    return t


def drain(t, tau, current, blocked=None):
    """Victims in order until none may go (each one removed as the executor evicts it)."""
    blocked = np.zeros(t.L, bool) if blocked is None else blocked
    out = []
    while (v := t.victim(tau, min(tau), max(tau), current, blocked)) is not None:
        out.append(v)
        t.remove(*v)
    return out


def test_id_order_is_smallest_score_then_id_and_respects_tau():
    t = hand_tree("id")
    # tau = 2 everywhere: scores 0, 0, 0, then 1; the scores 2 and 4 may not go
    assert drain(t, [2, 2, 2], current=0) == [(0, 1), (1, 2), (2, 3), (2, 0)]
    assert [(s, l, e) for s, l, e in t.entries()] == [(2, 0, 0), (4, 1, 3)]


def test_cyclic_order_evicts_the_layer_that_runs_furthest_ahead():
    t = hand_tree("cyclic")
    # current layer 1 (just computed): next uses are 1 (a step away), then 0, then 2 (next)
    assert drain(t, [6, 6, 6], current=1) == [(1, 2), (0, 1), (2, 3), (2, 0), (0, 0), (1, 3)]


def test_pinned_layer_reads_k_plus_1_and_is_never_a_victim():
    t = hand_tree("cyclic")
    t.pin(1)
    assert t.score_of(1, 2) == 6 and t.score_of(1, 0) == -1 and t.score_of(0, 1) == 0
    assert (6, 1, 2) in t.entries()
    assert drain(t, [6, 6, 6], current=1) == [(0, 1), (2, 3), (2, 0), (0, 0)]
    t.unpin(1)
    assert drain(t, [6, 6, 6], current=1) == [(1, 2), (1, 3)]


def test_executor_pins_block_victims_too():
    t = hand_tree("id")
    blocked = np.array([True, False, False])
    assert drain(t, [6, 6, 6], current=0, blocked=blocked)[0] == (1, 2)


def test_no_victim_at_or_above_its_layers_tau():
    t = hand_tree("cyclic")
    # per-layer thresholds: layer 0 protects everything (tau 1 > only score 0 goes), layer 2
    # gives up scores below 2
    got = drain(t, [1, 1, 2], current=2)
    assert got == [(2, 3), (1, 2), (0, 1), (2, 0)]
    assert all(s >= [1, 1, 2][l] for s, l, e in t.entries())


def test_lazy_raise_is_seen_at_its_true_score():
    t = hand_tree("cyclic")
    t.set(0, 1, 5)                      # raised lazily: still keyed at 0
    t.set_layer(2, np.array([3, 0, 0, 3]), np.array([True, False, False, True]))
    assert t.score[2].tolist() == [3, -1, -1, 3]          # absent experts stay -1
    assert t.key[0, 1] == 0 and t.score_of(0, 1) == 5
    # true scores: (1,2)=0 (0,0)=2 (2,3)=3 (2,0)=3 (1,3)=4 (0,1)=5; tau 4 keeps 4 and 5
    assert drain(t, [4, 4, 4], current=0) == [(1, 2), (0, 0), (2, 3), (2, 0)]
    assert t.key[0, 1] == 5                                # re-keyed when the search met it


def reference_victim(scores, pinned, tau, current, blocked, order, L):
    cand = [(s, l, e) for (l, e), s in scores.items() if s < tau[l] and not pinned[l] and not blocked[l]]
    if not cand:
        return None
    if order == "id":
        s, l, e = min(cand)
    else:
        s, l, e = min(cand, key=lambda x: (x[0], (current - x[1]) % L, -x[2]))
    return l, e


def test_tree_matches_reference_under_random_operations():
    rng = np.random.default_rng(7)
    L, E, K = 5, 6, 5
    for order in ("id", "cyclic"):
        t, scores = ScoreTree(L, E, K, order=order), {}
        pinned = [False] * L
        for _ in range(3000):
            op = rng.integers(0, 6)
            l, e, s = int(rng.integers(0, L)), int(rng.integers(0, E)), int(rng.integers(0, K + 1))
            if op == 0 and (l, e) not in scores:
                t.insert(l, e, s)
                scores[(l, e)] = s
            elif op == 1 and (l, e) in scores:
                t.remove(l, e)
                del scores[(l, e)]
            elif op == 2 and (l, e) in scores:
                t.set(l, e, s)
                scores[(l, e)] = s
            elif op == 3:
                new = rng.integers(0, K + 1, E)
                res = np.array([(l, x) in scores for x in range(E)])
                t.set_layer(l, new, res)
                for x in np.flatnonzero(res):
                    scores[(l, int(x))] = int(new[x])
            elif op == 4:
                pinned[l] = not pinned[l]
                (t.pin if pinned[l] else t.unpin)(l)
            tau = [int(x) for x in rng.integers(1, K + 2, L)]
            if rng.random() < 0.5:
                tau = [int(rng.integers(1, K + 2))] * L
            current = int(rng.integers(0, L))
            blocked = rng.random(L) < 0.1
            want = reference_victim(scores, pinned, tau, current, blocked, order, L)
            assert t.victim(tau, min(tau), max(tau), current, blocked) == want
            assert len(t) == len(scores)
            assert all(t.key[l_, e_] <= sc for (l_, e_), sc in scores.items())
