"""The fastest any policy could decode a schedule: a linear-programming relaxation (lower bound on time).

Every policy of this protocol, on a given schedule and machine, pays the same fixed time (draft
decodes, per-step and per-layer fixed parts: :class:`sim.machine.cost_model.CostModel`, exactly as the
engine charges them) plus, at each (step, layer) position ``p``, an expert phase no shorter than
``max(GPU work, CPU work)`` (+ the join when the CPU works). What a policy chooses is where each
requested expert runs and what the slots hold; its options are limited by the slots (``N``) and
by the link (one copy engine). The LP keeps exactly those limits and relaxes the rest:

* per use ``j`` of an expert (its k-th request): ``gpu_j`` (computed on the GPU), ``r_j``
  (resident when used), ``keep_j`` (held in a slot since its previous use, or since the start:
  the free initial load), ``fetch_j`` (copied into a slot before the use), ``stream_j`` (read by
  the GPU over the link, no slot), all in [0, 1]; ``gpu <= r + stream``, ``r <= keep + fetch``,
  ``keep_j <= r_{j-1}``;
* slots: at every position, experts held between two uses plus those used there fit in ``N``
  (an expert held for later occupies its slot the whole time in between);
* link: the ``k``-th transfer cannot land before ``k * tau`` (``tau`` = bytes / bandwidth, the
  cheapest per-expert time, a block copy's), and a transfer for a use at ``p`` lands before
  ``p``'s expert phase ends: ``tau * (transfers for uses <= p) <= time at the end of p``;
* the expert phase: ``E_p >= sum gpu_j g(n_j) + sync z_p``, ``E_p >= sum (1 - gpu_j) c(n_j) +
  sync z_p``, ``z_p >= 1 - gpu_j``, and ``E_p >= gpu_j g(n_j) + (1 - gpu_j) (c(n_j) + sync)`` (an
  expert runs whole on one side: without it the LP would split one expert across both).

Any run of the engine gives a feasible point (its integer decisions), so the LP optimum is a lower
bound on every policy's decode time; what it leaves out (transfers can only start after a slot is
free, a fetch landing before the GPU computes it, prefetches occupying slots before use, the
order of work) only makes real runs slower. Solved by HiGHS (``scipy.optimize.linprog``); with
``integer=True`` the same model is a MILP (``scipy.optimize.milp``), still a bound, for tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from sim.machine.cost_model import GB, CostModel

N_USE_VARS = 5  # gpu, r, keep, fetch, stream


@dataclass(frozen=True)
class Bound:
    """The bound of one schedule: fixed time, least expert time, tokens, and the resulting TPS."""

    fixed_s: float
    expert_s: float
    tokens: int
    status: str

    @property
    def decode_s(self) -> float:
        return self.fixed_s + self.expert_s

    @property
    def tps(self) -> float:
        return self.tokens / self.decode_s


def fixed_times(cost: CostModel, sched, context0: int, extra_decodes: int = 0) -> np.ndarray:
    """Per position ``p = s * L + l``: fixed time charged before its expert phase (the engine's)."""
    L = sched.counts.shape[1]
    out = np.zeros(sched.n_steps * L)
    context = context0
    for s in range(sched.n_steps):
        n = int(sched.n_verify[s])
        d = sched.draft_decodes(s) if sched.gamma > 0 else 0
        head = (d + extra_decodes * (d > 0)) * cost.draft_token_s(context) + cost.step_fixed_s(n)
        out[s * L:(s + 1) * L] = cost.layer_fixed_s(n, context)
        out[s * L] += head
        context += int(sched.produced[s])
    return out


def _uses(counts: np.ndarray):
    """Uses in position order: position, key (layer * E + expert), tokens, previous use (-1)."""
    S, L, E = counts.shape
    s, l, e = np.nonzero(counts)
    pos = s * L + l
    order = np.argsort(pos, kind="stable")
    pos, key, n = pos[order], (l * E + e)[order], counts[s, l, e][order].astype(int)
    prev = np.full(len(pos), -1)
    last: dict[int, int] = {}
    for j, k in enumerate(key.tolist()):
        prev[j] = last.get(k, -1)
        last[k] = j
    return pos, key, n, prev


def decode_bound(cost: CostModel, sched, n_slots: int, context0: int = 256, integer: bool = False,
                 time_limit: float = 600.0) -> Bound:
    """The LP (or MILP) lower bound on the decode time of ``sched`` with ``n_slots`` slots."""
    S, L = sched.n_steps, sched.counts.shape[1]
    counts = sched.counts[:S]
    P = S * L
    fixed = fixed_times(cost, sched, context0)
    pos, key, n, prev = _uses(counts)
    U = len(pos)
    g_tab, c_tab = cost.gpu_expert_table(), cost.cpu_expert_table()
    g, c = g_tab[n], c_tab[n]
    tau = (cost.transfer_s() if cost.hw.tables and "transfer_us" in cost.hw.tables
           else cost.expert_bytes / (cost.hw.pcie_h2d_gbs * GB))
    sync = cost.layer_sync_s()
    # variable blocks: uses (5 each), then per position E, z, o, F, T
    iu = lambda k: np.arange(U) * N_USE_VARS + k  # noqa: E731
    GPU_, R_, KEEP_, FETCH_, STREAM_ = (iu(k) for k in range(5))
    base = U * N_USE_VARS
    EP, ZP, OP, FP, TP = (base + k * P + np.arange(P) for k in range(5))
    nvar = base + 5 * P
    rows, cols, vals, rhs = [], [], [], []
    eq_rows, eq_cols, eq_vals, eq_rhs = [], [], [], []

    def add(cset, coefs, b, eq=False):
        """Rows given as a list of column arrays with coefficient arrays (all the same length m)."""
        m = len(np.atleast_1d(b))
        r = np.arange(m)
        R, C, V, B = (eq_rows, eq_cols, eq_vals, eq_rhs) if eq else (rows, cols, vals, rhs)
        off = sum(len(x) for x in B)
        for cc, vv in zip(cset, coefs):
            R.append(off + r)
            C.append(np.asarray(cc))
            V.append(np.broadcast_to(np.asarray(vv, dtype=float), (m,)))
        B.append(np.broadcast_to(np.asarray(b, dtype=float), (m,)))

    one = np.ones(U)
    add([GPU_, R_, STREAM_], [1, -1, -1], np.zeros(U))
    add([R_, KEEP_, FETCH_], [1, -1, -1], np.zeros(U))
    has = prev >= 0
    add([KEEP_[has], R_[prev[has]]], [1, -1], np.zeros(int(has.sum())))
    # expert phase per position
    A_pos = sp.csr_matrix((np.ones(U), (pos, np.arange(U))), shape=(P, U))
    gsum = sp.csr_matrix((g, (pos, GPU_)), shape=(P, nvar))
    csum = sp.csr_matrix((-c, (pos, GPU_)), shape=(P, nvar))
    ide = lambda idx, v=1.0: sp.csr_matrix((np.full(P, v), (np.arange(P), idx)), shape=(P, nvar))  # noqa: E731
    c_tot = np.asarray(A_pos @ c).ravel()
    blocks_ub = [gsum + ide(ZP, sync) - ide(EP), csum + ide(ZP, sync) - ide(EP)]
    b_ub_extra = [np.zeros(P), -c_tot]
    add([GPU_, ZP[pos]], [-1, -1], -one)
    # no expert is split between the devices: the phase lasts at least that expert's own time
    add([GPU_, EP[pos]], [g - c - sync, -1], -(c + sync))
    # slots: o_p + sum r_j (uses at p) <= N
    rsum = sp.csr_matrix((np.ones(U), (pos, R_)), shape=(P, nvar))
    blocks_ub.append(rsum + ide(OP))
    b_ub_extra.append(np.full(P, float(n_slots)))
    # link: tau F_p - T_p <= fixed time up to p (cumulative, including p's own fixed part)
    blocks_ub.append(ide(FP, tau) - ide(TP))
    b_ub_extra.append(np.cumsum(fixed))
    # initial load fits
    first = ~has
    init_row = sp.csr_matrix((np.ones(int(first.sum())), (np.zeros(int(first.sum()), dtype=int), KEEP_[first])),
                             shape=(1, nvar))
    blocks_ub.append(init_row)
    b_ub_extra.append(np.array([float(n_slots)]))
    # equalities: occupancy of held intervals, cumulative transfers and time
    start = np.where(has, pos[np.maximum(prev, 0)], -1)       # interval (start, pos) held by keep_j
    inner = pos - start > 1
    d_rows = np.concatenate([start[inner] + 1, pos[inner]])
    d_cols = np.concatenate([KEEP_[inner], KEEP_[inner]])
    d_vals = np.concatenate([-np.ones(int(inner.sum())), np.ones(int(inner.sum()))])
    occ = sp.csr_matrix((d_vals, (d_rows, d_cols)), shape=(P, nvar)) + _diff(OP, P, nvar)
    fsum = sp.csr_matrix((-np.ones(2 * U), (np.concatenate([pos, pos]), np.concatenate([FETCH_, STREAM_]))),
                         shape=(P, nvar)) + _diff(FP, P, nvar)
    tsum = _diff(TP, P, nvar) - ide(EP)
    A_ub = sp.vstack([_coo(rows, cols, vals, nvar)] + blocks_ub).tocsr()
    b_ub = np.concatenate([np.concatenate(rhs) if rhs else np.zeros(0)] + b_ub_extra)
    A_eq = sp.vstack([occ, fsum, tsum]).tocsr()
    b_eq = np.zeros(3 * P)
    obj = np.zeros(nvar)
    obj[EP] = 1.0
    lo, hi = np.zeros(nvar), np.ones(nvar)
    hi[base:] = np.inf
    if integer:
        integrality = np.zeros(nvar)
        integrality[:base] = 1
        res = milp(obj, constraints=[LinearConstraint(A_ub, -np.inf, b_ub), LinearConstraint(A_eq, b_eq, b_eq)],
                   integrality=integrality, bounds=Bounds(lo, hi), options={"time_limit": time_limit})
        value, status = (res.fun if res.x is not None else np.nan), str(res.message)
    else:
        res = linprog(obj, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=np.c_[lo, hi], method="highs",
                      options={"time_limit": time_limit})
        value, status = res.fun, res.message
        if res.status != 0:
            raise RuntimeError(f"bound LP failed: {res.message}")
    return Bound(float(fixed.sum()), float(value), int(np.sum(sched.produced[:S])), status)


def _diff(idx: np.ndarray, P: int, nvar: int):
    """Rows ``x[idx[p]] - x[idx[p-1]]`` (``x[idx[-1]] = 0``)."""
    r = np.concatenate([np.arange(P), np.arange(1, P)])
    c = np.concatenate([idx, idx[:-1]])
    v = np.concatenate([np.ones(P), -np.ones(P - 1)])
    return sp.csr_matrix((v, (r, c)), shape=(P, nvar))


def _coo(rows, cols, vals, nvar):
    if not rows:
        return sp.csr_matrix((0, nvar))
    r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    return sp.csr_matrix((v, (r, c)), shape=(int(r.max()) + 1, nvar))
