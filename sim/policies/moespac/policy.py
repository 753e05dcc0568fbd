"""MoE-SpAc as a policy: estimator -> balancer -> one utility for prefetch and eviction.

Per verify pass of layer ``l``:

* ``on_layer_start``: queued prefetches of ``l`` are stale and dropped; ``l``'s resident experts
  are pinned (score K+1).
* ``place``: resident experts run on the GPU, every other requested expert on the CPU where it
  lives (no demand fetch, as in the authors' release).
* ``on_layer_end``: the counts score the last prediction (hot/cold metrics, per-level statistics),
  the estimator moves the levels, the balancer picks ``tau_l``, the layer's resident experts are
  released with their new utility and the hot experts that are not present are queued by level.
* the link pops the queue (highest level first); an expert popped while already resident gets
  score ``max(old, level)`` and no copy; a copy needs a slot: free, or a victim whose score is
  below its own layer's ``tau`` (with a fixed tau, the authors' single threshold). If none may go,
  the entry is put back and the link waits (the authors' prefetch thread blocks the same way).

Switches (presets in ``conf/policy/moespac*.yaml``): ``estimator`` (adaptive | static | binary)
with its calibration (``u_frac0``, ``calib_gain``, ``hot_target``, ``calib_scope``,
``target_link``), ``balancer`` (False: fixed ``tau``), ``release`` (``level``: ours, a released
expert keeps its new utility so one number orders the whole cache; ``zero``: the authors' release
to 0, resident hot experts are re-queued to win their level back), ``eviction_order``
(cyclic | id), ``queue_order`` (``level``: highest level first, the authors' queue; ``fifo``: all
entries at one level, i.e. in plan order, a diagnostic), ``overlap`` (False: the executor finishes
all prefetches before it goes on), ``speculative`` (False: gamma 0), ``draft_extra_decodes``
(draft forwards per step beyond gamma: 1, as the authors' demo runs ``llama-speculative``, whose
loop decodes the target's corrected token on the draft before drafting; every ablation keeps it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.policies.base import CPU, GPU, Placement, Policy
from sim.policies.moespac.balancer import Balancer
from sim.policies.moespac.estimator import EstimatorConfig, UtilityEstimator
from sim.policies.moespac.hot_metrics import HotColdTracker
from sim.policies.moespac.level_stats import LevelStats
from sim.policies.moespac.prefetch_queue import PrefetchQueue
from sim.policies.moespac.score_cache import ScoreTree


assert GPU == 0 and CPU == 1, "place() encodes GPU/CPU as the resident mask's complement"


@dataclass(frozen=True)
class MoESpAcParams:
    """MoE-SpAc's parameters (conf/policy/moespac*.yaml): levels ``K``; the estimator (``adaptive``,
    ``static`` or ``binary``) with its up/down thresholds, initial hot fraction, calibration gain,
    hot-set target and scope (``global`` or ``layer``), and whether the link's swap capacity counts
    in the target; the prefetch queue order (``level`` or ``fifo``); the balancer (or a fixed
    ``tau``); the release rule (``level`` or ``zero``); the eviction order; the decay of the level
    statistics; overlap, speculation, and the draft's extra decodes per step."""

    K: int = 5
    estimator: str = "adaptive"
    up: int = 5
    down: int = 1
    u_frac0: float = 0.0
    calib_gain: float = 0.3
    hot_target: float = 1.0
    calib_scope: str = "global"
    target_link: bool = True
    queue_order: str = "level"
    balancer: bool = True
    tau: int = 1
    release: str = "level"
    eviction_order: str = "cyclic"
    stat_decay: float = 0.999
    overlap: bool = True
    speculative: bool = True
    draft_extra_decodes: int = 1

    def __post_init__(self):
        if self.queue_order not in ("level", "fifo"):
            raise ValueError(f"queue_order must be 'level' or 'fifo', got {self.queue_order!r}")
        if self.release not in ("level", "zero"):
            raise ValueError(f"release must be 'level' or 'zero', got {self.release!r}")
        if not 1 <= self.tau <= self.K + 1:
            raise ValueError(f"tau must lie in 1..K+1 = 1..{self.K + 1}, got {self.tau}")


