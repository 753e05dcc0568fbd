"""Routing statistics of a trace or a workload set.

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
from traces.routing_model import norm_entropy
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
    return norm_entropy(counts / np.maximum(counts.sum(axis=1, keepdims=True), 1))


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


def _hits_by_size(ranks: np.ndarray, slots, n_experts: int) -> np.ndarray:
    """Hits per layer at each cache size from LRU stack distances, int [len(slots), L]."""
    T, L, k = ranks.shape
    capped = np.minimum(ranks, n_experts).transpose(1, 0, 2).reshape(L, -1)
    flat = (np.arange(L)[:, None] * (n_experts + 1) + capped).ravel()
    hist = np.bincount(flat, minlength=L * (n_experts + 1)).reshape(L, n_experts + 1)
    below = np.concatenate([np.zeros((L, 1), np.int64), np.cumsum(hist, axis=1)], axis=1)
    return np.stack([below[:, min(int(c), n_experts)] for c in slots]) if len(slots) else np.zeros((0, L))


class _Pool:
    """Counts of one trace, summed per layer, for pooling over a workload set."""

    def __init__(self, trace: Trace, slots, belady_slots, gammas):
        ex, E, k = trace.experts, trace.n_experts, trace.top_k
        T, L, _ = ex.shape
        nxt, prev = next_prev_use(ex, E)
        self.tokens, self.accesses = T, T * k
        self.counts = _counts(ex, E)
        self.reuse = np.count_nonzero(prev[1:] == np.arange(T - 1)[:, None, None], axis=(0, 2))
        self.reuse_den = max(T - 1, 0) * k
        ranks, sranks = lru_ranks(ex, E)
        self.lru, self.lru_seq = _hits_by_size(ranks, slots, E), _hits_by_size(sranks, slots, E)
        self.belady = belady_hits(ex, E, belady_slots, nxt) if belady_slots else np.zeros((0, L))
        self.windows = {g: window_unique_sum(prev, g) for g in gammas}


def _joined(traces, key: str) -> str:
    return ",".join(sorted({str(t.meta.get(key)) for t in traces}))


def _check_one_model(traces) -> tuple[int, int, int]:
    shapes = {(t.n_layers, t.n_experts, t.top_k) for t in traces}
    if len(shapes) != 1:
        raise ValueError(f"traces have shapes (L, E, k) {sorted(shapes)}: statistics need one model")
    return shapes.pop()


def _by_size(slots, hits: np.ndarray, acc: int) -> tuple[dict, dict]:
    rates = hits / acc
    return ({c: float(v.mean()) for c, v in zip(slots, rates)}, {c: v.tolist() for c, v in zip(slots, rates)})


def analyse(traces, slots=None, gammas=GAMMAS, belady: bool = True) -> dict:
    """Statistics of one :class:`Trace` or a list of traces of the same model, as a JSON-ready dict
    (hit rates keyed by slots per layer, window sizes keyed by gamma)."""
    traces = [traces] if isinstance(traces, Trace) else list(traces)
    L, E, k = _check_one_model(traces)
    slots = tuple(int(c) for c in (slots or default_slots(E, k)))
    bel_slots = tuple(c for c in slots if c >= k) if belady else ()
    pools = [_Pool(tr, slots, bel_slots, gammas) for tr in traces]
    acc = sum(p.accesses for p in pools)
    reuse_l = sum(p.reuse for p in pools) / max(sum(p.reuse_den for p in pools), 1)
    ent_l = _entropy(sum(p.counts for p in pools))
    lru, lru_l = _by_size(slots, sum(p.lru for p in pools), acc)
    bel, bel_l = _by_size(bel_slots, sum(p.belady for p in pools), acc)
    windows = {}
    for g in gammas:
        num, den = (sum(p.windows[g][i] for p in pools) for i in (0, 1))
        windows[g] = num / den if den else None
    return {"model": _joined(traces, "model"), "workload": _joined(traces, "workload"),
            "source": _joined(traces, "source"), "n_traces": len(traces),
            "tokens": int(sum(p.tokens for p in pools)), "n_layers": L, "n_experts": E, "top_k": k,
            "random_reuse": k / E, "reuse": float(reuse_l.mean()), "reuse_by_layer": reuse_l.tolist(),
            "entropy": float(ent_l.mean()), "entropy_by_layer": ent_l.tolist(),
            "lru_hit": lru, "lru_seq_hit": _by_size(slots, sum(p.lru_seq for p in pools), acc)[0],
            "belady_hit": bel, "unique_per_window": windows,
            "lru_hit_by_layer": lru_l, "belady_hit_by_layer": bel_l}


def curves(traces, belady_slots=None) -> dict:
    """Hit-rate curves for a figure: LRU at every size k..E (free from the stack distances) and
    Belady at ``belady_slots`` (default: about 12 sizes from k to E)."""
    traces = [traces] if isinstance(traces, Trace) else list(traces)
    E, k = traces[0].n_experts, traces[0].top_k
    if belady_slots is None:
        belady_slots = sorted({int(round(x)) for x in np.geomspace(k, E, 12)})
    lru = analyse(traces, slots=list(range(k, E + 1)), gammas=(), belady=False)["lru_hit"]
    bel = analyse(traces, slots=belady_slots, gammas=(), belady=True)["belady_hit"]
    return {"lru": lru, "belady": bel}


def format_table(st: dict) -> str:
    """A plain-text report of :func:`analyse` output: summary lines and a per-layer table."""
    slots = list(st["lru_hit"])
    head = [f"model {st['model']}  workload {st['workload']}  source {st['source']}  "
            f"traces {st['n_traces']}  tokens {st['tokens']}  (L={st['n_layers']}, E={st['n_experts']}, "
            f"k={st['top_k']})",
            f"next-token reuse {st['reuse']:.3f} (uniform random {st['random_reuse']:.3f})   "
            f"mean normalized entropy {st['entropy']:.3f}",
            "slots/layer        " + "".join(f"{c:>8}" for c in slots),
            "LRU hit            " + "".join(f"{st['lru_hit'][c]:8.3f}" for c in slots),
            "LRU hit (seq.)     " + "".join(f"{st['lru_seq_hit'][c]:8.3f}" for c in slots),
            "Belady hit         " + "".join(f"{st['belady_hit'][c]:8.3f}" if c in st["belady_hit"]
                                           else f"{'-':>8}" for c in slots),
            "gamma              " + "".join(f"{g:>8}" for g in st["unique_per_window"]),
            "unique experts/win " + "".join(f"{v:8.2f}" if v is not None else f"{'-':>8}"
                                           for v in st["unique_per_window"].values()),
            "",
            f"{'layer':>5} {'entropy':>8} {'reuse':>7}" + "".join(f" {'LRU@' + str(c):>7}" for c in slots)]
    rows = [f"{l:>5} {st['entropy_by_layer'][l]:8.3f} {st['reuse_by_layer'][l]:7.3f}"
            + "".join(f" {st['lru_hit_by_layer'][c][l]:7.3f}" for c in slots) for l in range(st["n_layers"])]
    return "\n".join(head + rows)
