"""``python -m sim breakeven``: the acceptance at which speculation starts to pay on one machine.

For one (machine, model, draft, workload, cache ratio): the best autoregressive policy (highest
TPS among ``ar_policies``; with ``equal_vram`` they get the draft's VRAM as slots), and for every
acceptance in ``acceptances`` the best speculative policy at its best gamma
(:func:`sim.speculation.gamma.best_gamma` over ``gamma_min..gamma_max``). The break-even acceptance
is where the best SD TPS reaches the best AR TPS (linear interpolation between grid points).
The map: the same at every (acceptance, draft cost ratio) cell, where the ratio is one draft decode
over the best AR policy's time per token (a drafter of exactly that cost, no weights), coloured by
SD/AR speedup. Acceptance is the first-position acceptance; the draft preset's positional decay
applies (:mod:`traces.acceptance`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from traces.atomic import save_png
from tqdm import tqdm

from sim.run.runner import run_one
from sim.speculation.gamma import best_gamma
from sim.run.spec import RunSpec


@dataclass
class BreakEven:
    """Everything the command prints and saves."""

    ar_policy: str
    ar_tps: float
    ar_tps_by_policy: dict
    curve: list = field(default_factory=list)      # per acceptance: policy, gamma, tps, speedup, tps by gamma
    breakeven: float | None = None                 # acceptance where SD == AR (None: not in range)
    below_range: bool = False                      # SD already pays at the lowest acceptance
    ar_token_s: float = 0.0
    map: dict | None = None                        # {"ratios", "acceptances", "speedup" [r][a], "gamma" [r][a]}


def _tps(args: dict, policy: str, **over) -> float:
    return run_one(RunSpec.of(policy=policy, **{**args, **over})).row["tps"]


def crossing(xs, ys, level: float = 1.0):
    """First ``x`` where ``ys`` reaches ``level`` (linear interpolation), or None; and whether
    it is already reached at ``xs[0]``."""
    ys = np.asarray(ys, dtype=float)
    if ys[0] >= level:
        return float(xs[0]), True
    for i in range(1, len(xs)):
        if ys[i] >= level:
            x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
            return float(x0 + (level - y0) * (x1 - x0) / (y1 - y0)), False
    return None, False


@dataclass(frozen=True)
class Search:
    """What a break-even search scans: draft lengths ``gamma_min..gamma_max`` (``gamma_min`` at least
    1: gamma 0 is autoregressive decoding, not speculation), the draft cost ratios of the map (None:
    no map), and whether AR policies get the draft's VRAM as expert slots (``equal_vram``)."""

    gamma_min: int = 1
    gamma_max: int = 12
    ratios: tuple | list | None = None
    equal_vram: bool = False


def breakeven(args: dict, ar_policies, sd_policies, acceptances, search: Search = Search(),
              progress: bool = True) -> BreakEven:
    """Compute the curve (and the map when ``search.ratios`` is given); ``args`` are the run's flat
    specification keys (:meth:`sim.run.spec.RunSpec.of`)."""
    gamma_min, gamma_max, ratios, equal_vram = search.gamma_min, search.gamma_max, search.ratios, search.equal_vram
    if gamma_min < 1:
        raise ValueError(f"gamma_min={gamma_min}: must be an integer in 1..12 (gamma 0 does not speculate)")
    ar = {p: _tps(args, p, equal_vram=equal_vram) for p in ar_policies}
    best_ar = max(ar, key=ar.get)
    out = BreakEven(best_ar, ar[best_ar], ar, ar_token_s=1.0 / ar[best_ar])
    bar = tqdm(total=len(acceptances) * (1 + len(ratios or ())), desc="breakeven", unit="point",
               disable=not progress)
    for a in acceptances:
        best = None
        for p in sd_policies:
            g, tps, seen = best_gamma(lambda g: _tps(args, p, gamma=g, acceptance=a), gamma_min, gamma_max)
            if best is None or tps > best["tps"]:
                best = {"acceptance": a, "policy": p, "gamma": g, "tps": tps, "by_gamma": seen}
        best["speedup"] = best["tps"] / out.ar_tps
        out.curve.append(best)
        bar.update()
    out.breakeven, out.below_range = crossing(acceptances, [c["speedup"] for c in out.curve])
    if ratios:
        sd = max(out.curve, key=lambda c: c["tps"])["policy"]
        speed, gam = [], []
        for r in ratios:
            draft = {"name": f"cost_ratio_{r:g}", "params": 0.0, "bytes_per_param": 0.0, "n_layers": 0,
                     "kv_bytes_per_token": 0, "kind": "synthetic", "host_us_per_token": 1e6 * r * out.ar_token_s}
            row_s, row_g = [], []
            for a in acceptances:
                g, tps, _ = best_gamma(lambda g: _tps(args, sd, gamma=g, acceptance=a, draft=draft),
                                       gamma_min, gamma_max)
                row_s.append(tps / out.ar_tps)
                row_g.append(g)
                bar.update()
            speed.append(row_s)
            gam.append(row_g)
        out.map = {"policy": sd, "ratios": list(ratios), "acceptances": list(acceptances), "speedup": speed,
                   "gamma": gam}
    bar.close()
    return out


