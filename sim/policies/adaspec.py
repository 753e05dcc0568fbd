"""AdaSpec (ours): speculate only as far as it pays, one utility cache, misses where cheapest.

Per step, before drafting, the policy picks how many tokens to draft (``choose_gamma``, 0..12)
by hill climbing on tokens per second: each draft length ``g`` in ``arms`` keeps a decayed
estimate of produced tokens over the *cost-model* time of its steps (draft decodes, the per-step
and per-layer fixed parts of a forward of ``g + 1`` tokens, each layer's expert phase as :func:`sim.policies.split.split_time` of
what was placed, experts still in flight counted as absent: no clock is read). Decoding starts
autoregressive (``g = 0``, the safe choice) for ``warmup`` steps; then the next longer arm is
tried for ``probe`` steps, kept while it is faster and abandoned as soon as it is slower (tokens
per second is unimodal in ``g``); ``explore_every`` steps after a climb stops the neighbours of the
current arm are probed again, twice as late after each probe that did not pay (at most
``2 ** max_backoff`` times: where speculation does not pay, probing it is a cost, and the policy
settles on the best autoregressive behaviour; acceptance and the cache drift, so it never stops
probing). ``g = 0`` is plain autoregressive decoding.

Cache: one score per (layer, expert), ``S <- decay * S + c`` each time the layer runs, with ``c``
the verified tokens that chose the expert. While speculating these are MoE-SpAc's verify-window
counts (a window of ``g + 1`` tokens scores the experts the coming tokens need); in AR decoding
``c`` is 0/1 and the score is a recency/frequency score (as HybriMoE's). After a layer runs its
highest-scoring absent experts are queued for prefetch (for that layer's next pass, as MoE-SpAc);
an eviction takes the lowest score outside the computing layer, and a prefetch only evicts a
lower score than it brings. Placement is the exact per-layer CPU/GPU split (the min-max search,
:func:`sim.policies.split.best_split`): a miss is fetched only when that finishes the layer sooner
than computing it on the CPU. The slots start with the most popular experts of an offline profile
(``warm_start``, as Fiddler and kTransformers place theirs), then follow the utility. Lossless: it
changes where experts run, never the tokens.

Parameters:
    gamma_max: largest draft length (default 12). arms: candidate draft lengths (default
        0, 1, 2, 3, 4, 6, 8, 12). rate_decay: weight kept by an arm's past per measured step
        (default 0.6). warmup / probe / explore_every: steps before the first probe (16), steps per
        probe (3), steps between probes of the neighbours (32, doubled after each failed probe up to
        ``2 ** max_backoff`` times, default 4). decay: score decay per pass while
        speculating (0.8). decay_ar: score decay per pass in autoregressive steps (0.5, HybriMoE's
        ``KScoreAwareCache(alpha=0.5)``: a recency score, as the best AR cache uses).
        swap_margin: a prefetch evicts only a score lower by this much (0.5). next_layer: also
            queue the next layer's top scores during this one (HybriMoE's prefetch; default off,
            within 0.5% on the paper's machine). sync_us: the CPU/GPU
            join per layer the estimate charges when the CPU works (30, as the machine presets).
        prefetch_per_layer: prefetches queued per layer pass (default top_k). warm_start: fill the
            slots from the offline profile before decoding (default true).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, gpu_where, present_row
from sim.policies.prefetch_queue import PrefetchQueue
from sim.policies.priority_rows import RowExtremes
from sim.policies.split import ExpertTimes, best_split, best_split_phase, split_time
from sim.policies.static_sets import most_popular


@dataclass(frozen=True)
class AdaSpecParams:
    """AdaSpec's parameters (conf/policy/adaspec.yaml; the module docstring says what each does)."""

    gamma_max: int = 12
    arms: tuple = (0, 1, 2, 3, 4, 6, 8, 12)
    rate_decay: float = 0.6
    warmup: int = 16
    probe: int = 3
    explore_every: int = 32
    decay: float = 0.8
    decay_ar: float = 0.5
    max_backoff: int = 4
    swap_margin: float = 0.5
    prefetch_per_layer: int | None = None
    sync_us: float = 30.0
    next_layer: bool = False
    warm_start: bool = True


