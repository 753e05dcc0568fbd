"""Heterogeneous Workload Balancer: per layer, the utility threshold tau that splits hot from cold.

For layer ``l`` and ``tau`` in ``1..K+1`` the hot set is ``H(tau) = {e : s_e >= tau}`` (prefetched
and computed on the GPU); the rest is computed on the CPU where it lives. With ``N_s`` experts at
level ``s`` and the learned expected seconds ``g_s`` (GPU) and ``c_s`` (CPU) of one expert at level
``s`` (:class:`LevelStats`)::

    T_gpu(tau) = sum_{s >= tau} N_s g_s        T_cpu(tau) = sum_{s < tau} N_s c_s
    minimise max(T_gpu, T_cpu)   s.t.  |H(tau)| <= cap,  |H(tau) \\ present| <= budget

As tau falls T_gpu rises and T_cpu falls, so the objective decreases until the two cross and
rises after; |H| and the transfers needed rise, so the feasible taus are ``tau >= tau_min``.
:func:`choose_tau` therefore walks down from ``K+1`` (always feasible: nothing hot) and stops at
the first infeasible tau or the first strict increase: O(K) after one O(E) histogram. Ties go to
the larger tau (fewer transfers). :func:`choose_tau_brute` evaluates every tau expert by expert;
the tests compare the two on thousands of random instances.

Capacities (:class:`Balancer`, documented choices of ours):

* slots: ``cap_l = max(fair, n_slots - sum_{m != l} hot_m)`` -- every layer may always claim its
  fair share ``n_slots / L`` and may borrow what the other layers' latest plans leave unused; a
  borrower gives the slots back at its next decision once the others claim them.
* PCIe: a plan for layer ``l`` is made at the end of its pass and must land before its next pass:
  the rest of this verify pass, the next draft phase and the verify layers before ``l`` -- one step
  less one layer. The link is shared, so the budget is that window's transfers minus the
  transfers the other layers' latest plans still need: ``budget_l = (draft + (L-1) t_layer) /
  transfer_s - sum_{m != l} need_m``. The layer times are the balancer's own estimates
  (``layer_fixed + max(T_gpu, T_cpu)`` of each layer's plan): no clock is read.
"""
from __future__ import annotations

import numpy as np


def choose_tau(n_at: list, miss_at: list, g: list, c: list, cap: float, budget: float) -> tuple:
    """O(K) monotone search. Per level ``s`` (lists of length K+1): experts ``n_at[s]``, of which
    not present ``miss_at[s]``, expected GPU/CPU seconds per expert ``g[s]``, ``c[s]``.
    Returns ``(tau, T_gpu, T_cpu)``."""
    K = len(n_at) - 1
    t_gpu, t_cpu = 0.0, 0.0
    for s in range(K + 1):
        t_cpu += n_at[s] * c[s]
    best = (K + 1, t_gpu, t_cpu)
    best_f = t_cpu
    hot = miss = 0
    for tau in range(K, 0, -1):
        hot += n_at[tau]
        miss += miss_at[tau]
        if hot > cap or miss > budget:
            break
        t_gpu += n_at[tau] * g[tau]
        t_cpu -= n_at[tau] * c[tau]
        f = t_gpu if t_gpu > t_cpu else t_cpu
        if f < best_f:
            best, best_f = (tau, t_gpu, max(t_cpu, 0.0)), f
        elif f > best_f:
            break
    return best


def choose_tau_brute(levels: np.ndarray, present: np.ndarray, g: np.ndarray, c: np.ndarray,
                     cap: float, budget: float, K: int) -> tuple:
    """Reference: evaluate every tau expert by expert; same tie rule (larger tau wins)."""
    best, best_f = None, np.inf
    for tau in range(K + 1, 0, -1):
        hot = levels >= tau
        if hot.sum() > cap or (hot & ~present).sum() > budget:
            continue
        t_gpu = float(g[levels[hot]].sum())
        t_cpu = float(c[levels[~hot]].sum())
        f = max(t_gpu, t_cpu)
        if f < best_f * (1 - 1e-12) - 1e-18:
            best, best_f = (tau, t_gpu, t_cpu), f
    return best


class Balancer:
    """Per-layer tau with the slot and PCIe capacities above (``static_tau``: a fixed threshold)."""

    def __init__(self, n_layers: int, n_slots: int, K: int, costs, static_tau: int | None = None):
        self.L, self.K, self.n_slots = n_layers, K, n_slots
        self.static_tau = static_tau
        self.fair = n_slots / n_layers
        self.transfer_s = float(costs.transfer_s)
        self.draft_s, self.fixed_s = float(costs.draft_phase_s), float(costs.layer_fixed_s)
        self.tau = np.full(n_layers, static_tau or K + 1, dtype=np.int64)
        self.hot = np.zeros(n_layers, dtype=np.int64)
        self.need = np.zeros(n_layers, dtype=np.int64)
        self.t_layer = np.full(n_layers, self.fixed_s)
        self.hot_sum = self.need_sum = 0
        self.t_sum = float(self.t_layer.sum())

    def link_capacity(self) -> float:
        """Transfers that fit in one step less one layer (the window of a plan)."""
        window = self.draft_s + self.t_sum * (self.L - 1) / self.L
        return window / self.transfer_s if self.transfer_s > 0 else float("inf")

    def decide(self, layer: int, levels: np.ndarray, present: np.ndarray, g: np.ndarray,
               c: np.ndarray) -> int:
        """Choose tau for ``layer``'s next pass; records the plan's hot set, need and time."""
        m = self.K + 1
        n_at = np.bincount(levels, minlength=m)
        miss_at = np.bincount(levels, weights=~present, minlength=m)
        if self.static_tau is not None:
            tau = self.static_tau
            t_gpu = float(n_at[tau:] @ g[tau:])
            t_cpu = float(n_at[:tau] @ c[:tau])
        else:
            cap = max(self.fair, self.n_slots - (self.hot_sum - self.hot[layer]))
            budget = self.link_capacity() - (self.need_sum - self.need[layer])
            tau, t_gpu, t_cpu = choose_tau(n_at.tolist(), miss_at.tolist(), g.tolist(), c.tolist(),
                                           cap, budget)
        hot, need = int(n_at[tau:].sum()), int(miss_at[tau:].sum())
        self.hot_sum += hot - self.hot[layer]
        self.need_sum += need - self.need[layer]
        t = self.fixed_s + max(t_gpu, t_cpu)
        self.t_sum += t - self.t_layer[layer]
        self.hot[layer], self.need[layer], self.t_layer[layer], self.tau[layer] = hot, need, t, tau
        return tau
