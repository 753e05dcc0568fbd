"""CPU/GPU split of one layer's requested experts (exact min-max search, HybriMoE's greedy).

Time model (the same for every policy that uses it, from :class:`sim.machine.cost_table.CostTable`):

* CPU lane: the CPU runs its experts one after another: ``T_cpu = sum cpu(n_i)``.
* GPU lane: experts already present (resident or in flight) run first, back to back; the
  non-present ones assigned to the GPU are demand-fetched one after another over the link (fetch
  order: most tokens first, then expert id) and each runs once it has landed and the GPU is free:
  ``t <- max(t, j * transfer_s) + gpu(n_j)`` for the j-th fetch.
* The layer's expert phase lasts ``max(T_cpu, T_gpu)`` (the fixed attention part is common to all
  splits and left out). The first fetch can start after ``link_wait_s`` (0: the link is idle; a
  caller that sees a prefetch in flight may pass an estimate of its remaining time).
* The executor fetches in request (expert id) order rather than by tokens; with equal transfer
  times this changes only which GPU time ends the lane (a few microseconds).
"""
from __future__ import annotations

import numpy as np

from sim.machine.cost_table import CostTable
from sim.policies.split_classes import split_classes
from sim.policies.split_times import ExpertTimes, two_ended

__all__ = ["DEFAULT_CAP", "ExpertTimes", "best_split", "best_split_phase", "fetch_order", "gpu_lane",
           "split_time", "two_ended"]

DEFAULT_CAP = 4096  # largest number of class-count vectors searched exhaustively


def gpu_lane(resident_s: float, fetched_gpu_s, transfer_s: float, link_wait_s: float = 0.0) -> float:
    """Finish time of the GPU lane: present experts first, then fetched ones as they land."""
    t = resident_s
    for j, g in enumerate(fetched_gpu_s, start=1):
        t = max(t, link_wait_s + j * transfer_s) + g
    return t


def fetch_order(experts, counts) -> list[int]:
    """Order of demand fetches assumed by the time model: most tokens first, then expert id."""
    return sorted((int(e) for e in experts), key=lambda e: (-int(counts[e]), e))


def split_time(counts: np.ndarray, on_gpu: np.ndarray, present: np.ndarray, costs: CostTable,
               link_wait_s: float = 0.0, times: ExpertTimes | None = None) -> float:
    """Estimated expert time of one layer for a given assignment (see the module docstring).
    ``times``: the same costs as an :class:`ExpertTimes` (the same sums, without a numpy call per
    expert)."""
    counts = np.asarray(counts)
    req = np.flatnonzero(counts > 0)
    if times is not None:
        return _split_time_listed(req.tolist(), counts[req].tolist(), np.asarray(on_gpu)[req].tolist(),
                                  np.asarray(present)[req].tolist(), times, costs.transfer_s, link_wait_s)
    cpu = sum(float(costs.cpu(counts[e])) for e in req if not on_gpu[e])
    res = sum(float(costs.gpu(counts[e])) for e in req if on_gpu[e] and present[e])
    fetched = fetch_order([e for e in req if on_gpu[e] and not present[e]], counts)
    gpu = gpu_lane(res, [float(costs.gpu(counts[e])) for e in fetched], costs.transfer_s, link_wait_s)
    return max(cpu, gpu)


def _split_time_listed(ids, ns, on_gpu, present, times: ExpertTimes, tau: float, wait: float) -> float:
    """:func:`split_time` over plain lists (the requested experts in id order)."""
    g, c = times.gpu(ns), times.cpu(ns)
    cpu = sum(c[i] for i, o in enumerate(on_gpu) if not o)
    res = sum(g[i] for i, o in enumerate(on_gpu) if o and present[i])
    fetched = sorted((i for i, o in enumerate(on_gpu) if o and not present[i]), key=lambda i: (-ns[i], ids[i]))
    return max(cpu, gpu_lane(res, [g[i] for i in fetched], tau, wait))


