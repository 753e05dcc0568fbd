"""The generative routing model behind :mod:`traces.synth` (numpy only, vectorised over layers).

Per layer ``l`` the model holds a persistent popularity ``pop_l``: Zipf shares over the ranks,
assigned to the experts by a fixed random permutation. The sequence is cut into
segments (domain shifts) at random tokens; each segment draws, per layer, a working set ``W_l`` of
``w`` experts from ``pop_l ** beta`` and routes fresh draws from
``q = (1 - a_l) * pop_l + a_l * uniform(W_l)``. Token ``t`` keeps each expert of token ``t-1`` with
probability ``stick_l`` (or, where ``stick_l`` is negative, excludes it with probability
``-stick_l``) and fills the remaining slots with draws without replacement from ``q`` (Gumbel
top-k). Slots are ordered kept experts first, then by the perturbed score ``log q + Gumbel``, like
a gate ordering its top-k (a kept expert tends to keep a high gate weight).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK = 256
N_PROBE = 8  # working sets sampled to estimate long-run shares and chance overlap


def inclusion(v: np.ndarray, n, iters: int = 14) -> np.ndarray:
    """Approximate probability that each item is in an ``n``-subset drawn without replacement with
    weights ``v`` (last axis): ``1 - exp(-lam * v)``, ``lam`` set so each row sums to ``n`` (a
    number, or an array broadcasting against ``v`` with a last axis of 1; ``n`` < items).

    ``lam`` is found by Newton's method from ``lam = n``: the row sum is concave and increasing in
    ``lam`` and lies below ``n`` there, so the iterates rise monotonically to the root."""
    v = v / v.sum(axis=-1, keepdims=True)
    n = np.broadcast_to(np.asarray(n, float), v.shape[:-1] + (1,))
    lam = n.copy()
    for _ in range(iters):
        e = np.exp(-lam * v)
        lam = lam + (n - (1 - e).sum(-1, keepdims=True)) / (v * e).sum(-1, keepdims=True)
    return 1 - np.exp(-lam * v)


def popularity(exponent: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Zipf popularity [L, E]: expert ``perm[l, r]`` weighs ``(r + 1) ** -exponent_l``."""
    L, E = perm.shape
    w = np.arange(1, E + 1)[None, :] ** -np.asarray(exponent, float)[:, None]
    pop = np.empty((L, E))
    np.put_along_axis(pop, perm, w / w.sum(axis=1, keepdims=True), axis=1)
    return pop


def norm_entropy(p: np.ndarray) -> np.ndarray:
    """Normalized entropy of each row (last axis) of a probability array."""
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)
    return h / np.log(p.shape[-1])


def segment_mix(pop: np.ndarray, noise: np.ndarray, w: int, a: np.ndarray, beta: float) -> np.ndarray:
    """Segment routing distributions ``q`` for working sets chosen by Gumbel ``noise`` [..., L, E]."""
    score = beta * np.log(pop) + noise
    ws = np.zeros(noise.shape)
    np.put_along_axis(ws, np.argpartition(-score, w - 1, axis=-1)[..., :w], 1.0 / w, axis=-1)
    a = np.asarray(a, float)[:, None]
    return (1 - a) * pop + a * ws


def solve_exponent(target: np.ndarray, perm: np.ndarray, k: int, w: int, a: np.ndarray, beta: float,
                   noise: np.ndarray) -> np.ndarray:
    """Per-layer Zipf exponents whose long-run expert shares (mean over the probe working sets
    ``noise`` of top-k inclusion / k) have the target normalized entropy (bisection)."""
    lo, hi = np.zeros(len(target)), np.full(len(target), 8.0)
    for _ in range(24):
        mid = (lo + hi) / 2
        q = segment_mix(popularity(mid, perm), noise, w, a, beta)
        shares = inclusion(q, k).mean(axis=0) / k
        too_flat = norm_entropy(shares) > target
        lo, hi = np.where(too_flat, mid, lo), np.where(too_flat, hi, mid)
    return (lo + hi) / 2


