"""The ``python -m sim run|sweep`` commands (Hydra task functions)."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from traces.io import atomic_write_bytes

RUN_ARGS = ("cache_ratio", "gamma", "gen_tokens", "seed", "trace", "acceptance", "experiment", "prompt_tokens",
            "context", "timeline", "quant", "quant_dense", "slots_per_layer", "vram_budget_gib")


def _choice(group: str) -> str:
    """The preset name chosen for a config group (e.g. ``policy=moespac``)."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().runtime.choices[group]


def _output_dir(cfg: DictConfig) -> Path:
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # called outside Hydra (tests)
        return Path(cfg.out)


def _save_config(cfg: DictConfig, out: Path) -> None:
    text = OmegaConf.to_yaml(cfg, resolve=True).encode()
    atomic_write_bytes(out / "config.yaml", lambda f: f.write(text))


def _specs(cfg: DictConfig) -> dict:
    """The machine (its gpu/host/link parts and field overrides), runtime, model and draft."""
    c = OmegaConf.to_container(cfg, resolve=True)
    hw = {k: v for k, v in c["hardware"].items() if v is not None}
    if "host" in c and "cpu" not in hw:
        hw.update(gpu=c["gpu"], host=c["host"], link=c["link"])   # a composition, not a flat machine
    return {"hardware": hw, "model": c["model"], "draft": c["draft"], "runtime": c.get("runtime")}


def run_command(cfg: DictConfig) -> dict:
    """Simulate one run, print a summary, write results.parquet, config.yaml (and the timeline)."""
    from sim.results import RESULTS_FILE, append_rows
    from sim.runner import run_one
    from sim.timeline import chrome_trace, gantt_png

    out = _output_dir(cfg)
    args = {k: cfg[k] for k in RUN_ARGS}
    params = {k: v for k, v in OmegaConf.to_container(cfg.policy, resolve=True).items()
              if k not in ("_target_", "description")}
    res = run_one(policy=_choice("policy"), workload=_choice("workload"), policy_args=params,
                  **args, **_specs(cfg))
    row = res.row
    _save_config(cfg, out)
    append_rows(out / RESULTS_FILE, [row])
    keys = ("policy", "workload", "hardware", "cache_ratio", "gamma", "tps", "hit_rate", "cpu_expert_share",
            "pcie_gb", "pcie_util", "gpu_busy", "cpu_busy", "bubble_s", "mean_accepted", "n_slots", "sim_wall_s")
    width = max(map(len, keys))
    for k in keys + tuple(k for k in ("hot_precision", "hot_recall") if k in row):
        v = row[k]
        print(f"{k:<{width}}  {v:.4g}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    if cfg.timeline:
        chrome_trace(res.engine.events, out / "timeline.json")
        gantt_png(res.engine.events, out / "timeline.png", title=f"{row['policy']} on {row['workload']}")
        print(f"timeline: {out / 'timeline.json'} (open in ui.perfetto.dev), {out / 'timeline.png'}")
    print(res.plan.report())
    print(f"results: {out / RESULTS_FILE}")
    return row


def sweep_command(cfg: DictConfig) -> None:
    """Every policy x workload (x grid) of the experiment; prints the TPS table, writes results."""
    from sim.sweep import execute, expand, tps_table

    out = _output_dir(cfg)
    exp = OmegaConf.to_container(cfg.experiment, resolve=True)
    base = {k: cfg[k] for k in ("cache_ratio", "gamma", "gen_tokens", "seed", "prompt_tokens", "context",
                                "acceptance", "quant", "quant_dense", "slots_per_layer", "vram_budget_gib")}
    base.update(_specs(cfg), experiment=exp["name"])
    runs = expand(base, exp.get("policies", "all"), exp["workloads"], exp.get("grid") or {})
    _save_config(cfg, out)
    df = execute(runs, out, n_jobs=int(cfg.n_jobs), resume=bool(cfg.resume))
    print(tps_table(df))
    print(f"results: {out / 'results.parquet'} ({len(df)} runs)")
