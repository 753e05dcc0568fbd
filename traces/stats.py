"""Routing statistics of a trace or a workload set (DESIGN 6, rung 3).

Each MoE layer is its own sequence of top-k sets. For a set of traces (one request each) every
count is pooled over the traces, and every cache starts cold at the start of each trace.

* ``entropy_by_layer``: normalized popularity entropy H(p_l) / log(E) of the expert shares at
  layer l; ``entropy`` is the mean over layers.
* ``reuse``: next-token reuse |E_t ∩ E_t+1| / k (uniform random routing gives k/E).
* ``unique_per_window``: mean number of distinct experts per layer among gamma+1 consecutive tokens
  (every window position; gamma=0 gives k), the size of a speculative verify window's working set.
* ``lru_hit`` / ``belady_hit``: per-layer cache of C slots, cold start, all k experts of a token
  looked up before the update (so LRU at C = k equals reuse). ``lru_seq_hit`` looks them up one by
  one in slot order instead, the rule behind the published Mixtral LRU numbers.
"""
from __future__ import annotations

import numpy as np

from traces.cachesim import belady_hits, lru_ranks, next_prev_use
from traces.schema import Trace

GAMMAS = (0, 1, 2, 4, 8, 12)
_DEFAULT_SLOTS = {(128, 8): (8, 16, 22, 32), (8, 2): (2, 3, 4, 6), (64, 6): (6, 8, 11, 16)}


def default_slots(n_experts: int, top_k: int) -> tuple[int, ...]:
    """Cache sizes (slots per layer) reported by default: the published ones for known models,
    otherwise k, 2k, about 17% of E and 4k (each at least k and at most E)."""
    if (n_experts, top_k) in _DEFAULT_SLOTS:
        return _DEFAULT_SLOTS[(n_experts, top_k)]
    cand = {top_k, 2 * top_k, round(0.17 * n_experts), 4 * top_k}
    return tuple(sorted(c for c in cand if top_k <= c <= n_experts))


def popularity_entropy(experts: np.ndarray, n_experts: int) -> np.ndarray:
    """Normalized entropy of the expert popularity at each layer, float [L]."""
    return _entropy(_counts(experts, n_experts))


def _counts(experts: np.ndarray, n_experts: int) -> np.ndarray:
    T, L, k = experts.shape
    flat = (np.arange(L)[None, :, None] * n_experts + experts).ravel()
    return np.bincount(flat, minlength=L * n_experts).reshape(L, n_experts)


def _entropy(counts: np.ndarray) -> np.ndarray:
    p = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
    return h / np.log(counts.shape[1])


def window_unique_sum(prev: np.ndarray, gamma: int) -> tuple[float, int]:
    """Sum over all windows of gamma+1 tokens of the distinct experts per layer, and the number of
    (window, layer) pairs. An access at ``t`` with previous use ``p`` is the first of its expert in
    the windows starting at ``max(p+1, t-gamma, 0) .. min(t, T-gamma-1)``."""
    T, L, _ = prev.shape
    w = gamma + 1
    if T < w:
        return 0.0, 0
    t = np.arange(T)[:, None, None]
    lo = np.maximum(np.maximum(prev + 1, t - gamma), 0)
    hi = np.minimum(t, T - w)
    return float(np.clip(hi - lo + 1, 0, None).sum()), (T - w + 1) * L


class _Pool:
    """Counts of one statistic pooled over traces (sums per layer and denominators)."""

    def __init__(self, trace: Trace, slots, gammas, belady: bool):
        ex, E, k = trace.experts, trace.n_experts, trace.top_k
        T, L, _ = ex.shape
        nxt, prev = next_prev_use(ex, E)
        self.tokens = T
        self.counts = _counts(ex, E)
        self.reuse = np.count_nonzero(prev[1:] == np.arange(T - 1)[:, None, None], axis=(0, 2))
        self.reuse_den = max(T - 1, 0) * k
        self.accesses = T * k
        ranks, sranks = lru_ranks(ex, E), lru_ranks(ex, E, sequential=True)
        self.lru = np.stack([np.count_nonzero(ranks < c, axis=(0, 2)) for c in slots])
        self.lru_seq = np.stack([np.count_nonzero(sranks < c, axis=(0, 2)) for c in slots])
        ok = [c for c in slots if c >= k]
        self.belady = belady_hits(ex, E, ok, nxt) if belady and ok else np.zeros((0, L))
        self.belady_slots = ok if belady else []
        self.windows = {g: window_unique_sum(prev, g) for g in gammas}


def analyse(traces, slots=None, gammas=GAMMAS, belady: bool = True) -> dict:
    """Statistics of one :class:`Trace` or a list of traces of the same model, as a JSON-ready dict."""
    traces = [traces] if isinstance(traces, Trace) else list(traces)
    first = traces[0]
    shape = (first.n_layers, first.n_experts, first.top_k)
    for tr in traces[1:]:
        if (tr.n_layers, tr.n_experts, tr.top_k) != shape:
            raise ValueError(f"trace {tr.path} has shape (L, E, k)={(tr.n_layers, tr.n_experts, tr.top_k)}, "
                             f"others {shape}: statistics need one model")
    L, E, k = shape
    slots = tuple(int(c) for c in (slots or default_slots(E, k)))
    pools = [_Pool(tr, slots, gammas, belady) for tr in traces]
    acc = sum(p.accesses for p in pools)
    reuse_den = max(sum(p.reuse_den for p in pools), 1)
    reuse_l = sum(p.reuse for p in pools) / reuse_den
    ent_l = _entropy(sum(p.counts for p in pools))
    lru_l = sum(p.lru for p in pools) / acc
    bel = sum(p.belady for p in pools) / acc if belady else None
    out = {
        "model": first.meta.get("model"), "workload": first.meta.get("workload"),
        "source": first.meta.get("source"), "n_traces": len(traces),
        "tokens": int(sum(p.tokens for p in pools)), "n_layers": L, "n_experts": E, "top_k": k,
        "random_reuse": k / E,
        "reuse": float(reuse_l.mean()), "reuse_by_layer": reuse_l.tolist(),
        "entropy": float(ent_l.mean()), "entropy_by_layer": ent_l.tolist(),
        "lru_hit": {c: float(v.mean()) for c, v in zip(slots, lru_l)},
        "lru_seq_hit": {c: float(v.mean()) for c, v in zip(slots, sum(p.lru_seq for p in pools) / acc)},
        "lru_hit_by_layer": {c: v.tolist() for c, v in zip(slots, lru_l)},
        "belady_hit": {}, "unique_per_window": {},
    }
    if belady:
        out["belady_hit"] = {c: float(v.mean()) for c, v in zip(pools[0].belady_slots, bel)}
    for g in gammas:
        num = sum(p.windows[g][0] for p in pools)
        den = sum(p.windows[g][1] for p in pools)
        out["unique_per_window"][g] = num / den if den else float("nan")
    return out