class AdaSpec(OffloadPolicy):
    """Per-step draft length from the cost model and observed acceptance; utility cache; best split."""

    speculative = True
    adaptive_gamma = True
    needs_profile = True

    Params = AdaSpecParams

    def __init__(self, params: AdaSpecParams = AdaSpecParams()):
        p = self.params = params
        self.gamma_max = int(p.gamma_max)
        self.arms = sorted({int(a) for a in p.arms if 0 <= int(a) <= self.gamma_max})
        if not self.arms:
            raise ValueError(f"arms must hold values in 0..gamma_max={p.gamma_max}, got {p.arms}")
        self.rate_decay, self.warmup, self.probe, self.explore_every = p.rate_decay, p.warmup, p.probe, p.explore_every
        self.decay, self.decay_ar, self.max_backoff = p.decay, p.decay_ar, int(p.max_backoff)
        self.swap_margin, self.prefetch_per_layer = p.swap_margin, p.prefetch_per_layer
        self.sync_us, self.next_layer, self.warm_start = p.sync_us, p.next_layer, p.warm_start

    def run_gamma(self, gamma: int) -> int:
        """Runs are set up for the largest draft length (each step chooses its own)."""
        return self.gamma_max

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self.arms_ok = [a for a in self.arms if a <= ctx.gamma] or [0]
        self.score = np.zeros((ctx.n_layers, ctx.n_experts))
        self._rows = RowExtremes(ctx.n_layers, candidates=False)   # the victim search, row by row
        self.queue = PrefetchQueue()
        self.times = ExpertTimes(ctx.costs)
        self.memo: dict = {}
        self.tok = {a: 0.0 for a in self.arms_ok}
        self.sec = {a: 0.0 for a in self.arms_ok}
        self.last = {a: -1 for a in self.arms_ok}
        self.draft_s = ctx.costs.draft_phase_s / ctx.gamma if ctx.gamma else 0.0
        self.k_pf = ctx.top_k if self.prefetch_per_layer is None else int(self.prefetch_per_layer)
        self.g = self.best = self.arms_ok[0]
        self.trying, self.left = None, 0
        self.fails, self.next_probe = 0, self.warmup
        self.step_s = 0.0
        self.current = 0
        self.gammas: list[int] = []
        self.sync_s = self.sync_us * 1e-6

    def initial_residency(self):
        c = self.ctx
        if not self.warm_start or c.profile is None:
            return []
        return most_popular(c.profile, c.n_layers, c.n_experts, c.n_slots, c.seed)

    # --- how far to speculate -------------------------------------------------------------------
    def _rate(self, a: int) -> float:
        return self.tok[a] / self.sec[a] if self.sec[a] > 0 else 0.0

    def best_rate(self) -> float:
        """The highest decayed tokens per second (cost-model time) measured for any draft length."""
        return max((self._rate(a) for a in self.arms_ok), default=0.0)

    def choose_gamma(self, step: int) -> int:
        arms, i = self.arms_ok, self.arms_ok.index(self.best)
        if self.left > 0:                       # a probe in progress
            self.left -= 1
        elif self.trying is not None:           # a probe ended: keep it if faster, climb on
            if self._rate(self.trying) > self._rate(self.best):
                self.best, self.fails = self.trying, 0
                i = arms.index(self.best)
                self.trying = self._probe(arms[i + 1] if i + 1 < len(arms) and arms[i + 1] > self.best else None)
            else:
                self.trying, self.fails = None, self.fails + 1
            if self.trying is None:             # the climb stopped: probe again later, less often after failures
                self.next_probe = step + self.explore_every * 2 ** min(self.fails, self.max_backoff)
        elif step >= self.next_probe:
            up = arms[i + 1] if i + 1 < len(arms) else None
            down = arms[i - 1] if i > 0 else None
            pick = up if up is not None and (down is None or self.last[up] <= self.last[down]) else down
            self.trying = self._probe(pick)
        self.g = self.trying if self.trying is not None else self.best
        self.gammas.append(self.g)
        return self.g

    def _probe(self, arm):
        if arm is not None:
            self.left = self.probe - 1
        return arm

    def on_step_start(self, step: int, signals: Signals, cache) -> None:
        c = self.ctx.costs
        self.step_s = self.g * self.draft_s + c.step_fixed(self.g + 1)

    def on_step_end(self, step: int, n_verified: int, accepted: int) -> None:
        a, k = self.g, self.rate_decay
        self.tok[a] = k * self.tok[a] + (accepted + 1)
        self.sec[a] = k * self.sec[a] + self.step_s
        self.last[a] = step

    # --- the cache ------------------------------------------------------------------------------
    def on_layer_start(self, layer: int, cache) -> None:
        self.current = layer
        self.queue.drop_layer(layer)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        present = present_row(cache, layer)
        landed = cache.resident[layer]
        others = np.count_nonzero(cache.resident) - np.count_nonzero(cache.resident[layer])
        wait = self.ctx.costs.transfer_s if cache.inflight.any() else 0.0   # a copy on the link, as the oracle
        if cache.inflight[layer].any():          # the estimate counts experts in flight as absent
            on_gpu = best_split(counts, present, self.ctx.costs, max_fetch=cache.n_free + int(others),
                                link_wait_s=wait, memo=self.memo, times=self.times)
            phase = split_time(counts, on_gpu, landed, self.ctx.costs, wait, times=self.times)
        else:
            on_gpu, phase = best_split_phase(counts, present, self.ctx.costs, cache.n_free + int(others),
                                             wait, self.memo, self.times)
        cpu = bool(((counts > 0) & ~on_gpu).any())
        self.last_phase = phase                 # this layer's expert phase, for a wrapper that prices it (spac_auto)
        self.step_s += self.ctx.costs.layer_fixed(self.g + 1) + phase + (self.sync_s if cpu else 0.0)
        if self.next_layer and layer + 1 < self.ctx.n_layers:
            self._queue_top(layer + 1, cache, 0)
        return Placement(gpu_where(cache, layer, counts, on_gpu))

    def _queue_top(self, layer: int, cache, tier: int) -> None:
        """Queue ``layer``'s highest-scoring absent experts (``tier`` 0 first, then by score)."""
        row = self.score[layer]
        top = np.argsort(-row, kind="stable")[: self.k_pf]
        absent = ~present_row(cache, layer)
        for rank, e in enumerate(top.tolist()):
            if row[e] > 0 and absent[e]:
                self.queue.push(layer, e, (tier, -row[e], rank))

    def on_layer_end(self, layer: int, counts: np.ndarray, cache) -> None:
        row = self.score[layer]
        row *= self.decay if self.g > 0 else self.decay_ar
        row += counts
        self._rows.row_changed(layer)
        if self.k_pf > 0:
            self._queue_top(layer, cache, 1)

    def next_transfer(self, cache):
        return self.offer(self.queue.pop(cache))

    def victim(self, layer: int, expert: int, cache, demand: bool):
        rows = self._rows
        rows.sync(cache, self.score, None)
        l, low = rows.lowest(cache.pinned)       # the lowest score outside the pinned layers
        if low == np.inf:
            return self.refuse(demand)
        if not demand and low + self.swap_margin >= self.score[layer, expert]:
            return self.refuse(demand)
        e = rows.low_at.item(l)
        rows.evicting(l, e)
        return (l, e)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self._rows.landed(self.score, layer, expert)

    def metrics(self) -> dict[str, float]:
        out = super().metrics()
        g = np.asarray(self.gammas or [0])
        out.update(gamma_mean=float(g.mean()), ar_step_share=float(np.mean(g == 0)))
        return out
