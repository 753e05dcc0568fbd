"""Every registered policy against the LP bound on seeded random configurations of three models.

    PYTHONPATH=. python scripts/bound_check.py N_CONFIGS [gen_tokens]

Prints one line per configuration and the totals: checks, violations (must be 0) and the
distribution of policy TPS as a fraction of the bound.
"""
from __future__ import annotations

import sys

import numpy as np

from sim.bound.check import policies_vs_bound
from sim.policies import policy_names
from tests.sim.test_bound import _configs

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    gen = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    checks, bad, frac = 0, [], []
    for cfg in _configs(n, seed=1):
        cfg["gen_tokens"] = gen
        got = policies_vs_bound(cfg, policy_names())
        for name, row, bound in got:
            checks += 1
            frac.append(row["tps"] / bound)
            if row["tps"] > bound * (1 + 1e-6):
                bad.append((cfg, name))
        print(cfg["model"], cfg["hardware"], cfg["workload"], f"ratio {cfg['cache_ratio']:.3f}", f"gamma {cfg['gamma']}",
              f"best fraction {max(frac[-len(got):]):.3f}", flush=True)
    f = np.array(frac)
    print(f"configs {n}, checks {checks}, violations {len(bad)}, fraction of bound: "
          f"max {f.max():.3f} median {np.median(f):.3f} min {f.min():.4f}")