def stickiness(reuse: np.ndarray, q: np.ndarray, k: int, gain: float = 1.0) -> np.ndarray:
    """Per-layer keep probability ``p`` giving the target next-token reuse, from the probe segments'
    routing distributions ``q`` [N, L, E].

    With ``p k`` experts kept, the ``(1 - p) k`` fresh draws meet a dropped expert ``i`` with its
    inclusion probability in a draw of that many, so ``r(p) = p + (1 - p) * gain *
    sum(pi_k * pi_m) / k`` (``pi_n``: inclusion in an n-draw, ``m = (1 - p) k``), solved by bisection.
    A target below chance (``r(0)``) gives a negative ``p``: each previous expert is then excluded
    with probability ``-p``, so ``r = r(0) (1 + p)``."""
    pik = inclusion(q, k)

    def r_of(p):
        """Expected reuse per layer at keep probability ``p``."""
        m = np.maximum((1 - p) * k, 1e-6)[None, :, None]
        return p + (1 - p) * gain * (pik * inclusion(q, m)).sum(-1).mean(0) / k

    chance = r_of(np.zeros(len(reuse)))
    lo, hi = np.zeros(len(reuse)), np.ones(len(reuse))
    for _ in range(20):
        mid = (lo + hi) / 2
        low = r_of(mid) < reuse
        lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
    return np.where(reuse < chance, reuse / np.maximum(chance, 1e-9) - 1, (lo + hi) / 2)


@dataclass(frozen=True)
class Draw:
    """What :func:`generate` draws: ``tokens`` positions of top-``k`` routing per layer, from the
    working-set segment mixture (``w`` sets weighted ``a``, sharpness ``beta``) that shifts to a new
    segment with probability ``shift_rate`` per token."""

    k: int
    tokens: int
    w: int
    a: np.ndarray
    beta: float
    shift_rate: float


def generate(pop: np.ndarray, stick: np.ndarray, draw: Draw, rng: np.random.Generator,
             alt_rng: np.random.Generator | None = None, progress=None) -> tuple[np.ndarray, int, np.ndarray | None]:
    """Routing int16 [tokens, L, k], the number of segments, and (with ``alt_rng``) the routing of
    an alternative token at every position: drawn like the real token, from the same segment and
    the same previous token, with independent noise (what a rejected draft there would route to).

    Random numbers are drawn in whole chunks of tokens, so a shorter trace with the same generator
    state is an exact prefix of a longer one; the alternative rows use their own generator and never
    change the real ones. ``progress(n)`` (optional) is called after each chunk of ``n`` tokens."""
    k, tokens, w, a, beta, shift_rate = draw.k, draw.tokens, draw.w, draw.a, draw.beta, draw.shift_rate
    L, E = pop.shape
    rows = np.arange(L)[:, None]
    sign = np.where(stick < 0, -1e9, 1e9)[None, :, None]
    out = np.empty((tokens, L, k), np.int16)
    alt = np.empty((tokens, L, k), np.int16) if alt_rng is not None else None
    prev, segments = None, 0
    for c0 in range(0, tokens, _CHUNK):
        shifts = rng.random(_CHUNK) < shift_rate
        # Gumbel noise as -log(Exp(1)), in float32 (numpy's own Gumbel sampler is several times slower)
        gum = -np.log(np.maximum(rng.standard_exponential((_CHUNK, L, E), dtype=np.float32), 1e-30))
        bonus = np.where(rng.random((_CHUNK, L, k)) < np.abs(stick)[None, :, None], sign, 0.0)
        if alt is not None:
            gum_alt = -np.log(np.maximum(alt_rng.standard_exponential((_CHUNK, L, E), dtype=np.float32), 1e-30))
            bonus_alt = np.where(alt_rng.random((_CHUNK, L, k)) < np.abs(stick)[None, :, None], sign, 0.0)
        for i in range(min(_CHUNK, tokens - c0)):
            if shifts[i] or prev is None:
                logq = np.log(segment_mix(pop, rng.gumbel(size=(L, E)), w, a, beta)).astype(np.float32)
                segments += 1
            if alt is not None:
                alt[c0 + i] = _draw(logq + gum_alt[i], prev, bonus_alt[i], rows, k)
            prev = _draw(logq + gum[i], prev, bonus[i], rows, k)
            out[c0 + i] = prev
        if progress is not None:
            progress(min(_CHUNK, tokens - c0))
    return out, segments, alt


def _draw(score: np.ndarray, prev: np.ndarray | None, bonus: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """One token's top-k per layer: perturbed scores, previous experts pushed up (or down) by ``bonus``."""
    forced = score.copy()
    if prev is not None:
        forced[rows, prev] += bonus
    top = np.argpartition(-forced, k - 1, axis=1)[:, :k]
    return np.take_along_axis(top, np.argsort(-forced[rows, top], axis=1), axis=1)