def _class_costs(keys, costs: CostTable, times: ExpertTimes | None = None):
    """Per class: present flags, GPU and CPU time of one expert, and the non-present classes."""
    pres = np.array([k[0] for k in keys], dtype=bool)
    if times is not None:
        ns = [k[1] for k in keys]
        g, c = np.array(times.gpu(ns), dtype=float), np.array(times.cpu(ns), dtype=float)
    else:
        n = np.array([k[1] for k in keys])
        g = np.asarray(costs.gpu(n), dtype=float)
        c = np.asarray(costs.cpu(n), dtype=float)
    return pres, g, c, (~pres).nonzero()[0].tolist()


def _evaluate(X: np.ndarray, keys, sizes: np.ndarray, costs: CostTable, max_fetch: float, wait: float,
              class_costs=None):
    """Objective and fetch count of every class-count vector (rows of X).

    Within a block of ``x`` equal fetches (GPU time ``g``) after ``j0`` earlier ones, the lane
    recursion ``t <- max(t, wait + j * tau) + g`` is linear in ``j``, so its maximum sits at the
    block's first or last fetch: ``max(t + x g, wait + (j0+1) tau + x g, wait + (j0+x) tau + g)``.
    ``class_costs``: :func:`_class_costs` of ``keys`` when the caller already has it.
    """
    pres, g, c, fetched = class_costs if class_costs is not None else _class_costs(keys, costs)
    tau = costs.transfer_s
    cpu = ((sizes - X) * c).sum(axis=1)
    t = (X[:, pres] * g[pres]).sum(axis=1).astype(float)
    if not fetched:
        return np.maximum(cpu, t) if 0 <= max_fetch else np.full(len(X), np.inf), np.zeros(len(X))
    # Every block's terms at once (the same elementwise operations as block by block), then the
    # recursion over blocks in order. j0: fetches before each block (exact integers as floats).
    Xf = X[:, fetched]
    gf = g[fetched]
    j0 = np.zeros((len(X), len(fetched)))
    np.cumsum(Xf[:, :-1], axis=1, out=j0[:, 1:])
    xg = Xf * gf
    first = wait + (j0 + 1) * tau + xg
    last = wait + (j0 + Xf) * tau + gf
    # A block with no fetch leaves t as it is: t + 0.0 == t and max(t, -inf) == t (t >= 0).
    reach = np.where(Xf > 0, np.maximum(first, last), -np.inf)
    for b in range(len(fetched)):
        t = np.maximum(t + xg[:, b], reach[:, b])
    total = j0[:, -1] + Xf[:, -1]
    obj = np.maximum(cpu, t)
    obj = np.where(total <= max_fetch, obj, np.inf)
    return obj, total


def _best_row(X, keys, sizes, costs, max_fetch, wait, class_costs=None):
    obj, fetches = _evaluate(X, keys, sizes, costs, max_fetch, wait, class_costs)
    i = int(np.lexsort((fetches, obj))[0])
    return X[i], float(obj[i])


def best_split(counts: np.ndarray, present: np.ndarray, costs: CostTable,
               max_fetch: int | None = None, cap: int = DEFAULT_CAP, link_wait_s: float = 0.0,
               memo: dict | None = None, times: ExpertTimes | None = None) -> np.ndarray:
    """The GPU/CPU assignment of one layer minimising :func:`split_time`; ``[E]`` bool, True = GPU.

    Experts with equal (present, tokens), or neighbouring token counts of equal cost
    (:func:`sim.policies.split_classes.split_classes`), are interchangeable, so the search runs over how many of
    each class go to the GPU: exhaustive (hence exact, equal to trying all 2^k assignments) when
    there are at most ``cap`` such vectors, which always holds in AR decoding (two classes);
    beyond that, a steepest-descent local search from "present on GPU, the rest on CPU" and from
    HybriMoE's greedy answer (a local optimum, not guaranteed exact). At most ``max_fetch``
    non-present experts go to the GPU (None: no limit). Ties prefer fewer fetches. ``link_wait_s``
    delays the first fetch (see the module docstring).

    ``memo``: a dict the caller keeps for one cost table (e.g. per policy run). The answer depends
    only on the classes, their sizes, ``min(max_fetch, non-present experts)``, ``cap`` and
    ``link_wait_s``, so a repeated layer shape reuses the class-count vector found before.
    ``times``: the same costs as an :class:`ExpertTimes` (faster for a caller that keeps one).
    """
    return _solve(counts, present, costs, (max_fetch, link_wait_s), cap, memo, times)[0]


