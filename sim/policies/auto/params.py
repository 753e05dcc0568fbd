"""The parameters of :class:`sim.policies.auto.policy.SpacAuto` (conf/policy/spac_auto.yaml).

The switches ``placement``, ``cpu_compute``, ``prefetch``, ``speculation``, ``adaptive_gamma`` and
``switch`` each turn one of its decisions off, for the ablation table (scripts/policy_cells.py
``--ablate``); all on is the policy.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpacAutoParams:
    """What ``spac_auto`` chooses among and how (each field below, with its default).

    candidates: registered policy presets it may delegate to; the first one that prefetches is the
        dynamic strategy (AdaSpec: utility cache, adaptive draft length, best split), the others
        static profile placements (Fiddler: popular set + exact split with one temporary copy;
        kTransformers: popular set, every miss on the CPU).
    samples: tokens drawn from the offline profile per layer for the load-time estimate (32).
    window: steps after which the realised per-token time of the running strategy is compared
        with the static strategies' shadow time on the same routing (8: after 4 steps AdaSpec's
        cache is cold and it has not yet measured a draft length; on the policy_cells grid 8, 10 and
        12 give the same geometric mean, 4 and 6 switch away from AdaSpec where it wins later).
    margin: a static strategy replaces the dynamic one only when faster by this share (0.06); at
        load time the dynamic one is kept unless a static one is estimated faster by this share.
    placement: allow the profile placements (static candidates and AdaSpec's warm start).
    cpu_compute: let misses run on the CPU (off: every miss is copied and computed on the GPU).
    prefetch: let the dynamic strategy prefetch on the verify window's utility.
    prefetch_min_ratio: prefetch only where one copy costs at least this many CPU computations of
        one expert for one token (``transfer_s >= ratio * cpu(1)``, read from ``ctx.costs`` at load
        time; 2.0). Where the link is about as fast as the host's DRAM stream, a copy takes the host
        DRAM the CPU's experts need (the cost model's shared DRAM) and prefetching costs more than it
        earns (on the policy_cells grid: DDR4 3090, 5070 Ti and 5090 hosts, ratio 1.2-1.4). Beyond
        this ratio the dynamic strategy still does not prefetch where a copy slows the CPU's experts
        (shared DRAM) and the cache holds fewer slots than one token's experts per layer
        (:meth:`SpacAuto.prefetch_pays`).
    speculation: let the dynamic strategy draft (off: autoregressive only).
    adaptive_gamma: choose the draft length per step (off: a fixed ``fixed_gamma``).
    fixed_gamma: the draft length when ``adaptive_gamma`` is off (8, the paper's).
    switch: compare online and switch to a static strategy when it is faster.
    """

    candidates: tuple = ("adaspec", "fiddler", "ktransformers")
    samples: int = 32
    window: int = 8
    margin: float = 0.06
    placement: bool = True
    cpu_compute: bool = True
    prefetch: bool = True
    prefetch_min_ratio: float = 2.0
    speculation: bool = True
    adaptive_gamma: bool = True
    fixed_gamma: int = 8
    switch: bool = True

    def check(self) -> None:
        """Refuse values out of range with one line naming the key, the value and the range."""
        if not self.candidates:
            raise ValueError("policy.candidates must name at least one policy preset, got ()")
        if "spac_auto" in self.candidates:
            raise ValueError("policy.candidates must not name spac_auto itself")
        for key, low in (("samples", 1), ("window", 1), ("fixed_gamma", 0)):
            if int(getattr(self, key)) < low:
                raise ValueError(f"policy.{key} must be an integer >= {low}, got {getattr(self, key)!r}")
        if float(self.prefetch_min_ratio) < 0:
            raise ValueError(f"policy.prefetch_min_ratio must be >= 0, got {self.prefetch_min_ratio!r}")
        if not 0.0 <= float(self.margin) < 1.0:
            raise ValueError(f"policy.margin must be in [0, 1), got {self.margin!r}")

    def dynamic_overrides(self, prefetch: bool = True) -> dict:
        """AdaSpec parameters that realise the switches that are off (``prefetch``: the load-time rule)."""
        out: dict = {}
        if not self.placement:
            out["warm_start"] = False
        if not (self.prefetch and prefetch):
            out["prefetch_per_layer"] = 0
        if not self.speculation:
            out["arms"] = (0,)
        elif not self.adaptive_gamma:
            out["arms"] = (int(self.fixed_gamma),)
        return out
