"""``python -m sim run``: one simulated run, a summary table, its row, config and timeline."""
from __future__ import annotations

import sys

from omegaconf import DictConfig

from sim.commands.common import choice, run_keys, output_dir, checked, policy_params, prepare_folder, specs_of, trace_defaults
from traces.atomic import writer_lock
from sim.run.spec import RunSpec


def run_command(cfg: DictConfig) -> dict:
    """Simulate one run, print a summary, write results.parquet, config.yaml (and the timeline)."""
    from sim.run.results import RESULTS_FILE, append_rows
    from sim.run.resolve import resolve
    from sim.run.runner import run_one
    from sim.engine.timeline import chrome_trace, gantt_png

    out = output_dir(cfg)
    args = checked(cfg, "run", run_keys("run") + ("append",))
    append = bool(args.pop("append"))
    policy = choice("policy") or str(cfg.policy.get("name", "moespac"))
    params = policy_params(cfg, policy)
    specs = specs_of(cfg)
    args["workload"] = choice("workload") or "gsm8k"
    trace_defaults(args, specs, cfg)
    spec = RunSpec.of(policy=policy, policy_args=params, **args, **specs)
    resolved = resolve(spec)   # every input checked (and read once) before anything is written
    with writer_lock(out / RESULTS_FILE):
        prepare_folder(cfg, out, append)
        res = run_one(spec, resolved)
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
    print("\n".join(_prediction_lines(row["tps"], resolved)))
    print(f"results: {out / RESULTS_FILE}")
    return row


def _prediction_lines(tps: float, resolved) -> list[str]:
    """The run's speed with its 80% interval and, off the training points, what is missing."""
    from sim.fidelity.training_set import hardware_classes
    from sim.fidelity.uncertainty import Uncertainty

    return Uncertainty().lines(tps, hardware_classes(resolved.hw, resolved.model.name))
