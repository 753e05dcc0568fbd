"""Every registered policy as a fraction of the LP bound on one setting (default: the paper's).

    PYTHONPATH=. python scripts/bound_fractions.py [gen_tokens] [workload]

Each policy is compared with the bound of its own schedule (its gamma and acceptance draws) and
cost model; the table also gives the bound of the best decoding mode (the largest bound over AR
and every gamma the SD policies ran).
"""
from __future__ import annotations

import sys

from sim.bound.check import policies_vs_bound
from sim.policies import policy_names

if __name__ == "__main__":
    gen = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    workload = sys.argv[2] if len(sys.argv) > 2 else "gsm8k"
    cfg = dict(workload=workload, gen_tokens=gen, draft="qwen3_4b_q8_0", cache_ratio=0.17, gamma=8)
    got = policies_vs_bound(cfg, policy_names())
    rows = [(name, row["gamma"], row["tps"], b) for name, row, b in got]
    top = max(b for *_, b in rows)
    print(f"{'policy':<22} gamma  tok/s  bound(own schedule)  fraction  fraction of best-mode bound {top:.2f}")
    for name, g, tps, b in sorted(rows, key=lambda r: -r[2]):
        print(f"{name:<22} {g:5d} {tps:6.2f} {b:10.2f} {tps / b:18.3f} {tps / top:10.3f}")
