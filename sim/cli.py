"""The ``python -m sim run|sweep`` commands (Hydra task functions).

Every input is checked before any work (:mod:`sim.user_input`); a spec changed on the command line
is named after its changes (``rtx4090_pcie4[pcie_h2d_gbs=50]``); a results folder whose
``config.yaml`` differs from this command's is refused, naming the differing keys, unless
``append=true``; one writer at a time holds a folder's results file (:func:`traces.atomic.writer_lock`).
"""
from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from sim.user_input import UserInputError, check_acceptance_model, check_all, check_policy_params, refuse_unknown
from traces.atomic import atomic_write_bytes, writer_lock
from traces.settings_diff import differing_keys

RUN_ARGS = ("cache_ratio", "gamma", "gen_tokens", "seed", "trace", "acceptance", "experiment", "prompt_tokens",
            "context", "timeline", "quant", "quant_dense", "slots_per_layer", "vram_budget_gib", "prefill", "ubatch",
            "prefill_rule", "prefill_threshold", "batch", "stagger", "equal_vram", "acceptance_model")
SWEEP_ARGS = ("cache_ratio", "gamma", "gen_tokens", "seed", "prompt_tokens", "context", "acceptance", "quant",
              "quant_dense", "slots_per_layer", "vram_budget_gib", "prefill", "ubatch", "prefill_rule",
              "prefill_threshold", "batch", "stagger", "equal_vram", "acceptance_model")
SPEC_GROUPS = ("hardware", "model", "draft")
EXPERIMENT_KEYS = ("name", "policies", "workloads", "grid", "description")
VOLATILE = ("out", "n_jobs", "resume", "append", "timeline", "format", "backend", "ray_address")   # do not change a run's numbers


def _choice(group: str) -> str | None:
    """The preset name chosen for a config group (e.g. ``policy=moespac``)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return HydraConfig.get().runtime.choices.get(group)
    except ValueError:  # called outside Hydra (tests)
        return None


def _given(key: str) -> bool:
    """True when the command line sets ``key`` or one of its fields."""
    from hydra.core.hydra_config import HydraConfig

    try:
        task = HydraConfig.get().overrides.task
    except ValueError:
        return True
    return any(o.lstrip("+~").split("=")[0].split(".")[0] == key for o in task)


def _output_dir(cfg: DictConfig) -> Path:
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # called outside Hydra (tests)
        return Path(cfg.out)


def _valid_top(cfg: DictConfig, command: str) -> set:
    from sim.paths import CONF_DIR

    own = OmegaConf.load(CONF_DIR / f"{command}.yaml")
    return (set(own) - {"defaults"}) | {p.name for p in CONF_DIR.iterdir() if p.is_dir()} | {"hydra"}


def _checked(cfg: DictConfig, command: str, keys) -> dict:
    """The command's top-level values, type- and range-checked; unknown top-level keys refused."""
    refuse_unknown(list(cfg), _valid_top(cfg, command), command)
    c = OmegaConf.to_container(cfg, resolve=True)
    out = check_all({k: c.get(k) for k in keys})
    if "acceptance_model" in out:
        out["acceptance_model"] = check_acceptance_model(out["acceptance_model"])
    return out


def _specs(cfg: DictConfig) -> dict:
    """The machine (its gpu/host/link parts and field overrides), runtime, model and draft as dicts;
    a spec changed from its preset is named after the change."""
    from sim.config import load_preset
    from sim.identity import spec_label

    c = OmegaConf.to_container(cfg, resolve=True)
    out = {}
    for group in SPEC_GROUPS:
        spec = {k: v for k, v in c[group].items() if v is not None} if group == "hardware" else dict(c[group])
        preset = _choice(group)
        if preset and "name" in spec:
            try:
                spec["name"] = spec_label(preset, spec, load_preset(group, preset))
            except (ValueError, OSError):
                pass
        out[group] = spec
    hw = out["hardware"]
    if "host" in c and "cpu" not in hw:
        hw.update(gpu=c["gpu"], host=c["host"], link=c["link"])   # a composition, not a flat machine
    out["runtime"] = c.get("runtime")
    if c.get("machine"):   # a calibrated machine (python -m sim calibrate bench=...) replaces the parts
        from sim.fidelity.machine_file import machine_hardware

        out["hardware"] = machine_hardware(c["machine"])
    return out


def _config_text(cfg: DictConfig) -> bytes:
    return OmegaConf.to_yaml(cfg, resolve=True).encode()


def _prepare_folder(cfg: DictConfig, out: Path, append: bool, restart: str = "") -> None:
    """Refuse a results folder made with other settings (unless ``append``); write ``config.yaml``
    (the earlier one is kept as ``config.N.yaml`` when appending)."""
    from sim.results import RESULTS_FILE

    path, new = out / "config.yaml", OmegaConf.to_container(cfg, resolve=True)
    if path.exists() and (out / RESULTS_FILE).exists():
        old = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
        diff = differing_keys(old, new, skip=VOLATILE)
        if diff and not append:
            shown = "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
            raise UserInputError(f"out={out}: holds results of other settings ({shown}); use another out={restart}, "
                                 "or append=true to add these runs to the folder")
        if diff:
            n = 1 + sum(1 for _ in out.glob("config.*.yaml"))
            path.replace(out / f"config.{n}.yaml")
    text = _config_text(cfg)
    atomic_write_bytes(path, lambda f: f.write(text))


