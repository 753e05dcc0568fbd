"""Every registered policy against the LP bound on seeded random configurations of three models.

    PYTHONPATH=. python scripts/bound_check.py N_CONFIGS [gen_tokens]

Prints one line per configuration and the totals: checks, violations (must be 0) and the
distribution of policy TPS as a fraction of the bound.
"""
from __future__ import annotations

import sys

import numpy as np

from sim.bound import decode_bound
from sim.policies import policy_names
from sim.runner import run_one
from tests.sim.test_bound import _configs

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    gen = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    checks, bad, frac = 0, [], []
    for cfg in _configs(n, seed=1):
        cfg["gen_tokens"] = gen
        memo = {}
        for name in policy_names():
            res = run_one(policy=name, **cfg)
            e = res.engine
            key = (name if e.sched.online else e.sched.gamma, e.cost.cpu_scale)
            if key not in memo:
                memo[key] = decode_bound(e.cost, e.sched, e.ctx.n_slots, 256).tps
            checks += 1
            frac.append(res.row["tps"] / memo[key])
            if res.row["tps"] > memo[key] * (1 + 1e-6):
                bad.append((cfg, name))
        print(cfg["model"], cfg["hardware"], cfg["workload"], f"ratio {cfg['cache_ratio']:.3f}", f"gamma {cfg['gamma']}",
              f"best fraction {max(frac[-len(policy_names()):]):.3f}", flush=True)
    f = np.array(frac)
    print(f"configs {n}, checks {checks}, violations {len(bad)}, fraction of bound: "
          f"max {f.max():.3f} median {np.median(f):.3f} min {f.min():.4f}")
