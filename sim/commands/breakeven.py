"""The ``python -m sim breakeven`` task: prints the break-even table, writes JSON, CSV and the map."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from traces.io import atomic_write_bytes


SCALARS = ("cache_ratio", "gen_tokens", "prompt_tokens", "context", "seed", "equal_vram", "gamma_min",
           "gamma_max", "map", "out")
LISTS = ("acceptances", "ratios", "ar_policies", "sd_policies")


def check(cfg: DictConfig) -> dict:
    """The command's values checked by :data:`sim.run.user_input.RULES` (each element of the lists),
    unknown top-level keys and policy names refused: one-line :class:`UserInputError`."""
    from sim.commands.common import checked
    from sim.paths import preset_names
    from sim.policies.registry import ALIASES
    from sim.run.user_input import UserInputError, check as check_one

    c = OmegaConf.to_container(cfg, resolve=True)
    out = checked(cfg, "breakeven", SCALARS)
    for key in LISTS:
        values = c.get(key)
        if key == "ratios" and not out["map"] and not values:
            out[key] = []
            continue
        if not isinstance(values, list) or not values:
            raise UserInputError(f"{key}={values!r}: must be a non-empty list")
        if key == "acceptances" and len(set(values)) < 2:
            raise UserInputError(f"acceptances={values!r}: must list at least 2 different values (a curve to cross)")
        out[key] = [check_one(key, v) for v in values]
    valid = set(preset_names("policy")) | set(ALIASES)
    for key in ("ar_policies", "sd_policies"):
        bad = [p for p in out[key] if p not in valid]
        if bad:
            raise UserInputError(f"{key}: unknown policy {bad[0]!r}; valid: {', '.join(sorted(valid))}")
    _refuse_wrong_kind(out["ar_policies"], out["sd_policies"], sorted(valid))
    if out["gamma_min"] > out["gamma_max"]:
        raise UserInputError(f"gamma_min={out['gamma_min']}, gamma_max={out['gamma_max']}: gamma_min must not "
                             "exceed gamma_max")
    out["acceptances"] = sorted(float(a) for a in out["acceptances"])
    from sim.commands.common import choice

    out["workload"] = choice("workload") or "gsm8k"      # a preset group, as in sim run
    return out


def _refuse_wrong_kind(ar_policies, sd_policies, names) -> None:
    """An ``sd_policies`` entry that does not speculate (it would make speculation look like it
    never pays) or an ``ar_policies`` entry that does (it would speculate as the baseline):
    one-line :class:`UserInputError` listing the policies of the right kind."""
    from sim.policies.registry import make_policy
    from sim.run.user_input import UserInputError

    spec = {n: make_policy(n).speculative for n in names}
    for key, want, items in (("sd_policies", True, sd_policies), ("ar_policies", False, ar_policies)):
        bad = [p for p in items if spec[p] is not want]
        if bad:
            kind = "speculative" if want else "autoregressive"
            raise UserInputError(f"{key}: {bad[0]!r} is not {kind}; {kind} policies: "
                                 + ", ".join(n for n in names if spec[n] is want))


def breakeven_command(cfg: DictConfig) -> dict:
    """Run :func:`sim.speculation.breakeven.breakeven` on the composed config; returns its summary."""
    from sim.machine import specs as config
    from sim.commands.common import specs_of
    from sim.machine.cost_model import CostModel
    from sim.policies.registry import policy_runtime
    from sim.speculation.breakeven import Search, breakeven, figure, report, to_json

    c = check(cfg)
    out = Path(c["out"])
    args = {k: c[k] for k in ("workload", "cache_ratio", "gen_tokens", "seed", "prompt_tokens", "context")}
    specs = specs_of(cfg)
    args.update(specs, experiment="breakeven")
    b = breakeven(args, c["ar_policies"], c["sd_policies"], [float(a) for a in c["acceptances"]],
                  Search(int(c["gamma_min"]), int(c["gamma_max"]), c["ratios"] if c["map"] else None,
                         bool(c["equal_vram"])))
    hw = config.hardware(args["hardware"], runtime=args["runtime"], default_runtime=policy_runtime(c["sd_policies"][0]))
    cost = CostModel(hw, config.model(specs["model"]), config.draft(specs["draft"]))
    ratio = cost.draft_token_s(c["prompt_tokens"] + c["gen_tokens"] // 2) / b.ar_token_s
    print(report(b, ratio))
    print(f"comparison: {'equal VRAM (AR policies get the draft VRAM as expert slots)' if c['equal_vram'] else 'equal cache ratio (same expert slots for AR and SD)'}")
    atomic_write_bytes(out / "breakeven.json", lambda f: f.write(to_json(b)))
    text = OmegaConf.to_yaml(cfg, resolve=True).encode()
    atomic_write_bytes(out / "config.yaml", lambda f: f.write(text))
    if b.map:
        figure(b, out / "breakeven.png", f"{specs['model']['name']} on {hw.name}, {c['workload']}", ratio)
        print(f"figure: {out / 'breakeven.png'}")
    return {"breakeven": b.breakeven, "ar_policy": b.ar_policy, "draft_ratio": ratio}