def _policy_params(cfg: DictConfig, name: str) -> dict:
    params = {k: v for k, v in OmegaConf.to_container(cfg.policy, resolve=True).items()
              if k not in ("_target_", "description")}
    return check_policy_params(name, params)


def _trace_defaults(args: dict, specs: dict, cfg: DictConfig) -> None:
    """A replayed trace brings its model, workload, and (with a speculative-decoding record) its gamma
    and draft model, unless the command line names them."""
    if not args.get("trace"):
        return
    from traces.io import load_trace

    trace = load_trace(args["trace"])
    if not _given("model"):
        specs["model"] = None
    if not _given("workload"):
        args["workload"] = None
    if trace.sd is not None and not _given("gamma"):
        args["gamma"] = int(trace.sd.gamma)
    if isinstance(trace.meta.get("draft_spec"), dict) and not _given("draft"):
        specs["draft"] = dict(trace.meta["draft_spec"])


def run_command(cfg: DictConfig) -> dict:
    """Simulate one run, print a summary, write results.parquet, config.yaml (and the timeline)."""
    from sim.results import RESULTS_FILE, append_rows
    from sim.runner import resolve, run_one
    from sim.timeline import chrome_trace, gantt_png

    out = _output_dir(cfg)
    args = _checked(cfg, "run", RUN_ARGS + ("append",))
    append = bool(args.pop("append"))
    policy = _choice("policy") or str(cfg.policy.get("name", "moespac"))
    params = _policy_params(cfg, policy)
    specs = _specs(cfg)
    args["workload"] = _choice("workload") or "gsm8k"
    _trace_defaults(args, specs, cfg)
    resolve(policy=policy, policy_args=params, **args, **specs)   # every input checked before anything is written
    with writer_lock(out / RESULTS_FILE):
        _prepare_folder(cfg, out, append)
        res = run_one(policy=policy, policy_args=params, **args, **specs)
        row = res.row
        append_rows(out / RESULTS_FILE, [row])
    if row["gen_tokens"] < args["gen_tokens"]:
        print(f"note: the trace holds {row['gen_tokens']} tokens; simulated {row['gen_tokens']} of the "
              f"gen_tokens={args['gen_tokens']} asked", file=sys.stderr)
    keys = ("policy", "workload", "model", "hardware", "cache_ratio", "gamma", "gen_tokens", "tps", "hit_rate",
            "cpu_expert_share", "pcie_gb", "pcie_util", "gpu_busy", "cpu_busy", "bubble_s", "mean_accepted",
            "n_slots", "run_id", "sim_wall_s")
    width = max(map(len, keys))
    extra = (("ttft_s", "prefill_tok_s", "e2e_tok_s", "prefill_copy_share") if args.get("prefill") else ()) + \
        (("batch", "stagger", "tps_per_request", "tps_request_min") if args.get("batch", 1) > 1 else ())
    for k in keys + extra + tuple(k for k in ("hot_precision", "hot_recall") if k in row):
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
    """Every policy x workload (x grid) of the experiment; prints the TPS table, writes results.

    Every run is resolved (specs, policy, memory plan) before the first one starts."""
    from analysis.sweep_table import check_format
    from sim.parallel import check_backend
    from sim.results import RESULTS_FILE
    from sim.sweep import execute, expand, run_ids, tps_table

    out = _output_dir(cfg)
    check_format(str(cfg.format))
    check_backend(str(cfg.backend), cfg.ray_address)
    top = _checked(cfg, "sweep", SWEEP_ARGS + ("n_jobs", "resume", "append"))
    exp = OmegaConf.to_container(cfg.experiment, resolve=True)
    refuse_unknown(list(exp), EXPERIMENT_KEYS, "experiment")
    base = {k: top[k] for k in SWEEP_ARGS}
    base.update(_specs(cfg), experiment=exp.get("name", "adhoc"))
    runs = expand(base, exp.get("policies", "all"), exp.get("workloads") or [], exp.get("grid") or {})
    run_ids(runs)
    with writer_lock(out / RESULTS_FILE):
        if not top["resume"] and (out / RESULTS_FILE).exists():
            (out / RESULTS_FILE).unlink()
        _prepare_folder(cfg, out, top["append"], ", resume=false to start over")
        df = execute(runs, out, n_jobs=top["n_jobs"], resume=top["resume"], backend=str(cfg.backend),
                     address=cfg.ray_address)
    print(tps_table(df, exp.get("name", ""), str(cfg.format)))
    print(f"results: {out / RESULTS_FILE} ({len(df)} runs)", file=sys.stdout if cfg.format == "text" else sys.stderr)


def breakeven_command(cfg: DictConfig) -> dict:
    """``python -m sim breakeven``: see :mod:`sim.speculation.command`."""
    from sim.speculation.command import breakeven_command as breakeven

    return breakeven(cfg)


def plan_command(cfg: DictConfig) -> list:
    """``python -m sim plan``: see :mod:`sim.plan.command`."""
    from sim.plan.command import plan_command as plan

    return plan(cfg)


def crossover_command(cfg: DictConfig):
    """``python -m sim crossover``: see :mod:`sim.prefill.command`."""
    from sim.prefill.command import crossover_command as crossover

    return crossover(cfg)
