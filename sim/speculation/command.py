"""The ``python -m sim breakeven`` task: prints the break-even table, writes JSON, CSV and the map."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from sim.config import ConfigError
from traces.io import atomic_write_bytes


def _check(cfg: dict) -> None:
    for key in ("acceptances", "ratios"):
        bad = [v for v in cfg[key] or [] if not 0.0 <= float(v) <= (1.0 if key == "acceptances" else 10.0)]
        if bad:
            raise ConfigError(f"{key}: values must lie in {'0..1' if key == 'acceptances' else '0..10'}, got {bad}")
    if not 0 <= int(cfg["gamma_min"]) <= int(cfg["gamma_max"]) <= 12:
        raise ConfigError(f"gamma_min/gamma_max must satisfy 0 <= min <= max <= 12, got "
                          f"{cfg['gamma_min']}/{cfg['gamma_max']}")
    if not cfg["ar_policies"] or not cfg["sd_policies"]:
        raise ConfigError("ar_policies and sd_policies must each name at least one policy")


def breakeven_command(cfg: DictConfig) -> dict:
    """Run :func:`sim.speculation.breakeven.breakeven` on the composed config; returns its summary."""
    from sim import config
    from sim.cli import _specs
    from sim.cost_model import CostModel
    from sim.policies.registry import policy_runtime
    from sim.speculation.breakeven import breakeven, figure, report, to_json

    c = OmegaConf.to_container(cfg, resolve=True)
    _check(c)
    out = Path(c["out"])
    args = {k: c[k] for k in ("workload", "cache_ratio", "gen_tokens", "seed", "prompt_tokens", "context")}
    args.update(_specs(cfg), experiment="breakeven")
    b = breakeven(args, c["ar_policies"], c["sd_policies"], [float(a) for a in c["acceptances"]],
                  int(c["gamma_min"]), int(c["gamma_max"]), c["ratios"] if c["map"] else None,
                  bool(c["equal_vram"]))
    hw = config.hardware(args["hardware"], runtime=args["runtime"], default_runtime=policy_runtime(c["sd_policies"][0]))
    cost = CostModel(hw, config.model(c["model"]), config.draft(c["draft"]))
    ratio = cost.draft_token_s(c["prompt_tokens"] + c["gen_tokens"] // 2) / b.ar_token_s
    print(report(b, ratio))
    print(f"comparison: {'equal VRAM (AR policies get the draft VRAM as expert slots)' if c['equal_vram'] else 'equal cache ratio (same expert slots for AR and SD)'}")
    atomic_write_bytes(out / "breakeven.json", lambda f: f.write(to_json(b)))
    text = OmegaConf.to_yaml(cfg, resolve=True).encode()
    atomic_write_bytes(out / "config.yaml", lambda f: f.write(text))
    if b.map:
        figure(b, out / "breakeven.png", f"{c['model']['name']} on {hw.name}, {c['workload']}", ratio)
        print(f"figure: {out / 'breakeven.png'}")
    return {"breakeven": b.breakeven, "ar_policy": b.ar_policy, "draft_ratio": ratio}
