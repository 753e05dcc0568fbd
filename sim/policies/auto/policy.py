"""``spac_auto`` (ours): per machine and model, the strategy that the cost model says is fastest.

At load time (:meth:`SpacAuto.reset`) every candidate strategy (registered presets: by default
AdaSpec's dynamic utility cache with adaptive speculation, Fiddler's static profile placement with
the exact CPU/GPU split, and kTransformers' static placement with every miss on the CPU) is priced
in closed form from the offline profile and the cost model (:mod:`sim.policies.auto.estimate`); the
policy delegates every protocol call to the chosen one. The dynamic strategy prefetches only where
the cost model says a copy costs at least ``prefetch_min_ratio`` CPU expert computations. The dynamic strategy is kept unless a
static one is estimated faster by ``margin`` (the estimate cannot see reuse or speculation, which
only help the dynamic one).

Online (``switch``): while the dynamic strategy runs, each static candidate is shadowed on the same
routing (its own decisions on its own static set, costed the same way) during autoregressive
steps; after ``window`` steps the realised cost-model tokens per second of the running strategy
(tokens produced over the estimated step times, no clock, with the running strategy's CPU experts
slowed while its copies, prefetches included, take the host DRAM the cost model shares between
them; for AdaSpec the best of that and its own rate of its best draft length, slowed alike) is
compared with the best shadow. If a
static strategy is faster by ``margin`` the policy switches to it once: its static set is then
restored by prefetches that evict only experts outside it. Nothing reads the trace's future.
"""
from __future__ import annotations

import copy

import numpy as np

from sim.machine.cost_model import dram_speed
from sim.policies.adaspec import AdaSpecParams
from sim.policies.auto.estimate import LayerRun, layer_seconds, layer_times, loaded_cache, profile_tokens, token_seconds
from sim.policies.auto.params import SpacAutoParams
from sim.policies.auto.restore import Restore
from sim.policies.base import CPU, FETCH, Placement, Policy, Signals
from sim.policies.common import present_row
from sim.policies.split import ExpertTimes

SYNC_S = AdaSpecParams.sync_us / 1e6    # the per-layer CPU/GPU join the estimates charge (AdaSpec's)


