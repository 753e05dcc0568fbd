"""Classes of interchangeable experts for the CPU/GPU split search (:mod:`sim.policies.split`).

Two requested experts of a layer are interchangeable for :func:`sim.policies.split.split_time`
when they are both present (or both absent) and cost the same on each side: the GPU lane and the
CPU lane see only the experts' times, and demand fetches run most tokens first, so neighbouring
token counts of equal cost keep their place in the fetch order. In a memory-bound decode one
expert's time does not depend on its few tokens (the cost model's ``max(bytes / bandwidth,
flops / peak)`` is the bytes term for small ``n``), so a speculative verify window of up to 13
tokens per expert usually makes two classes (present, absent) instead of up to 26, and the
exhaustive search over class counts stays exact and small.
"""
from __future__ import annotations

import numpy as np


def split_classes(counts: np.ndarray, present: np.ndarray, costs, times=None):
    """Group requested experts by (present, tokens): present classes first, then non-present by
    tokens descending (the fetch order); then merge neighbouring classes (same presence, adjacent
    in that order) whose ``gpu(n)`` and ``cpu(n)`` are equal. Members are listed tokens descending,
    then by id. Returns ``(keys, members, signature)``: ``keys`` (present, tokens of the class's
    first member), ``signature`` (present, gpu seconds, cpu seconds) per class, what the search's
    answer depends on. ``times``: an :class:`sim.policies.split.ExpertTimes` of ``costs``."""
    req = counts.nonzero()[0]
    groups: dict[tuple[bool, int], list[int]] = {}
    get = groups.get
    for e, p, n in zip(req.tolist(), present[req].tolist(), counts[req].tolist()):
        group = get((p, n))
        if group is None:
            groups[(p, n)] = [e]
        else:
            group.append(e)
    order = sorted(groups, key=lambda k: (not k[0], -k[1]))
    ns = [k[1] for k in order]
    if times is not None:
        g, c = times.gpu(ns), times.cpu(ns)
    else:
        arr = np.array(ns, dtype=np.int64)
        g = np.asarray(costs.gpu(arr), dtype=float).tolist() if ns else []
        c = np.asarray(costs.cpu(arr), dtype=float).tolist() if ns else []
    keys: list = []
    members: list = []
    sig: list = []
    for k, gk, ck in zip(order, g, c):
        s = (k[0], gk, ck)
        if sig and sig[-1] == s:
            members[-1] += groups[k]          # the run's first list, owned here
        else:
            keys.append(k)
            members.append(groups[k])
            sig.append(s)
    return keys, members, sig
