"""Counters an executor fills while it runs, and the derived numbers of a result row."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Counters:
    """Raw tallies of one run (times in simulated seconds, counts of (layer, expert) executions)."""

    decode_s: float = 0.0
    tokens: int = 0
    steps: int = 0
    requests: int = 0          # (step, layer, expert) triples with at least one token
    hits: int = 0              # ... resident when the layer's router ran
    gpu_execs: int = 0
    cpu_execs: int = 0
    demand_fetches: int = 0
    streams: int = 0
    prefetches: int = 0        # prefetch transfers landed
    prefetch_useful: int = 0   # ... requested before being evicted
    fallbacks: int = 0         # demand fetches that found no slot and ran on the CPU
    evictions: int = 0
    pcie_bytes: float = 0.0
    pcie_busy_s: float = 0.0
    gpu_busy_s: float = 0.0
    cpu_busy_s: float = 0.0
    bubble_s: float = 0.0
    draft_s: float = 0.0
    step_fixed_s: float = 0.0
    layer_s: list = field(default_factory=list)   # per (step, layer) wall time
    step_s: list = field(default_factory=list)    # per step wall time

    def row(self) -> dict:
        """The derived result-row columns."""
        d = max(self.decode_s, 1e-30)
        execs = max(1, self.gpu_execs + self.cpu_execs)
        needed = self.prefetch_useful + (self.requests - self.hits)
        steps = np.asarray(self.step_s) if self.step_s else np.zeros(1)
        return {
            "decode_s": self.decode_s,
            "tps": self.tokens / d,
            "hit_rate": self.hits / max(1, self.requests),
            "cpu_expert_share": self.cpu_execs / execs,
            "pcie_gb": self.pcie_bytes / 1e9,
            "pcie_util": self.pcie_busy_s / d,
            "gpu_busy": self.gpu_busy_s / d,
            "cpu_busy": self.cpu_busy_s / d,
            "bubble_s": self.bubble_s,
            "prefetch_precision": self.prefetch_useful / self.prefetches if self.prefetches else float("nan"),
            "prefetch_recall": self.prefetch_useful / needed if needed else float("nan"),
            "n_steps": self.steps,
            "n_transfers": self.demand_fetches + self.prefetches + self.streams,
            "demand_fetches": self.demand_fetches,
            "prefetches": self.prefetches,
            "evictions": self.evictions,
            "fallbacks": self.fallbacks,
            "step_ms_mean": 1e3 * float(steps.mean()),
            "step_ms_p50": 1e3 * float(np.percentile(steps, 50)),
            "step_ms_p90": 1e3 * float(np.percentile(steps, 90)),
            "step_ms_p99": 1e3 * float(np.percentile(steps, 99)),
        }
