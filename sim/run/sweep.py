"""Sweeps: expand an experiment into runs, execute them (in parallel, resumable), tabulate TPS."""
from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from sim.machine.specs import ConfigError
from sim.paths import preset_names
from sim.run.results import RESULTS_FILE, append_rows, done_ids, read_table
from sim.run.user_input import RULES, check
from sim.run.spec import FLAT_KEYS, RunSpec

AXES = tuple(k for k in FLAT_KEYS if k not in ("policy", "policy_args", "overlap", "workload", "trace", "experiment",
                                             "timeline", "table_tokens"))   # what an experiment's grid may vary


def expand(base: dict, policies, workloads: list, grid: dict) -> list[dict]:
    """The run arguments of every (grid point, workload, policy); dotted grid keys patch a spec."""
    from sim.policies.registry import ALIASES

    valid_p, valid_w = preset_names("policy"), preset_names("workload")
    policies = valid_p if policies in (None, "all") else [policies] if isinstance(policies, str) else list(policies)
    workloads = [workloads] if isinstance(workloads, str) else list(workloads)
    for what, names in (("policies", policies), ("workloads", workloads)):
        if not names:
            raise ConfigError(f"experiment.{what}: the list is empty; give at least one name"
                              + (" (or all)" if what == "policies" else ""))
    valid_p = valid_p + list(ALIASES)   # old names of the heuristic oracles
    for name in policies:
        if name not in valid_p:
            raise ConfigError(f"unknown policy {name!r}; valid: {', '.join(valid_p)}")
    for name in workloads:
        if name not in valid_w:
            raise ConfigError(f"unknown workload {name!r}; valid: {', '.join(valid_w)}")
    for key in grid:
        if key.split(".")[0] not in AXES:
            raise ConfigError(f"experiment.grid: unknown axis {key!r}; valid: {', '.join(AXES)} "
                              "(or hardware.<field>, model.<field>)")
    for key, values in grid.items():
        if not isinstance(values, (list, tuple)) or not values:
            raise ConfigError(f"experiment.grid.{key}: must be a non-empty list of values, got {values!r}")
        for v in values:
            if key in RULES:
                check(f"experiment.grid.{key}", v, RULES[key])
    runs = []
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)) if keys else [()]:
        point = dict(base)
        for k, v in zip(keys, values):
            _apply(point, k, v)
        for w in workloads:
            for p in policies:
                runs.append(dict(point, workload=w, policy=p))
    return runs


def _apply(point: dict, key: str, value) -> None:
    if "." not in key:
        point[key] = value
        return
    group, field = key.split(".", 1)
    spec = dict(point[group]) if isinstance(point[group], dict) else _load(group, point[group])
    spec[field] = value
    spec["name"] = f"{spec['name']}[{field}={value}]"
    point[group] = spec


def _load(group: str, name: str) -> dict:
    from sim.machine.specs import load_preset

    return load_preset(group, name)


def _run(args: dict) -> dict:
    from sim.run.runner import run_one

    return run_one(RunSpec.of(**args)).row


def run_ids(runs: list[dict]) -> list[str]:
    """The ``run_id`` each run will have, every run resolved (so a bad point fails before any run)."""
    from sim.run.identity import run_id
    from sim.run.resolve import resolve

    return [run_id(resolve(RunSpec.of(**r)).identity) for r in runs]


def execute(runs: list[dict], out_dir: Path, n_jobs: int = 1, resume: bool = True, backend: str = "loky",
            address: str | None = None, ids: list[str] | None = None) -> pd.DataFrame:
    """Run everything whose ``run_id`` is not yet in ``out_dir/results.parquet``, appending each row as
    it finishes; returns this sweep's rows (the caller holds the folder's writer lock).

    ``backend``/``address``: where the runs execute (:func:`sim.run.parallel.run_all`); ``ids``: the
    runs' :func:`run_ids` when the caller resolved them already."""
    from sim.run.parallel import run_all

    path = Path(out_dir) / RESULTS_FILE
    ids = run_ids(runs) if ids is None else ids
    if not resume and path.exists():
        path.unlink()
    done = done_ids(path)
    todo = [r for r, i in zip(runs, ids) if i not in done]
    bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc="runs", unit="run")
    expected = set(ids)
    for row in run_all(_run, todo, n_jobs, backend, address):
        _check_identity(row, expected)
        append_rows(path, [row])
        bar.update()
    bar.close()
    df = read_table(path)
    df = df[df["run_id"].isin(set(ids))]
    return df.drop_duplicates("run_id", keep="last").reset_index(drop=True)


def _check_identity(row: dict, expected: set) -> None:
    """A row computed elsewhere (a Ray node) must have the identity this checkout gave its run: a
    node running other code (another commit, uncommitted changes) would write rows that resume and
    analysis cannot match, so the sweep stops before writing it, naming both code versions."""
    if row["run_id"] in expected:
        return
    from sim.run.identity import code_version

    raise RuntimeError(f"a worker returned run_id {row['run_id']} for policy={row.get('policy')} "
                       f"workload={row.get('workload')}, which this sweep did not ask for: its code_version "
                       f"{row.get('code_version')!r} differs from this checkout's {code_version()!r}; install "
                       "the same commit on every node")
