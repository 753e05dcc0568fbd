"""A hash over every result row, for checking that a change leaves the numbers bit-identical.

Rows are sorted by their identity columns; every column of the reference file (or of the first
file) except wall time is hashed, floats by their exact bits (``float.hex``), so any change in any
digit of any row shows. Exit status 1 when the files' hashes differ.

    python scripts/results_hash.py NEW.parquet [REFERENCE.parquet]
"""
from __future__ import annotations

import argparse
import hashlib
import sys

import pandas as pd

SKIP = ("sim_wall_s",)                      # wall time differs between any two runs
KEY = ("experiment", "policy", "model", "draft", "hardware", "workload", "cache_ratio", "gamma", "seed")


def _cell(v) -> str:
    if isinstance(v, float):
        return "nan" if v != v else float(v).hex()
    if hasattr(v, "tolist"):                # numpy scalars and arrays (per-layer columns)
        v = v.tolist()
    if isinstance(v, list):
        return "[" + ",".join(map(_cell, v)) + "]"
    return repr(v)


def results_hash(df: pd.DataFrame, columns: list[str]) -> str:
    """SHA-256 over ``columns`` of every row of ``df``, rows in identity order."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise SystemExit(f"results lack columns {missing}")
    df = df.sort_values([k for k in KEY if k in df.columns], kind="mergesort")
    h = hashlib.sha256()
    h.update(repr(columns).encode())
    for row in df[columns].itertuples(index=False):
        h.update("\x1f".join(map(_cell, row)).encode() + b"\n")
    return h.hexdigest()


def first_difference(new: pd.DataFrame, ref: pd.DataFrame, columns: list[str]) -> str:
    """The first (row key, column) whose values differ, for a readable failure."""
    keys = [k for k in KEY if k in ref.columns]
    m = ref.merge(new, on=keys, how="outer", suffixes=("_ref", "_new"), indicator=True)
    if (m["_merge"] != "both").any():
        return f"{int((m['_merge'] != 'both').sum())} rows present in only one file"
    for c in (c for c in columns if c not in keys):
        a, b = m[f"{c}_ref"], m[f"{c}_new"]
        bad = a.map(_cell) != b.map(_cell)         # bit-exact, NaN equal to NaN, arrays too
        if bad.any():
            i = bad.idxmax()
            return f"{c} differs at {dict(m.loc[i, keys])}: {a[i]!r} vs {b[i]!r}"
    return "no cell differs"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("new")
    ap.add_argument("reference", nargs="?")
    args = ap.parse_args()
    new = pd.read_parquet(args.new)
    ref = pd.read_parquet(args.reference) if args.reference else new
    columns = [c for c in ref.columns if c not in SKIP]
    h_new = results_hash(new, columns)
    print(f"{h_new}  {args.new} ({len(new)} rows, {len(columns)} columns)")
    if not args.reference:
        return 0
    h_ref = results_hash(ref, columns)
    print(f"{h_ref}  {args.reference} ({len(ref)} rows)")
    if h_new == h_ref:
        print("identical")
        return 0
    print("DIFFERENT: " + first_difference(new, ref, columns))
    return 1


if __name__ == "__main__":
    sys.exit(main())
