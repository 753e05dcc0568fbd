"""Figure of a trace's routing statistics (matplotlib, Agg backend)."""
from __future__ import annotations

import os


def plot_stats(st: dict, curves: dict, path: str | os.PathLike) -> None:
    """Write a two-panel PNG: per-layer cache hit rate vs slots (LRU and Belady), and next-token
    reuse and popularity entropy by layer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    lru, bel = curves["lru"], curves["belady"]
    ax1.plot(list(lru), list(lru.values()), label="LRU")
    ax1.plot(list(bel), list(bel.values()), "o-", label="Belady (offline optimum)")
    ax1.set_xlabel("cache size (expert slots per layer)")
    ax1.set_ylabel("hit rate (fraction of expert lookups)")
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(list(bel), [str(c) for c in bel])
    ax1.set_ylim(0, 1)
    ax1.grid(alpha=0.3)
    ax1.legend()
    layers = range(st["n_layers"])
    ax2.plot(layers, st["reuse_by_layer"], label="next-token reuse |E_t ∩ E_t+1|/k")
    ax2.plot(layers, st["entropy_by_layer"], label="normalized popularity entropy")
    ax2.axhline(st["random_reuse"], ls=":", color="grey", label="reuse of uniform routing (k/E)")
    ax2.set_xlabel("MoE layer (index)")
    ax2.set_ylabel("fraction (0..1)")
    ax2.set_ylim(0, 1.05)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(f"{st['model']} / {st['workload']} ({st['source']}, {st['tokens']} tokens)")
    from traces.atomic import save_png

    save_png(fig, path, dpi=120)
