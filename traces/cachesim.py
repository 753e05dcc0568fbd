"""Per-layer expert-cache simulations over a routing array, vectorised over layers.

Every function takes ``experts`` int [T, L, k] (token, MoE layer, top-k slot; no missing ids) and
treats each layer as its own cache of ``C`` slots, cold at the start, filled on demand.

* :func:`lru_ranks` gives each access its LRU recency rank (stack distance), from which the LRU hit
  rate at *every* cache size follows at once: an access hits a cache of ``C`` slots iff its rank is
  below ``C`` (LRU is a stack algorithm). It serves two lookup orders:
  ``batch`` (all k experts of a token are looked up before the cache is updated, so they are
  resident together) and ``sequential`` (one access at a time, in top-k slot order, so an earlier
  miss of the same token can evict a later expert).
* :func:`belady_hits` is the offline optimum under the same batch rule: after token ``t`` the cache
  holds the k experts of ``t`` plus the ``C - k`` cached, non-requested experts with the nearest next
  use (ties broken by expert id; experts never used again are evicted first).
* :func:`next_prev_use` gives each access the token of the next and previous use of its expert.
"""
from __future__ import annotations

import numpy as np

NEVER = np.iinfo(np.int32).max  # rank of a cold (never seen) access: a miss at every size


def next_prev_use(experts: np.ndarray, n_experts: int) -> tuple[np.ndarray, np.ndarray]:
    """For each access (t, l, j): the next token ``> t`` using the same expert at layer ``l`` (``T``
    if none) and the previous token ``< t`` using it (``-1`` if none); both int32 [T, L, k]."""
    T, L, k = experts.shape
    rows = np.arange(L)[:, None]
    nxt = np.empty((T, L, k), np.int32)
    prev = np.empty((T, L, k), np.int32)
    last = np.full((L, n_experts), T, np.int32)
    for t in range(T - 1, -1, -1):
        r = experts[t]
        nxt[t] = last[rows, r]
        last[rows, r] = t
    last.fill(-1)
    for t in range(T):
        r = experts[t]
        prev[t] = last[rows, r]
        last[rows, r] = t
    return nxt, prev


def lru_ranks(experts: np.ndarray, n_experts: int) -> tuple[np.ndarray, np.ndarray]:
    """LRU stack distance of every access under both lookup orders, int32 [T, L, k] each
    (``batch``, ``sequential``); :data:`NEVER` for a first use.

    ``key[l, e] = last_token * k + slot`` orders a layer's experts by recency; the batch rank of a
    requested expert is the number of experts with a larger key, found by one ``searchsorted`` over
    the row-sorted keys of all layers (layer ``l`` offset by ``l * 2**40``). In sequential order the
    earlier slots of the same token, already touched, count too when they were less recent (or new).
    """
    T, L, k = experts.shape
    rows = np.arange(L)[:, None]
    slot = np.arange(k)
    off = rows.astype(np.int64) << 40
    top = (rows + 1) * n_experts
    key = np.full((L, n_experts), -1, np.int64)
    ranks = np.empty((T, L, k), np.int32)
    seq = np.empty((T, L, k), np.int32)
    earlier = np.tril(np.ones((k, k), bool), -1)  # earlier[j, i]: slot i comes before slot j
    for t in range(T):
        r = experts[t]
        kr = key[rows, r]
        flat = (np.sort(key, axis=1) + off).ravel()
        rank = top - np.searchsorted(flat, (kr + off).ravel(), side="right").reshape(L, k)
        extra = ((kr[:, None, :] < kr[:, :, None]) & earlier).sum(axis=-1)
        cold = kr < 0
        ranks[t] = np.where(cold, NEVER, rank)
        seq[t] = np.where(cold, NEVER, rank + extra)
        key[rows, r] = t * k + slot
    return ranks, seq


def hit_rate_from_ranks(ranks: np.ndarray, sizes) -> dict[int, float]:
    """Hit rate at each cache size (slots per layer) from :func:`lru_ranks` output."""
    n = max(ranks.size, 1)
    return {int(c): float(np.count_nonzero(ranks < c) / n) for c in sizes}


def belady_hits(experts: np.ndarray, n_experts: int, sizes, nxt: np.ndarray | None = None
                ) -> np.ndarray:
    """Hits per layer of the offline-optimal per-layer cache, int64 [len(sizes), L], for each size
    ``C >= k`` (batch rule).

    All sizes run together in one array of slots ``[S, L, Cmax]`` holding ``next_use * E + id`` of
    each cached expert (``-1`` pads a smaller cache, ``BIG`` marks a free slot). A cached expert is
    requested at token ``t`` exactly when its stored next use is ``t``, so the hits are the slots in
    ``[t*E, (t+1)*E)``. Those slots are freed, one sort puts the padding first and the free slots
    last, the ``C - k`` nearest-next-use experts stay and the last ``k`` positions take the
    requested experts with their new next use.
    """
    T, L, k = experts.shape
    sizes = [int(c) for c in sizes]
    if any(c < k for c in sizes):
        raise ValueError(f"cache sizes {sizes} must each hold at least top_k={k} experts")
    if nxt is None:
        nxt, _ = next_prev_use(experts, n_experts)
    big = np.iinfo(np.int64).max
    cmax = max(sizes)
    slots = np.full((len(sizes), L, cmax), big, np.int64)
    for s, c in enumerate(sizes):
        slots[s, :, : cmax - c] = -1
    hits = np.zeros((len(sizes), L), np.int64)
    new = nxt.astype(np.int64) * n_experts + experts  # [T, L, k]
    for t in range(T):
        hit = (slots >= t * n_experts) & (slots < (t + 1) * n_experts)
        hits += hit.sum(axis=2)
        slots[hit] = big
        slots.sort(axis=-1)
        slots[:, :, cmax - k:] = new[t]
    return hits
