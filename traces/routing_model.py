"""The generative routing model behind :mod:`traces.synth` (numpy only, vectorised over layers).

Per layer ``l`` the model holds a persistent Zipf popularity ``pop_l`` (exponent ``s_l`` over a
fixed random permutation of the experts). The sequence is cut into segments (domain shifts) at
random tokens; each segment draws, per layer, a working set ``W_l`` of ``w`` experts from
``pop_l ** beta`` and routes fresh draws from ``q = (1 - a) * pop_l + a * uniform(W_l)``.
Token ``t`` keeps each expert of token ``t-1`` with probability ``stick_l`` (or, where ``stick_l``
is negative, excludes it with probability ``-stick_l``) and fills the remaining slots with draws
without replacement from ``q`` (Gumbel top-k). Slots are ordered by the
perturbed score ``log q + Gumbel``, like a gate ordering its top-k.
"""
from __future__ import annotations

import numpy as np

_CHUNK = 256


def inclusion(v: np.ndarray, n: int, iters: int = 60) -> np.ndarray:
    """Approximate inclusion probabilities of each item in an ``n``-subset drawn without replacement
    with weights ``v`` (rows of [L, E]): ``1 - exp(-lam * v)`` with ``lam`` set so each row sums to n."""
    v = v / v.sum(axis=-1, keepdims=True)
    lo = np.zeros(v.shape[:-1] + (1,))
    hi = np.full_like(lo, 1.0)
    while np.any((1 - np.exp(-hi * v)).sum(-1, keepdims=True) < n) and hi.max() < 1e12:
        hi *= 4
    for _ in range(iters):
        mid = (lo + hi) / 2
        low = (1 - np.exp(-mid * v)).sum(-1, keepdims=True) < n
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    return 1 - np.exp(-hi * v)


def zipf(s: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Zipf popularity [L, E]: expert ``perm[l, r]`` has weight ``(r + 1) ** -s[l]``."""
    L, E = perm.shape
    w = (np.arange(1, E + 1)[None, :] ** -np.asarray(s, float)[:, None])
    pop = np.empty((L, E))
    np.put_along_axis(pop, perm, w / w.sum(axis=1, keepdims=True), axis=1)
    return pop


def norm_entropy(p: np.ndarray) -> np.ndarray:
    """Normalized entropy of each row of a probability matrix."""
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)
    return h / np.log(p.shape[-1])


def marginal(pop: np.ndarray, k: int, w: int, a: np.ndarray, beta: float) -> np.ndarray:
    """Approximate long-run expert shares: inclusion in a top-k draw from the mean segment mix
    ``(1 - a) pop + a * P(e in W) / w`` (``a`` per layer), divided by k."""
    a = np.asarray(a, float).reshape(-1, 1)
    return inclusion((1 - a) * pop + a * inclusion(pop ** beta, w) / w, k) / k


def solve_zipf(target: np.ndarray, perm: np.ndarray, k: int, w: int, a: np.ndarray, beta: float
               ) -> np.ndarray:
    """Per-layer Zipf exponents whose long-run shares have the target normalized entropy."""
    lo, hi = np.zeros(len(target)), np.full(len(target), 4.0)
    for _ in range(30):
        mid = (lo + hi) / 2
        too_flat = norm_entropy(marginal(zipf(mid, perm), k, w, a, beta)) > target
        lo, hi = np.where(too_flat, mid, lo), np.where(too_flat, hi, mid)
    return (lo + hi) / 2


def stickiness(reuse: np.ndarray, pop: np.ndarray, k: int, w: int, a: np.ndarray, beta: float,
               gain: float) -> np.ndarray:
    """Per-layer keep probability ``p`` giving the target reuse ``r = p + c (1 - p)^2``.

    ``c`` (times ``gain``) is the chance overlap of two independent top-k draws from a typical
    segment's ``q``; with ``p k`` experts kept, ``(1 - p) k`` fresh draws meet the ``(1 - p) k``
    dropped ones, hence the square. A target below chance (the first layer) gives a negative
    ``p``: each previous expert is then excluded with probability ``-p``, so ``r = c (1 + p)``."""
    a = np.asarray(a, float).reshape(-1, 1)
    top_w = np.argsort(-pop, axis=1)[:, :w]
    ws = np.zeros_like(pop)
    np.put_along_axis(ws, top_w, 1.0 / w, axis=1)
    q = (1 - a) * pop + a * ws
    c = np.clip(gain * (q * inclusion(q, k)).sum(axis=1), 1e-9, 0.999)
    # c p^2 + (1 - 2c) p + (c - r) = 0, the root in [0, 1]
    b = 1 - 2 * c
    p = (-b + np.sqrt(np.maximum(b * b - 4 * c * (c - reuse), 0.0))) / (2 * c)
    return np.where(reuse < c, reuse / c - 1, np.clip(p, 0.0, 1.0))


def _segment_logq(pop: np.ndarray, w: int, a: np.ndarray, beta: float, rng) -> np.ndarray:
    L, E = pop.shape
    a = np.asarray(a, float).reshape(-1, 1)
    score = beta * np.log(pop) + rng.gumbel(size=(L, E))
    ws = np.zeros((L, E))
    np.put_along_axis(ws, np.argpartition(-score, w - 1, axis=1)[:, :w], 1.0 / w, axis=1)
    return np.log((1 - a) * pop + a * ws)


def generate(pop: np.ndarray, stick: np.ndarray, k: int, tokens: int, w: int, a: np.ndarray, beta: float,
             shift_rate: float, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Routing int16 [tokens, L, k] and the number of segments."""
    L, E = pop.shape
    rows = np.arange(L)[:, None]
    shifts = rng.random(tokens) < shift_rate
    shifts[0] = True
    out = np.empty((tokens, L, k), np.int16)
    prev = None
    for c0 in range(0, tokens, _CHUNK):
        n = min(_CHUNK, tokens - c0)
        gum = rng.gumbel(size=(n, L, E))
        u = rng.random((n, L, k))
        bonus = np.where(u < np.abs(stick)[None, :, None], np.where(stick < 0, -1e9, 1e9)[None, :, None], 0.0)
        for i in range(n):
            if shifts[c0 + i]:
                logq = _segment_logq(pop, w, a, beta, rng)
            score = logq + gum[i]
            forced = score.copy()
            if prev is not None:
                forced[rows, prev] += bonus[i]
            top = np.argpartition(-forced, k - 1, axis=1)[:, :k]
            order = np.argsort(-score[rows, top], axis=1)
            prev = np.take_along_axis(top, order, axis=1)
            out[c0 + i] = prev
    return out, int(shifts.sum())