def best_split_phase(counts: np.ndarray, present: np.ndarray, costs: CostTable, max_fetch: int | None = None,
                     link_wait_s: float = 0.0, memo: dict | None = None, times: ExpertTimes | None = None):
    """:func:`best_split` and the :func:`split_time` of its answer (``present`` taken as landed),
    from the same classes: ``(on_gpu, seconds)``. The time is summed per class rather than per
    expert (equal up to float rounding)."""
    on_gpu, best, sig, members = _solve(counts, present, costs, (max_fetch, link_wait_s), DEFAULT_CAP, memo, times)
    cpu = res = 0.0
    fetched: list[float] = []
    for x, (p, g, c), group in zip(best, sig, members):
        cpu += (len(group) - x) * c
        if p:
            res += x * g
        elif x:
            fetched += [g] * x
    return on_gpu, max(cpu, gpu_lane(res, fetched, costs.transfer_s, link_wait_s))


def _solve(counts, present, costs: CostTable, budget: tuple, cap: int, memo, times):
    """:func:`best_split`'s search; ``budget`` ``(max_fetch, link_wait_s)``. Returns (on_gpu, class
    vector, class signatures, class members)."""
    max_fetch, link_wait_s = budget
    counts = np.asarray(counts)
    present = np.asarray(present, dtype=bool)
    on_gpu = np.zeros(len(counts), dtype=bool)
    keys, members, sig = split_classes(counts, present, costs, times)
    if not keys:
        return on_gpu, [], sig, members
    limit = np.inf if max_fetch is None else max_fetch
    lens = tuple(len(m) for m in members)
    key = None
    if memo is not None:
        absent = sum(n for k, n in zip(keys, lens) if not k[0])
        key = (tuple(sig), lens, min(limit, absent), float(link_wait_s), cap)
        best = memo.get(key)
        if best is not None:
            _mark(on_gpu, best, members)
            return on_gpu, best, sig, members
    sizes = np.array(lens)
    if np.prod(sizes + 1, dtype=float) <= cap:
        X = np.indices(tuple(sizes + 1)).reshape(len(sizes), -1).T
        best, _ = _best_row(X, keys, sizes, costs, limit, link_wait_s)
    else:
        best = _local_search(counts, present, costs, (keys, members, sizes), (limit, link_wait_s), times)
    best = [int(x) for x in best]
    if key is not None:
        memo[key] = best
    _mark(on_gpu, best, members)
    return on_gpu, best, sig, members


def _mark(on_gpu: np.ndarray, best: list[int], members: list[list[int]]) -> None:
    """Set the first ``best[i]`` experts of every class ``i`` on the GPU."""
    for x, group in zip(best, members):
        if x:
            on_gpu[group[:x]] = True


def _local_search(counts, present, costs, classes: tuple, budget: tuple, times=None):
    """Steepest descent over class-count vectors (moves of +-1 in one class); ``classes`` is
    ``(keys, members, sizes)`` of :func:`_classes`, ``budget`` ``(max fetches, link wait seconds)``."""
    (keys, members, sizes), (limit, wait) = classes, budget
    cc = _class_costs(keys, costs, times)
    pres = cc[0]
    greedy = two_ended(counts, present, costs, times)
    on = greedy.tolist()
    starts = np.array([np.where(pres, sizes, 0),
                       [sum(map(on.__getitem__, m)) for m in members]])
    best, best_obj = _best_row(starts, keys, sizes, costs, limit, wait, cc)
    eye = np.eye(len(sizes), dtype=int)
    while True:
        cand = np.vstack([best + eye, best - eye])
        cand = cand[((cand >= 0) & (cand <= sizes)).all(axis=1)]
        row, obj = _best_row(cand, keys, sizes, costs, limit, wait, cc)
        if not obj < best_obj:
            return best
        best, best_obj = row, obj
