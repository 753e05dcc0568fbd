"""Sweeps: expand an experiment into runs, execute them (in parallel, resumable), tabulate TPS."""
from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from sim.config import ConfigError
from sim.paths import preset_names
from sim.results import RESULTS_FILE, append_rows, done_keys, row_key

AXES = ("cache_ratio", "gamma", "gen_tokens", "seed", "hardware", "model", "draft", "acceptance", "runtime", "quant",
        "quant_dense", "slots_per_layer", "vram_budget_gib")


def expand(base: dict, policies, workloads: list, grid: dict) -> list[dict]:
    """The run arguments of every (grid point, workload, policy); dotted grid keys patch a spec."""
    from sim.policies.registry import ALIASES

    valid_p, valid_w = preset_names("policy"), preset_names("workload")
    policies = valid_p if policies in (None, "all") else list(policies)
    valid_p = valid_p + list(ALIASES)
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
    from sim.config import load_preset

    return load_preset(group, name)


def _run(args: dict) -> dict:
    from sim.runner import run_one

    return run_one(**args).row


def execute(runs: list[dict], out_dir: Path, n_jobs: int = 1, resume: bool = True) -> pd.DataFrame:
    """Run everything not yet in ``out_dir/results.parquet``, appending each row as it finishes."""
    path = Path(out_dir) / RESULTS_FILE
    done = done_keys(path) if resume else set()
    todo = [r for r in runs if _key(r) not in done]
    if not resume and path.exists():
        path.unlink()
    bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc="runs", unit="run")
    if n_jobs == 1 or len(todo) <= 1:
        results = map(_run, todo)
    else:
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=n_jobs, return_as="generator_unordered")(delayed(_run)(r) for r in todo)
    for row in results:
        append_rows(path, [row])
        bar.update()
    bar.close()
    keys = {_key(r) for r in runs}
    df = pd.read_parquet(path)
    return df[[row_key(r) in keys for r in df.to_dict("records")]]


def _key(args: dict) -> tuple:
    """The result-row key a run will produce (gamma is 0 for autoregressive policies)."""
    from sim.policies.registry import make_policy

    spec = make_policy(args["policy"])
    name = lambda v: v["name"] if isinstance(v, dict) else v  # noqa: E731
    row = {"experiment": args["experiment"], "policy": args["policy"], "model": name(args["model"]),
           "draft": name(args["draft"]) if spec.speculative else "none", "hardware": name(args["hardware"]),
           "workload": args["workload"], "cache_ratio": float(args["cache_ratio"]),
           "gamma": int(args["gamma"]) if spec.speculative else 0, "seed": int(args["seed"])}
    return row_key(row)


def tps_table(df: pd.DataFrame) -> str:
    """Rows: workloads, columns: policies (TPS), a mean row, and the best policy's speedup over each."""
    t = df.pivot_table(index="workload", columns="policy", values="tps", aggfunc="mean")
    t = t[t.mean().sort_values(ascending=False).index]
    t.loc["MEAN"] = t.mean()
    best = t.columns[0]
    speed = (t.loc["MEAN", best] / t.loc["MEAN"]).rename(f"{best} speedup")
    lines = ["tokens per second (simulated)", t.round(2).to_string(), "",
             f"speedup of {best} over each policy (mean TPS ratio)", speed.round(2).to_frame().T.to_string()]
    return "\n".join(lines)
