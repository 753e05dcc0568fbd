"""``python -m sim sweep``: every policy x workload (x grid) of an experiment; the TPS table and result files."""
from __future__ import annotations

import sys

from omegaconf import DictConfig, OmegaConf

from sim.commands.common import EXPERIMENT_KEYS, checked, run_keys, output_dir, prepare_folder, specs_of
from sim.run.user_input import refuse_unknown
from traces.atomic import writer_lock


def sweep_command(cfg: DictConfig) -> None:
    """Every policy x workload (x grid) of the experiment; prints the TPS table, writes results.

    Every run is resolved (specs, policy, memory plan) before the first one starts."""
    from analysis.sweep_table import check_format, format_table
    from sim.run.parallel import check_backend
    from sim.run.results import RESULTS_FILE
    from sim.run.sweep import execute, expand, run_ids

    out = output_dir(cfg)
    check_format(str(cfg.format))
    check_backend(str(cfg.backend), cfg.ray_address)
    keys = tuple(k for k in run_keys("sweep") if k != "timeline")
    top = checked(cfg, "sweep", keys + ("n_jobs", "resume", "append"))
    exp = OmegaConf.to_container(cfg.experiment, resolve=True)
    refuse_unknown(list(exp), EXPERIMENT_KEYS, "experiment")
    base = {k: top[k] for k in keys}
    base.update(specs_of(cfg), experiment=exp.get("name", "adhoc"))
    runs = expand(base, exp.get("policies", "all"), exp.get("workloads") or [], exp.get("grid") or {})
    ids = run_ids(runs)                    # every point resolved before anything is written
    with writer_lock(out / RESULTS_FILE):
        if not top["resume"] and (out / RESULTS_FILE).exists():
            (out / RESULTS_FILE).unlink()
        prepare_folder(cfg, out, top["append"], ", resume=false to start over")
        df = execute(runs, out, n_jobs=top["n_jobs"], resume=top["resume"], backend=str(cfg.backend),
                     address=cfg.ray_address, ids=ids)
    print(format_table(df, exp.get("name", ""), str(cfg.format)))
    print(f"results: {out / RESULTS_FILE} ({len(df)} runs)", file=sys.stdout if cfg.format == "text" else sys.stderr)


