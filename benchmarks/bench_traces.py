"""Speed of the trace tools: synthesizing and analysing a 4096-token Qwen3-30B-A3B trace.

Target on a 2-core machine: under 2 s of wall time each. Wall time suffers when other processes
share the cores, so CPU time (this process) is printed too.

    python benchmarks/bench_traces.py [--tokens 4096] [--repeat 3] [--workload alpaca]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from traces.stats import analyse  # noqa: E402
from traces.synth import synthesize  # noqa: E402

TARGET_S = 2.0


def timed(fn, repeat: int):
    """Best wall and CPU seconds over ``repeat`` calls, and the last result."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best_wall, best_cpu, out


def main() -> None:
    """Time both steps and print one line each with the target."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workload", default="alpaca")
    a = ap.parse_args()
    wall, cpu, trace = timed(lambda: synthesize("qwen3_30b_a3b", a.workload, a.tokens, seed=0), a.repeat)
    print(f"synthesize qwen3_30b_a3b/{a.workload} {a.tokens} tokens: {wall:.3f} s wall, {cpu:.3f} s CPU "
          f"(target < {TARGET_S} s) {'ok' if wall < TARGET_S else 'SLOW'}")
    wall, cpu, st = timed(lambda: analyse(trace), a.repeat)
    print(f"analyse (entropy, reuse, windows, LRU + Belady at {list(st['lru_hit'])} slots): "
          f"{wall:.3f} s wall, {cpu:.3f} s CPU (target < {TARGET_S} s) {'ok' if wall < TARGET_S else 'SLOW'}")
    print(f"  reuse {st['reuse']:.3f}, LRU {', '.join(f'{c}:{v:.3f}' for c, v in st['lru_hit'].items())}, "
          f"Belady {', '.join(f'{c}:{v:.3f}' for c, v in st['belady_hit'].items())}")


if __name__ == "__main__":
    main()
