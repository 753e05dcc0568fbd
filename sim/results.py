"""Result rows on disk: one Parquet file per output folder, written atomically.

Rows are appended by rewriting the file through a temporary file and a rename, so an interrupted
sweep never leaves a corrupt table; :func:`done_keys` lets a sweep resume where it stopped.
"""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from traces.io import atomic_write_bytes

REQUIRED = ("experiment", "policy", "model", "draft", "hardware", "workload", "cache_ratio", "gamma",
            "gen_tokens", "seed", "decode_s", "tps", "ttft_s", "mean_accepted", "hit_rate", "cpu_expert_share",
            "pcie_gb", "pcie_util", "gpu_busy", "cpu_busy", "bubble_s", "prefetch_precision",
            "prefetch_recall", "sim_wall_s")
KEY = ("experiment", "policy", "model", "draft", "hardware", "workload", "cache_ratio", "gamma", "seed")
RESULTS_FILE = "results.parquet"


def read_results(path: str | Path) -> pd.DataFrame:
    """All rows of a results file, or of every ``results.parquet`` below a folder."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.rglob(RESULTS_FILE))
    if not files:
        raise FileNotFoundError(f"{path}: no {RESULTS_FILE} found")
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def append_rows(path: str | Path, rows: list[dict]) -> Path:
    """Append ``rows`` to the Parquet file at ``path`` (atomic rewrite)."""
    missing = [k for k in REQUIRED if rows and k not in rows[0]]
    if missing:
        raise ValueError(f"result rows lack required columns {missing}")
    path = Path(path)
    new = pd.DataFrame(rows)
    if path.exists():
        new = pd.concat([pd.read_parquet(path), new], ignore_index=True)

    def write(f):
        buf = io.BytesIO()
        new.to_parquet(buf, index=False)
        f.write(buf.getvalue())

    return atomic_write_bytes(path, write)


def row_key(row: dict) -> tuple:
    """The identity of a run (what a resumed sweep skips when already present)."""
    return tuple(round(row[k], 9) if isinstance(row[k], float) else row[k] for k in KEY)


def done_keys(path: str | Path) -> set:
    """Keys of the rows already in ``path`` (empty if it does not exist)."""
    path = Path(path)
    if not path.exists():
        return set()
    df = pd.read_parquet(path, columns=list(KEY))
    return {row_key(r) for r in df.to_dict("records")}
