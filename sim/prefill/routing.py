"""The prompt's routing, per micro-batch: which experts each layer's micro-batch touches, with how many tokens.

The prompt is a separate draw of the synthetic generator (:func:`traces.synth.synthesize`) for the
run's model class and workload, with a seed disjoint from the decode trace's (the prompt's tokens
are other tokens than the answer's, from the same routing process). Traces carry no prefill record
(schema v1), so a replayed trace's prompt is drawn the same way for its model's routing shape.
"""
from __future__ import annotations

import numpy as np

from sim.protocol import routing_counts

PREFILL_SEED_OFFSET = 104729   # prompt seeds never coincide with decode or profile seeds


def prompt_routing(model: str, workload: str, prompt_tokens: int, seed: int, shape: tuple | None) -> np.ndarray:
    """Top-k expert ids of every prompt token, int16 ``[P, L, k]`` (memoised with the decode traces)."""
    from sim.run.workload import synthetic_trace

    return synthetic_trace(model, workload, int(prompt_tokens), int(seed) + PREFILL_SEED_OFFSET, shape).experts


def ubatch_bounds(prompt_tokens: int, ubatch: int) -> list[tuple[int, int]]:
    """The prompt's micro-batches as ``(start, end)`` token positions (the last may be short)."""
    return [(s, min(prompt_tokens, s + ubatch)) for s in range(0, prompt_tokens, ubatch)]


def ubatch_counts(experts: np.ndarray, start: int, end: int, n_experts: int) -> np.ndarray:
    """Per-(layer, expert) token counts of the micro-batch ``experts[start:end]`` (int ``[L, E]``)."""
    return routing_counts(experts[start:end], experts.shape[1], n_experts).astype(np.int64)
