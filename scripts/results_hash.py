"""Hash result rows and compare two result files row by row (all columns but wall time).

    python scripts/results_hash.py BASE.parquet NEW.parquet     # per-row diff, exit 1 if any
    python scripts/results_hash.py FILE.parquet                 # one hash per row + file hash

A row is identified by (experiment, policy, workload, cache_ratio, hardware, gamma, seed); its
hash covers every column of the base file except ``sim_wall_s``, values as their exact ``repr``
(floats bit for bit, NaN equal to NaN).
"""
from __future__ import annotations

import hashlib
import sys

import pandas as pd

SKIP = {"sim_wall_s"}
KEY = ["experiment", "policy", "workload", "cache_ratio", "hardware", "gamma", "seed"]


def _cell(v) -> str:
    if isinstance(v, float):
        return float.hex(v) if v == v else "nan"
    return repr(v)


def row_hashes(df: pd.DataFrame, columns: list[str]) -> dict:
    """``{key: (sha256, row dict)}`` over ``columns``."""
    out = {}
    for rec in df.to_dict("records"):
        key = tuple(rec[k] for k in KEY if k in rec)
        text = "|".join(f"{c}={_cell(rec.get(c))}" for c in columns)
        out[key] = (hashlib.sha256(text.encode()).hexdigest(), rec)
    return out


def main(argv: list[str]) -> int:
    base = pd.read_parquet(argv[0])
    cols = sorted(c for c in base.columns if c not in SKIP)
    hb = row_hashes(base, cols)
    if len(argv) == 1:
        for k, (h, _) in sorted(hb.items(), key=str):
            print(h[:16], k)
        print("file", hashlib.sha256("".join(sorted(h for h, _ in hb.values())).encode()).hexdigest())
        return 0
    hn = row_hashes(pd.read_parquet(argv[1]), cols)
    missing = sorted(set(hb) - set(hn), key=str)
    differ = 0
    for k in sorted(set(hb) & set(hn), key=str):
        if hb[k][0] != hn[k][0]:
            differ += 1
            a, b = hb[k][1], hn[k][1]
            diffs = [f"{c}: {a.get(c)!r} -> {b.get(c)!r}" for c in cols if _cell(a.get(c)) != _cell(b.get(c))]
            print(k, "; ".join(diffs))
    print(f"rows: base {len(hb)}, new {len(hn)}, identical {len(set(hb) & set(hn)) - differ}, "
          f"differ {differ}, missing {len(missing)} {missing[:5]}")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