class MoESpAc(Policy):
    """Speculative-utility expert offloading (MoE-SpAc) with ablation switches."""

    name = "moespac"
    speculative = True
    overlap = True

    Params = MoESpAcParams

    def __init__(self, params: MoESpAcParams = MoESpAcParams()):
        p = self.params = params
        self.K, self.estimator_mode, self.up, self.down = p.K, p.estimator, p.up, p.down
        self.u_frac0, self.calib_gain, self.hot_target = p.u_frac0, p.calib_gain, p.hot_target
        self.calib_scope, self.target_link, self.queue_order = p.calib_scope, p.target_link, p.queue_order
        self.use_balancer, self.fixed_tau, self.release = p.balancer, p.tau, p.release
        self.eviction_order, self.stat_decay = p.eviction_order, p.stat_decay
        self.overlap, self.speculative = p.overlap, p.speculative
        self.draft_extra_decodes = int(p.draft_extra_decodes)

    # --- lifecycle ----------------------------------------------------------------------------
    def reset(self, ctx, cache) -> None:
        self.ctx = ctx
        L, E, K = ctx.n_layers, ctx.n_experts, self.K
        n_max = max(1, ctx.gamma + 1)
        self.est = UtilityEstimator(L, E, EstimatorConfig(K=K, mode=self.estimator_mode, up=self.up, down=self.down,
                                    u_frac0=self.u_frac0, gain=self.calib_gain,
                                    target=1.0, n_max=n_max,
                                    scope=self.calib_scope))
        costs = ctx.costs
        W = self.est.W
        self.stats = LevelStats(K, W, n_max, costs.gpu(np.arange(W)), costs.cpu(np.arange(W)),
                                decay=self.stat_decay)
        self.bal = Balancer(L, ctx.n_slots, K, costs, None if self.use_balancer else self.fixed_tau)
        self.est.target = self._hot_target()
        self.queue = PrefetchQueue(L, E, K)
        self.tree = ScoreTree(L, E, K, order=self.eviction_order)
        self.hc = HotColdTracker(L, E)
        self.current = L - 1
        self.zeros = [0] * E
        self.levels = [[0] * E for _ in range(L)]   # the estimator's levels by layer, as lists
        self.top_k = ctx.top_k
        self.min_pop = 1 if self.use_balancer else self.fixed_tau
        self._refresh_costs()
        self._planned = self._n = None
        self.n_rescored = self.n_waits = self.n_pushed = self.n_victims = self.n_decisions = 0
        self.sum_tau = self.sum_up = self.sum_hot = 0
        for l, e in zip(*np.nonzero(cache.resident)):
            self.tree.insert(int(l), int(e), 0)

    def _hot_target(self) -> float:
        """Hot experts per layer the calibration aims at: ``hot_target`` x what the cache can serve
        per step -- its slots, plus (``target_link``) the experts the link can swap in per step."""
        ctx = self.ctx
        extra = self.bal.link_capacity() if self.target_link else 0.0
        return max(1.0, self.hot_target * (ctx.n_slots + extra) / ctx.n_layers)

    def _refresh_costs(self) -> None:
        g, c = self.stats.expected_costs()
        self.g, self.c = g.tolist(), c.tolist()

    def on_step_start(self, step, signals, cache) -> None:
        self.stats.decay_step(self.ctx.n_layers)
        if self.target_link:
            self.est.target = self._hot_target()
        self._refresh_costs()
        self._n = None

    def on_layer_start(self, layer: int, cache) -> None:
        self.queue.drop_layer(layer)
        self.tree.pin(layer)
        self.current = layer

    def place(self, layer: int, counts: np.ndarray, signals, cache) -> Placement:
        # GPU (0) where resident, CPU (1) elsewhere: the negated mask viewed as int8 is exactly that
        return Placement((~cache.resident[layer]).view(np.int8))

    def on_layer_end(self, layer: int, counts: np.ndarray, cache) -> None:
        if self._n is None:     # verified tokens of this step (the same at every layer)
            self._n = int(counts.sum()) // self.top_k
        lv = self.est.update(layer, counts, self._n)
        self.hc.score(layer, self.stats.observe(self.est.last_idx))
        present = cache.resident[layer] | cache.inflight[layer]
        tau = self.bal.decide(layer, lv, present, self.g, self.c)
        hot = lv >= tau
        self.hc.predict(layer, tau, self.bal.n_hot)
        self.tree.unpin(layer)
        self.levels[layer] = lvl = lv.tolist()
        self.tree.set_layer(layer, lvl if self.release == "level" else self.zeros, cache.resident[layer])
        # hot experts not present; with release "zero" also the resident hot ones (re-queued to win
        # their level back, the authors' release), never an expert below tau
        want = (hot if self.release == "zero" else hot > present).nonzero()[0].tolist()   # > : and not
        if want:
            lvls = [lvl[e] for e in want] if self.queue_order == "level" else [self.K] * len(want)
            self.queue.push_levels(layer, want, lvls)
            self.n_pushed += len(want)
        self.n_decisions += 1
        self.sum_tau += tau
        self.sum_up += self.est.last_up[layer]
        self.sum_hot += self.bal.n_hot

    # --- the link -----------------------------------------------------------------------------
    def next_transfer(self, cache):
        picks = self._picks(cache, 0, False)
        if not picks:
            return None
        got = picks[0]
        if got[2] is not None:
            self._planned = got
        return got[0], got[1]

    def plan_prefetches(self, cache, n_land: int):
        """:meth:`next_transfer`, :meth:`victim` and :meth:`on_transfer_done` of a whole run."""
        return self._picks(cache, n_land, True)

    def _picks(self, cache, n_land: int, planned: bool) -> list:
        """The queue's next experts that need a copy, each with the victim that makes room (None:
        a slot is free): up to ``n_land + 1``, the first ``n_land`` landed (:meth:`on_transfer_done`)
        as they are picked; fewer when the queue runs dry or nothing may go (the entry is put back).
        ``planned``: each victim is consumed at once (:meth:`_evicted`), as :meth:`victim` would.

        Residency is read from the tree, where an expert is exactly while resident (a landing
        enters it, a named victim leaves it), so a planned run's own landings and victims are seen
        before the cache applies them; a run starts no copy but its last, so the cache's
        in-flight flags stay valid throughout."""
        tree, queue = self.tree, self.queue
        rows, pop, min_pop = tree.rows, queue.pop, self.min_pop
        inflight, free = cache.inflight, cache.n_free   # this run's landings take free slots first
        picks = []
        while len(picks) <= n_land:
            popped = pop(min_pop)
            if popped is None:
                break
            l, e, lv = popped
            s = rows[l][e]
            if s >= 0:                  # resident: no copy; a higher level raises its score
                if lv > s:
                    tree.set(l, e, lv)
                    self.n_rescored += 1
                continue
            if inflight.item(l, e):
                continue
            if free > 0:
                v = None
                free -= 1
            else:
                v = self._find_victim(cache)
                if v is None:
                    queue.push_front(l, e, lv)
                    self.n_waits += 1
                    break
                if planned:
                    self._planned = None
                    self._evicted(v)
            picks.append((l, e, v))
            if len(picks) <= n_land:
                self.on_transfer_done(l, e, cache)
        return picks

    def _find_victim(self, cache):
        b = self.bal
        return self.tree.victim(b.tau, b.tau_lo, b.tau_hi, self.current, cache.pinned)

    def victim(self, layer: int, expert: int, cache, demand: bool):
        p, v = self._planned, None
        if p is not None:       # the victim next_transfer found for this very pick, still valid
            self._planned = None
            if p[0] == layer and p[1] == expert:
                vl, ve = v = p[2]
                if not cache.resident.item(vl, ve) or cache.pinned.item(vl):
                    v = None
        if v is None:
            v = self._find_victim(cache)
            if v is None:
                return None
        self._evicted(v)
        return v

    def _evicted(self, v) -> None:
        """``v`` is named as a victim: its slot leaves the index."""
        self.tree.remove(v[0], v[1])
        self.n_victims += 1

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self.tree.insert(layer, expert, self.levels[layer][expert])

    # --- results ------------------------------------------------------------------------------
    def metrics(self) -> dict:
        d = max(1, self.n_decisions)
        out = self.hc.metrics()
        out.update({
            "tau_mean": self.sum_tau / d, "up_mean": self.sum_up / d, "hot_per_layer": self.sum_hot / d,
            "spac_pushed": float(self.n_pushed), "spac_stale_dropped": float(self.queue.stale_dropped),
            "spac_rescored": float(self.n_rescored), "spac_link_waits": float(self.n_waits),
            "spac_victims": float(self.n_victims),
        })
        return out
