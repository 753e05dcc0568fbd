"""Cost of spac_auto's decisions per layer (Qwen3-30B-A3B shape), transfers included, in microseconds.

The same minimal executor and counts as ``bench_moespac_decisions.py`` (48 layers x 128 experts,
top-8, 1044 slots, temporal locality), with an offline profile from other counts. Per layer pass it
times ``on_layer_start + place + on_layer_end`` plus the link calls that pass triggers
(``next_transfer`` / ``victim`` / ``on_transfer_done`` for up to ``--xfers`` transfers), per step
``choose_gamma + on_step_start + on_step_end`` spread over the layers; and once, ``reset`` (the
load-time pricing of every candidate). The first ``window`` steps also shadow the static candidates.
Also printed: the same with AdaSpec as the only candidate (what the delegate costs by itself) and with
kTransformers' static placement as the only one (what the wrapper adds around a delegate).

    python benchmarks/bench_spac_auto_decisions.py [--steps 40] [--xfers 5] [--repeat 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_moespac_decisions import L, SLOTS, context, make_counts  # noqa: E402
from sim.policies import make_policy  # noqa: E402
from sim.policies.base import Signals  # noqa: E402
from sim.protocol.expert_cache import ExpertCache  # noqa: E402


TARGET_US = 50.0    # the decision-time target per layer, transfers included


def run(counts: np.ndarray, profile: np.ndarray, xfers: int, **params) -> tuple[np.ndarray, float]:
    """Microseconds per layer pass (hooks + its transfers + its share of the step hooks); reset seconds."""
    pol = make_policy("spac_auto", **params)
    ctx = dataclasses.replace(context(), gamma=12, profile=profile)
    cache = ExpertCache(L, ctx.n_experts, SLOTS)
    clock = time.perf_counter
    t0 = clock()
    pol.reset(ctx, cache)
    reset_s = clock() - t0
    for layer, expert in pol.initial_residency():
        cache.load(layer, expert)
    sig, per_layer = Signals(), []
    for s in range(counts.shape[0]):
        t0 = clock()
        g = pol.choose_gamma(s)
        pol.on_step_start(s, sig, cache)
        step_hooks = clock() - t0
        passes = []
        for l in range(L):
            c = counts[s, l]
            t0 = clock()
            cache.pinned[l] = True
            pol.on_layer_start(l, cache)
            pol.place(l, c, sig, cache)
            cache.pinned[l] = False
            pol.on_layer_end(l, c, cache)
            for _ in range(xfers):
                item = pol.next_transfer(cache)
                if item is None:
                    break
                if cache.n_free <= 0:
                    v = pol.victim(*item, cache, False)
                    if v is None:
                        continue
                    cache.evict(*v)
                cache.begin(*item)
                cache.land(*item)
                pol.on_transfer_done(*item, cache)
            passes.append(clock() - t0)
        t0 = clock()
        pol.on_step_end(s, g + 1, g)
        step_hooks += clock() - t0
        per_layer += [p + step_hooks / L for p in passes]
    return np.array(per_layer) * 1e6, reset_s


def main() -> None:
    """Time spac_auto and its delegates and print the numbers."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--xfers", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    counts = make_counts(args.steps)
    profile = make_counts(20, seed=1).sum(axis=0).astype(float)
    cases = (("spac_auto", {}), ("spac_auto, no online switch", {"switch": False}),
             ("only AdaSpec as candidate (the delegate's own cost)", {"candidates": ["adaspec"]}),
             ("only kTransformers as candidate (the wrapper's own overhead)", {"candidates": ["ktransformers"]}))
    for name, kw in cases:
        reps = [run(counts, profile, args.xfers, **kw) for _ in range(args.repeat)]
        n = min(len(r[0]) for r in reps)
        best = np.min([r[0][:n] for r in reps], axis=0)     # each event's fastest of the repeats
        window = best[: 8 * L]
        print(f"{name}: per layer incl. transfers: mean {best.mean():.1f} us, median {np.median(best):.1f} us "
              f"(target <= {TARGET_US:.0f}), "
              f"p99 {np.percentile(best, 99):.1f} us; first 8 steps (shadowing) mean {window.mean():.1f} us, "
              f"after them median {np.median(best[8 * L:]):.1f} us; "
              f"reset (load-time pricing) {min(r[1] for r in reps) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