def report(b: BreakEven, draft_ratio: float | None = None) -> str:
    """The printed table."""
    lines = [f"best AR policy: {b.ar_policy} {b.ar_tps:.2f} tok/s ("
             + ", ".join(f"{p} {t:.2f}" for p, t in sorted(b.ar_tps_by_policy.items(), key=lambda x: -x[1])) + ")",
             "acceptance  best SD policy  gamma   tok/s  SD/AR"]
    for c in b.curve:
        lines.append(f"{c['acceptance']:10.3f}  {c['policy']:<14}  {c['gamma']:5d}  {c['tps']:6.2f}  {c['speedup']:5.3f}")
    if b.below_range:
        lines.append(f"speculation pays at every acceptance tried (>= {b.curve[0]['acceptance']})")
    elif b.breakeven is None:
        lines.append(f"speculation does not pay at any acceptance tried (<= {b.curve[-1]['acceptance']})")
    else:
        lines.append(f"break-even acceptance: {b.breakeven:.3f}")
    if draft_ratio is not None:
        lines.append(f"this draft's cost ratio (one draft decode / best AR token): {draft_ratio:.3f}")
    return "\n".join(lines)


def to_json(b: BreakEven) -> bytes:
    """The result as JSON (for notebooks and docs)."""
    return json.dumps(b.__dict__, indent=1, default=float).encode()


def figure(b: BreakEven, path, title: str = "", draft_ratio: float | None = None) -> None:
    """PNG: acceptance x draft cost ratio coloured by SD/AR speedup (the crossover drawn at 1)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    m = b.map
    z = np.asarray(m["speedup"])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    x, y = np.asarray(m["acceptances"]), np.asarray(m["ratios"])
    mesh = ax.pcolormesh(x, y, z, shading="nearest", cmap="RdBu",
                         norm=TwoSlopeNorm(1.0, min(z.min(), 0.99), max(z.max(), 1.01)))
    if z.min() < 1 < z.max():
        ax.contour(x, y, z, levels=[1.0], colors="k", linewidths=1.5)
    for i, r in enumerate(y):
        for j, a in enumerate(x):
            ax.text(a, r, f"{m['gamma'][i][j]}", ha="center", va="center", fontsize=7)
    if draft_ratio is not None:
        ax.axhline(draft_ratio, color="k", ls=":", lw=1)
    fig.colorbar(mesh, ax=ax, label=f"SD ({m['policy']}, best gamma) / AR ({b.ar_policy})")
    ax.set_xlabel("draft acceptance (first position)")
    ax.set_ylabel("draft cost ratio (draft decode / AR token)")
    ax.set_title(title or "when speculation pays (numbers: best gamma)")
    save_png(fig, path, dpi=120)
