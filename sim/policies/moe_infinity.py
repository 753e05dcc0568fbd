"""MoE-Infinity: request-level expert activation matrix (EAM) drives prefetch and caching."""
from __future__ import annotations

import numpy as np

from sim.policies.base import Placement, Signals
from sim.policies.common import OffloadPolicy, evictable_mask, fetch_all_where


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
        self._prio = self._priority(0)

    def _priority(self, current: int) -> np.ndarray:
        """Cache priority of every (layer, expert) seen from layer ``current``."""
        L = self.ctx.n_layers
        rows = self.eam.sum(axis=1, keepdims=True)
        norm = np.where(rows > 0, self.eam / np.maximum(rows, 1e-12), 1.0 / self.ctx.n_experts)
        ahead = (np.arange(L) - current) % L
        topo = 1.0 - ahead / (L + 1)
        return (norm + 1e-6) * topo[:, None] * self.freq

    def on_layer_start(self, layer: int, cache) -> None:
        self.current = layer
        self._prio = self._priority(layer)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        where = fetch_all_where(cache, layer, counts)
        self.note_demand(layer, where, counts)
        return Placement(where)

    def on_layer_end(self, layer: int, counts: np.ndarray, cache) -> None:
        self.eam[layer] += counts
        self._prio = self._priority(layer)

    def next_transfer(self, cache):
        L = self.ctx.n_layers
        cand = np.zeros((L, self.ctx.n_experts), dtype=bool)
        cand[self.current + 1:] = self.eam[self.current + 1:] > 0
        cand &= ~(cache.resident | cache.inflight)
        if not cand.any():
            return None
        score = np.where(cand, self._prio, -np.inf)
        l, e = np.unravel_index(int(np.argmax(score)), score.shape)
        if cache.n_free <= 0 and self._lowest(cache, below=score[l, e]) is None:
            return None
        return self.offer((int(l), int(e)))

    def _lowest(self, cache, below: float = np.inf):
        mask = evictable_mask(cache)
        if not mask.any():
            return None
        score = np.where(mask, self._prio, np.inf)
        l, e = np.unravel_index(int(np.argmin(score)), score.shape)
        return (int(l), int(e)) if score[l, e] < below else None

    def victim(self, layer: int, expert: int, cache):
        below = np.inf if self.is_demand(layer, expert) else self._prio[layer, expert]
        found = self._lowest(cache, below)
        return found if found is not None else self.refuse(layer, expert)
