"""SIGKILL a sweep at three row counts, resume it, and compare with an uninterrupted run.

    python scripts/kill_resume.py OUT_DIR [sweep overrides ...]     # default: experiment=sweep_gen_length

Prints the row counts at each kill and whether the resumed results equal the uninterrupted ones in
every column but ``sim_wall_s`` (exit 1 if not). Run with ``PYTHONPATH`` set to the checkout.
"""
import os
import signal
import subprocess
import sys
import time

import pandas as pd


def rows(path: str) -> int:
    try:
        return len(pd.read_parquet(path))
    except Exception:  # absent, or being replaced
        return 0


def main(out: str, overrides: list[str], kills=(2, 7, 13)) -> int:
    args = [sys.executable, "-m", "sim", "sweep", *(overrides or ["experiment=sweep_gen_length"]), "n_jobs=1"]
    killed, whole = f"{out}/killed", f"{out}/whole"
    for target in kills:
        p = subprocess.Popen(args + [f"out={killed}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while rows(f"{killed}/results.parquet") < target and p.poll() is None:
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        print(f"SIGKILL with {rows(f'{killed}/results.parquet')} rows written", flush=True)
    for d in (killed, whole):
        t = time.time()
        r = subprocess.run(args + [f"out={d}"], capture_output=True, text=True)
        print(f"{'resumed' if d == killed else 'uninterrupted'}: exit {r.returncode}, {time.time() - t:.1f} s")
    a, b = (pd.read_parquet(f"{d}/results.parquet").sort_values("run_id").reset_index(drop=True)
            for d in (killed, whole))
    same = a.drop(columns="sim_wall_s").equals(b.drop(columns="sim_wall_s"))
    print(f"{len(a)} vs {len(b)} rows; equal in every column but sim_wall_s: {same}; temporary files left: "
          f"{[f for f in os.listdir(killed) if f.endswith('.tmp')]}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
