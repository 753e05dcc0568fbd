"""Result rows on disk: one Parquet file per output folder, written atomically.

Rows are appended by rewriting the file through :func:`traces.atomic.atomic_write_bytes` (temporary
file and rename), so an interrupted sweep never leaves a corrupt table; :func:`done_ids` lets a sweep
resume where it stopped, keyed on each row's ``run_id`` (the hash of every input, :mod:`sim.run.identity`).
A file that cannot be read raises :class:`ResultsError` naming it, in one line.
"""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from sim.machine.specs import ConfigError
from traces.atomic import atomic_write_bytes

REQUIRED = ("experiment", "policy", "model", "draft", "hardware", "workload", "cache_ratio", "gamma",
            "gen_tokens", "seed", "decode_s", "tps", "ttft_s", "mean_accepted", "hit_rate", "cpu_expert_share",
            "pcie_gb", "pcie_util", "gpu_busy", "cpu_busy", "bubble_s", "prefetch_precision",
            "prefetch_recall", "sim_wall_s")
KEY = ("experiment", "policy", "model", "draft", "hardware", "workload", "cache_ratio", "gamma", "seed")
RESULTS_FILE = "results.parquet"


class ResultsError(ConfigError):
    """A results file that cannot be read or resumed (the message names the file)."""


def read_table(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """One results file; an unreadable or foreign file raises :class:`ResultsError` naming it."""
    path = Path(path)
    if path.is_dir():
        raise ResultsError(f"{path}: is a folder, not a results file; remove it or use another out=")
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ResultsError(f"{path}: not a readable results file ({first[:160]}); use resume=false to "
                           "start over or another out=") from None
    missing = [c for c in (columns or ()) if c not in df.columns]
    if missing:
        raise ResultsError(f"{path}: lacks column(s) {missing} (written by an older version?); use "
                           "resume=false to start over or another out=")
    return df


def read_results(path: str | Path) -> pd.DataFrame:
    """All rows of a results file, or of every ``results.parquet`` below a folder."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob(RESULTS_FILE) if p.is_file())
    if not files:
        raise FileNotFoundError(f"{path}: no {RESULTS_FILE} found")
    return pd.concat([read_table(f) for f in files], ignore_index=True)


def append_rows(path: str | Path, rows: list[dict], replace: bool = True) -> Path:
    """Append ``rows`` to the Parquet file at ``path`` (atomic rewrite); with ``replace`` an older row
    with the same ``run_id`` is dropped (a rerun of the same inputs replaces, never duplicates)."""
    missing = [k for k in REQUIRED if rows and k not in rows[0]]
    if missing:
        raise ValueError(f"result rows lack required columns {missing}")
    path = Path(path)
    new = pd.DataFrame(rows)
    if path.exists():
        old = read_table(path)
        if replace and "run_id" in old.columns and "run_id" in new.columns:
            old = old[~old["run_id"].isin(set(new["run_id"]))]
        new = pd.concat([old, new], ignore_index=True)

    def write(f):
        buf = io.BytesIO()
        new.to_parquet(buf, index=False)
        f.write(buf.getvalue())

    return atomic_write_bytes(path, write)


def done_ids(path: str | Path) -> set:
    """``run_id`` of the rows already in ``path`` (empty if it does not exist)."""
    path = Path(path)
    if not path.exists():
        return set()
    return set(read_table(path, columns=["run_id", *REQUIRED])["run_id"])
