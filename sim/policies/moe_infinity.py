"""MoE-Infinity: request-level expert activation matrix (EAM) drives prefetch and caching."""
from __future__ import annotations

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, fetch_all_where
from sim.policies.priority_rows import RowExtremes


class MoEInfinity(OffloadPolicy):
    """EAM-guided prefetch and priority cache, fetch on miss, all compute on the GPU (AR).

    Mechanism (arXiv 2401.14361; github.com/EfficientMoE/MoE-Infinity, ``moe_infinity/memory/``):
    the tracer keeps the request's expert activation matrix (EAM, ``[L, E]`` token counts so far)
    and matches it to the most similar stored EAM (cosine); with the single request simulated
    here that match is the accumulated EAM itself. After layer ``l`` is routed
    (``expert_predictor.py``): rows of past layers are zeroed, rows ``l' > l`` scaled by the layer
    decay ``1 - (l' - l) / (L + 1)``, and every expert with a positive entry is offered for
    prefetch in descending order (``expert_prefetcher.py``; no wrap into the next token, as there).
    Cache priority (``expert_priority_score.py``): ``topology decay x current-request EAM (row-
    normalised) x global frequency``, evicting the lowest; the decay here uses each layer's
    distance ahead of the current one, so the layers just computed rank last. A prefetch may only
    evict a resident expert of lower priority than the one it brings; a demand fetch evicts the
    lowest. Prefetch and eviction use the same priority, which cannot thrash within one layer.

    Parameters:
        use_profile: multiply by the global frequency ``ctx.profile`` (default true; the code's
            ``expert_freq`` counts activations over all requests served so far). False, or no
            profile: frequency 1.
    """

    speculative = False

    needs_profile = True

    def __init__(self, use_profile: bool = True):
        self.use_profile = use_profile

    def reset(self, ctx, cache) -> None:
        super().reset(ctx, cache)
        L, E = ctx.n_layers, ctx.n_experts
        self.eam = np.zeros((L, E))
        freq = np.ones((L, E))
        if self.use_profile and ctx.profile is not None:
            freq = np.asarray(ctx.profile, float)
            freq = freq / max(freq.sum(), 1e-12)
        self.freq = freq + 1e-6
        self.current = 0
        # _priority's pieces, kept up to date per row: the row-normalised EAM plus 1e-6, the
        # positive EAM entries, and the topology decay seen from every current layer.
        self._share = np.full((L, E), 1.0 / E + 1e-6)
        self._seen = np.zeros((L, E), dtype=bool)
        ahead = (np.arange(L)[None, :] - np.arange(L)[:, None]) % L
        self._topo = 1.0 - ahead / (L + 1)                           # [current, layer]
        self._prio = np.empty((L, E))
        self._rows = RowExtremes(L)
        self._ahead = None             # (layer, expert, victim) of the prefetch just offered
        self._refresh(0)

    def _priority(self, current: int) -> np.ndarray:
        """Cache priority of every (layer, expert) seen from layer ``current``."""
        return self._share * self._topo[current][:, None] * self.freq

    def _refresh(self, current: int) -> None:
        """Recompute ``_prio`` (= :meth:`_priority` of ``current``) in place."""
        np.multiply(self._share, self._topo[current][:, None], out=self._prio)
        np.multiply(self._prio, self.freq, out=self._prio)
        self._prio_at = current
        self._rows.all_stale()

    def on_layer_start(self, layer: int, cache) -> None:
        self._ahead = None
        self.current = layer
        self._refresh(layer)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        return Placement(fetch_all_where(cache, layer, counts))

    def on_layer_end(self, layer: int, counts: np.ndarray, cache) -> None:
        self._ahead = None
        self.eam[layer] += counts
        row = self.eam[layer]
        total = self.eam[layer:layer + 1].sum(axis=1)[0]     # the same reduction as a full pass
        share = row / max(total, 1e-12) if total > 0 else np.full(len(row), 1.0 / len(row))
        self._share[layer] = share + 1e-6
        self._seen[layer] = row > 0
        if self._prio_at == layer:     # only this row changed
            self._prio[layer] = self._share[layer] * self._topo[layer, layer] * self.freq[layer]
            self._rows.row_changed(layer)
        else:
            self._refresh(layer)

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        self._ahead = None
        self._rows.landed(self._prio, layer, expert)

    def next_transfer(self, cache):
        self._ahead = None
        first = self.current + 1
        if first >= self.ctx.n_layers:
            return None
        rows = self._rows
        rows.sync(cache, self._prio, self._seen)
        l, best = rows.best_from(first)
        if best == -np.inf:
            return None
        e = int(rows.best_at[l])
        if cache.n_free <= 0:
            low = self._lowest(cache, below=best)
            if low is None:
                return None
            self._ahead = (l, e, low)  # the victim the core asks for next, found already
        rows.offered(l)                # the core may reserve it now
        return self.offer((l, e))

    def _lowest(self, cache, below: float = np.inf):
        """The lowest-priority resident expert of an unpinned layer if below ``below``, else None
        (the first in flat order among ties, as an argmin over the whole masked array)."""
        rows = self._rows
        rows.sync(cache, self._prio, self._seen)
        l, low = rows.lowest(cache.pinned)
        return (l, int(rows.low_at[l])) if low < below and low != np.inf else None

    def victim(self, layer: int, expert: int, cache, demand: bool):
        ahead, self._ahead = self._ahead, None
        if not demand and ahead is not None and ahead[0] == layer and ahead[1] == expert:
            found = ahead[2]           # nothing changed since next_transfer searched it
        else:
            found = self._lowest(cache, np.inf if demand else self._prio[layer, expert])
        if found is None:
            return self.refuse(demand)
        self._rows.evicting(*found)    # the core evicts it and reserves (layer, expert) now
        self._rows.offered(layer)
        return found