class SpacAuto(Policy):
    """Delegates to the candidate strategy estimated fastest; switches online when a static one wins."""

    speculative = True
    adaptive_gamma = True
    needs_profile = True
    Params = SpacAutoParams

    def __init__(self, params: SpacAutoParams = SpacAutoParams()):
        params.check()
        self.params = params
        from sim.policies.registry import make_policy   # the registry imports policy modules
        self.templates, self.no_prefetch = [], {}
        for name in params.candidates:
            pol = make_policy(name)
            if pol.prefetches():
                if name == "adaspec":
                    pol = make_policy(name, **params.dynamic_overrides())
                    self.no_prefetch[len(self.templates)] = make_policy(name, **params.dynamic_overrides(False))
            elif not params.placement:
                continue
            self.templates.append(pol)
        if not self.templates:
            raise ValueError(f"policy.candidates={list(params.candidates)}: none usable with placement=false")
        self.gamma_max = max(t.run_gamma(0) for t in self.templates)

    def run_gamma(self, gamma: int) -> int:
        """Runs are set up for the largest draft length any candidate may choose."""
        return self.gamma_max

    # --- load time ----------------------------------------------------------------------------
    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        self.prefetching = self.prefetch_pays(ctx.costs)
        self.runs = [self.no_prefetch.get(i, t) if not self.prefetching else t for i, t in enumerate(self.templates)]
        self.times = ExpertTimes(ctx.costs)
        self.draft_s = ctx.costs.draft_phase_s / ctx.gamma if ctx.gamma else 0.0
        self.estimates = self._estimates()
        self.choice = self._choose(self.estimates)
        self.active = self._fresh(self.choice, cache)
        self.restore: Restore | None = None
        self.switched = False
        self.shadows = self._shadows() if self.params.switch and self._dynamic(self.choice) else []
        self.ar_steps: list[list] = []
        self.tok = self.sec = self.sec_free = 0.0
        self.g = 0
        self.cache_ref = cache

    def prefetch_pays(self, costs) -> bool:
        """Whether the dynamic strategy prefetches on this machine and model: one copy must cost at
        least ``prefetch_min_ratio`` CPU computations of one expert for one token, and a prefetch must
        not lose on both counts a copy can: the copy takes host DRAM the CPU's experts need (the cost
        model's shared DRAM: :func:`dram_speed` below 1 for one expert's computation while a copy
        runs) and the cache holds fewer slots than one token's experts per layer (``n_slots < top_k x
        n_layers``), so every prefetched expert evicts one that a coming layer needs."""
        if not self.params.prefetch or costs.transfer_s < self.params.prefetch_min_ratio * float(costs.cpu(1)):
            return False
        c = self.ctx
        room = c.n_slots >= c.top_k * c.n_layers
        free_dram = dram_speed(costs.expert_bytes, float(costs.cpu(1)), costs.dram_left_bps) >= 1.0
        return bool(room or free_dram)

    def _fresh(self, i: int, cache):
        pol = copy.deepcopy(self.runs[i])
        pol.reset(self.ctx, cache)
        return pol

    def _dynamic(self, i: int) -> bool:
        return self.templates[i].prefetches()

    def _estimates(self) -> list[float]:
        """Closed-form seconds per token of every candidate (:func:`token_seconds`)."""
        c = self.ctx
        if len(self.templates) == 1:
            return [0.0]
        tokens = profile_tokens(c.profile, c.n_layers, c.n_experts, c.top_k, self.params.samples, c.seed)
        out = []
        for i in range(len(self.templates)):
            scratch = loaded_cache(c, [])
            pol = self._fresh(i, scratch)
            for layer, expert in pol.initial_residency():
                scratch.load(int(layer), int(expert))
            out.append(token_seconds(pol, scratch, tokens, c, SYNC_S))
        return out

    def _choose(self, est: list[float]) -> int:
        """The fastest estimate; a dynamic candidate unless a static one is faster by ``margin``."""
        best = int(np.argmin(est))
        dyn = [i for i in range(len(est)) if self._dynamic(i)]
        if dyn and not self._dynamic(best) and est[dyn[0]] * (1.0 - self.params.margin) <= est[best]:
            return dyn[0]
        return best

    def _shadows(self) -> list[dict]:
        """Static candidates shadowed online: their policy, scratch cache and accumulated time."""
        out = []
        for i in range(len(self.templates)):
            if not self._dynamic(i):
                scratch = loaded_cache(self.ctx, [])
                pol = self._fresh(i, scratch)
                for layer, expert in pol.initial_residency():
                    scratch.load(int(layer), int(expert))
                out.append(dict(i=i, pol=pol, cache=scratch, sec=0.0, tok=0))
        return out

    def _price_shadows(self) -> None:
        """Each static shadow's cost-model time over the autoregressive steps recorded since the start:
        its own placement (on its static set, which never changes) of each recorded layer's counts,
        costed as the running strategy's layers are. Deferred to the check (the shadows' decisions do
        not depend on when they are priced), so it costs the per-layer path nothing."""
        for s in self.shadows:
            for step in self.ar_steps:
                t = self.ctx.costs.step_fixed(1)
                for layer, counts in step:
                    w = np.asarray(s["pol"].place(layer, counts, Signals(), s["cache"]).where)
                    t += layer_seconds(w, counts, present_row(s["cache"], layer), self.ctx, self.times, SYNC_S)
                s["sec"] += t
                s["tok"] += 1
        self.ar_steps = []

    def initial_residency(self):
        return self.active.initial_residency()

    # --- per step -----------------------------------------------------------------------------
    def choose_gamma(self, step: int) -> int:
        a = self.active
        g = a.choose_gamma(step) if a.adaptive_gamma else (self.ctx.gamma if a.speculative else 0)
        self.g = int(min(g, self.ctx.gamma))
        return self.g

    def on_step_start(self, step: int, signals: Signals, cache) -> None:
        self.step_s = self.g * self.draft_s + self.ctx.costs.step_fixed(self.g + 1)
        self.step_free_s = self.step_s
        if self.shadows and self.g == 0:
            self.ar_steps.append([])           # this step's (layer, counts), priced for the shadows at the check
        self.active.on_step_start(step, signals, cache)

    def on_layer_start(self, layer: int, cache) -> None:
        self.active.on_layer_start(layer, cache)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        out = self.active.place(layer, counts, signals, cache)
        if not self.params.cpu_compute:
            where = np.array(out.where, copy=True)
            where[(counts > 0) & (where == CPU)] = FETCH
            out = Placement(where, out.extra_fetch, out.bulk)
        if self.shadows:
            inflight = int(np.count_nonzero(cache.inflight))
            wait = self.ctx.costs.transfer_s if inflight else 0.0
            where = np.asarray(out.where)
            copies = inflight + int(np.count_nonzero((counts > 0) & (where != CPU) & ~cache.resident[layer]))
            phase = getattr(self.active, "last_phase", None) if self.params.cpu_compute else None
            free, slowed = layer_times(where, counts, cache.resident[layer], self.ctx, self.times, SYNC_S,
                                       LayerRun(wait, copies, self.g + 1, phase))
            self.step_s += slowed
            self.step_free_s += free
            if self.g == 0:
                self.ar_steps[-1].append((layer, np.array(counts, copy=True)))
        return out

    def on_layer_end(self, layer: int, counts: np.ndarray, cache) -> None:
        self.active.on_layer_end(layer, counts, cache)

    def on_step_end(self, step: int, n_verified: int, accepted: int) -> None:
        self.active.on_step_end(step, n_verified, accepted)
        if not self.shadows:
            return
        self.tok += accepted + 1
        self.sec += self.step_s
        self.sec_free += self.step_free_s
        if step + 1 >= self.params.window:
            self._check()

    def _check(self) -> None:
        """Switch to the fastest shadowed static strategy if it beats the running one by ``margin``."""
        rate = self.tok / self.sec if self.sec > 0 else 0.0
        if hasattr(self.active, "best_rate"):   # AdaSpec: its best draft length so far (its own rate
            slow = self.sec_free / self.sec if self.sec > 0 else 1.0   # leaves out its copies' DRAM share)
            rate = max(rate, self.active.best_rate() * slow)
        best, best_rate = None, rate / (1.0 - self.params.margin)
        self._price_shadows()
        for s in self.shadows:
            r = s["tok"] / s["sec"] if s["sec"] > 0 else 1.0 / self.estimates[s["i"]]
            if r > best_rate:
                best, best_rate = s, r
        self.shadows = []
        if best is not None:
            self.choice, self.switched = best["i"], True
            self.active = self._fresh(best["i"], self.cache_ref)
            self.restore = Restore(self.active.initial_residency())

    # --- transfers ----------------------------------------------------------------------------
    def next_transfer(self, cache):
        if self.restore is not None:
            pick = self.restore.next(cache)
            if pick is not None:
                return pick
        return self.active.next_transfer(cache)

    def victim(self, layer: int, expert: int, cache, demand: bool):
        if self.restore is not None:
            return self.restore.victim(cache)
        return self.active.victim(layer, expert, cache, demand)

    def victims(self, layer: int, n: int, cache):
        return None if self.restore is not None else self.active.victims(layer, n, cache)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self.active.on_transfer_done(layer, expert, cache)

    def on_transfers_done(self, layer: int, experts: list[int], cache) -> None:
        self.active.on_transfers_done(layer, experts, cache)

    def metrics(self) -> dict[str, float]:
        out = dict(self.active.metrics())
        out.update(auto_choice=float(self.choice), auto_switched=float(self.switched),
                   auto_prefetch=float(self.prefetching))
        return out
