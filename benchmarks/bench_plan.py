"""Wall time of a typical ``python -m sim plan`` (the llmfit machine: Qwen3-30B-A3B Q4_K_M, RTX 2080
8 GB, quad-channel DDR4, PCIe 3.0, context 4096, every engine, 256 generated tokens per placement).

Usage: ``python benchmarks/bench_plan.py [--gen-tokens N] [--repeat R]``. Prints the number of
placements, the cold wall time (trace synthesis and profile included) and the warm ones. The target
is under 30 s on 2 cores, for the whole command (``time python -m sim plan ...`` adds Hydra's start).
"""
from __future__ import annotations

import argparse
import time

from sim.commands.plan import best_per_family
from sim.plan.enumerate import enumerate_all
from sim.plan.evaluate import Setting

DYNAMIC = ["moespac_ar", "hybrimoe", "ondemand_lru", "mixtral_offload"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen-tokens", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    hw = {"gpu": "rtx2080", "host": "hedt_ddr4_4ch", "link": "pcie3_x16"}
    for i in range(a.repeat):
        t = time.perf_counter()
        s = Setting(model="qwen3_30b_a3b", hardware=hw, quant="q4_k_m", context=4096, gen_tokens=a.gen_tokens)
        cands = enumerate_all(s, ["llama_cpp", "ktransformers", "dynamic"], DYNAMIC, [])
        wall = time.perf_counter() - t
        best = best_per_family(cands)[0]
        print(f"{'cold' if i == 0 else 'warm'}: {len(cands)} placements in {wall:.1f} s; "
              f"best {best.policy} {best.knob}={best.value} {best.tps:.1f} tok/s")


if __name__ == "__main__":
    main()
