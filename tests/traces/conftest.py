"""Session fixtures of the trace tests (the expensive synthetic traces are built once)."""
from __future__ import annotations

import pytest

from traces.stats import analyse
from traces.synth import synthesize

MIXTRAL_LENGTHS = (83, 255, 168, 79)  # the four real Mixtral requests (shared/real-traces)


@pytest.fixture(scope="session")
def qwen_alpaca():
    """A 4096-token synthetic Qwen3-30B-A3B trace of the default workload, and its statistics."""
    trace = synthesize("qwen3_30b_a3b", "alpaca", 4096, seed=0)
    return trace, analyse(trace)


@pytest.fixture(scope="session")
def mixtral_set():
    """Four synthetic Mixtral requests shaped like the real set, and their pooled statistics."""
    traces = [synthesize("mixtral_8x7b", wl, n, seed=i)
              for i, (wl, n) in enumerate(zip(("humaneval", "humaneval", "gsm8k", "gsm8k"), MIXTRAL_LENGTHS))]
    return traces, analyse(traces)
