"""Simulator speed: a 512- and a 4096-token SD run (gamma=8, 48 layers) and the default sweep.

Targets on a 2-core machine: 512 tokens under 0.5 s of wall time on one core, 4096 tokens under
4 s, the default sweep at cache_ratio=0.17 under 60 s on 2 cores. Prints events per second and
simulated tokens per wall second.

    python benchmarks/bench_sim.py [--policy moespac] [--sweep]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

from sim.runner import run_one, synthetic_trace


def bench(policy: str, tokens: int) -> None:
    synthetic_trace("qwen3_30b_a3b", "gsm8k", tokens + 9, 0)  # synthesis is benchmarked elsewhere
    t = time.perf_counter()
    res = run_one(policy=policy, workload="gsm8k", gen_tokens=tokens, gamma=8)
    wall = time.perf_counter() - t
    events = next(res.engine.env._eid)  # SimPy's running event id counter
    print(f"{policy:>14} {tokens:5d} tokens: wall {wall:6.3f} s, {events / wall / 1e3:7.1f} k events/s, "
          f"{tokens / wall:8.0f} simulated tokens/s (simulated TPS {res.row['tps']:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--policy", action="append", help="policies to time (default: llamacpp_sd, moespac)")
    ap.add_argument("--sweep", action="store_true", help="also time the default sweep (2 jobs)")
    args = ap.parse_args()
    for policy in args.policy or ["llamacpp_sd", "moespac"]:
        for tokens in (512, 4096):
            bench(policy, tokens)
    if args.sweep:
        with tempfile.TemporaryDirectory() as out:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "sim", "sweep", "cache_ratio=0.17", f"out={out}", "n_jobs=2"],
                           check=True, capture_output=True)
            print(f"default sweep at cache_ratio=0.17 (2 jobs): {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
