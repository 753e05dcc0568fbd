"""``python -m sim plan``: enumerate, price and rank the placements; print the best with its command line.

Inputs are checked before anything runs: a bad value stops with one line naming the key, the value
and the allowed range, exit status 2.
"""
from __future__ import annotations

import sys
import time

from omegaconf import DictConfig

from sim.machine.specs import ConfigError
from sim.machine.memory_plan import GIB
from sim.plan import headline, report
from sim.plan.enumerate import ENGINES, enumerate_all
from sim.plan.evaluate import Setting
from sim.plan.flags import EngineArgs
from traces.errors import TraceError

PLAN_ONLY = ("engines", "top", "measured", "out", "dynamic", "dynamic_sd")
LIST_KEYS = ("engines=", "dynamic=", "dynamic_sd=")


GROUPS = ("hardware", "gpu", "host", "link", "runtime", "model", "draft", "workload")


def cli_args(args: list[str]) -> list[str]:
    """``engines=a,b`` -> ``engines=[a,b]`` (a comma is a Hydra sweep otherwise); an unknown preset
    name stops here with one line and exit status 2 (Hydra's own message spans many)."""
    from sim.paths import preset_names

    out = []
    for a in args:
        group, _, name = a.partition("=")
        if group in GROUPS and name not in preset_names(group):
            print(f"error: {group}={name}: allowed values are {', '.join(preset_names(group))}", file=sys.stderr)
            sys.exit(2)
        key = next((k for k in LIST_KEYS if a.startswith(k)), None)
        value = a[len(key):] if key else ""
        out.append(f"{key}[{value}]" if key and "," in value and not value.startswith("[") else a)
    return out


def _int(cfg, key: str, lo: int, hi: int) -> int:
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ConfigError(f"{key}={v!r}: must be an integer in {lo}..{hi}")
    return v


def _names(cfg, key: str, allowed) -> list[str]:
    v = cfg[key]
    names = [v] if isinstance(v, str) else list(v or [])
    bad = [n for n in names if n not in allowed]
    if bad or (key == "engines" and not names):
        shown = ",".join(map(str, names)) or repr(v)
        raise ConfigError(f"{key}={shown}: allowed values are {', '.join(allowed)}")
    return names


def check(cfg: DictConfig, n_layers: int) -> dict:
    """The validated plan options (raises :class:`ConfigError` naming key, value and range)."""
    from sim.policies.registry import policy_names

    opts = {"context": _int(cfg, "context", 1, 1 << 20), "gen_tokens": _int(cfg, "gen_tokens", 1, 65536),
            "prompt_tokens": _int(cfg, "prompt_tokens", 0, 1 << 20), "top": _int(cfg, "top", 1, 100),
            "gamma": _int(cfg, "gamma", 1, 32), "seed": _int(cfg, "seed", 0, 2 ** 31 - 1),
            "engines": _names(cfg, "engines", ENGINES), "dynamic": _names(cfg, "dynamic", policy_names()),
            "dynamic_sd": _names(cfg, "dynamic_sd", policy_names())}
    vb = cfg.vram_budget_gib
    if vb is not None and not (isinstance(vb, (int, float)) and vb > 0):
        raise ConfigError(f"vram_budget_gib={vb!r}: must be a number > 0 (GiB) or null")
    opts["measured"] = None
    if cfg.measured is not None:
        try:
            n, tps = str(cfg.measured).split(":")
            opts["measured"] = (int(n), float(tps))
        except ValueError:
            opts["measured"] = None
        if opts["measured"] is None or not 0 <= opts["measured"][0] <= n_layers or opts["measured"][1] <= 0:
            raise ConfigError(f"measured={cfg.measured}: must be N:TPS with N in 0..{n_layers} and TPS > 0")
    return opts


def _engine_options(cfg: DictConfig):
    """llama.cpp's memory settings of the plan (``cache_type_k``, ``cache_type_v``, ``flash_attn``), checked."""
    from sim.run.user_input import check as check_key
    from sim.machine.vram import MemoryOptions

    return MemoryOptions(check_key("cache_type_k", cfg.get("cache_type_k", "f16")),
                         check_key("cache_type_v", cfg.get("cache_type_v", "f16")),
                         flash_attn=check_key("flash_attn", cfg.get("flash_attn", True)),
                         op_offload=check_key("op_offload", cfg.get("op_offload", True)))


def plan_command(cfg: DictConfig) -> list:
    """The Hydra task: run the plan, print it, write the figure and the CSV; bad input exits 2."""
    try:
        return _plan(cfg)
    except (ConfigError, TraceError, KeyError, ValueError) as exc:
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        sys.exit(2)


def _plan(cfg: DictConfig) -> list:
    from sim.commands.common import choice, output_dir, specs_of
    from sim.run.workload import check_trace
    from traces.io import load_trace

    wall = time.perf_counter()
    specs = specs_of(cfg)
    setting = Setting(model=specs["model"], hardware=specs["hardware"], runtime=specs["runtime"], quant=cfg.quant,
                      quant_dense=cfg.quant_dense, draft=specs["draft"]["name"], gamma=cfg.gamma,
                      context=cfg.context, prompt_tokens=cfg.prompt_tokens, gen_tokens=cfg.gen_tokens, seed=cfg.seed,
                      workload=choice("workload"), acceptance=cfg.acceptance, vram_budget_gib=cfg.vram_budget_gib,
                      engine=_engine_options(cfg))
    m = setting.spec
    opts = check(cfg, m.n_layers)
    if cfg.trace:
        setting.trace = load_trace(str(cfg.trace))
        check_trace(setting.trace, m)
    cands = enumerate_all(setting, opts["engines"], opts["dynamic"], opts["dynamic_sd"])
    wall = time.perf_counter() - wall
    out = output_dir(cfg)
    inputs = {"model": m.name, "quant": m.expert_quant, "quant_dense": m.dense_quant,
              "hardware": setting.hw("llamacpp").name, "context": cfg.context, "draft": setting.draft,
              "workload": setting.workload, "trace": cfg.trace or "", "gen_tokens": cfg.gen_tokens,
              "prompt_tokens": cfg.prompt_tokens, "seed": cfg.seed, "vram_budget_gib": cfg.vram_budget_gib}
    print(_model_file(_text(cfg, setting, cands, opts, wall, out), specs["model"]))
    headline.write_kt_rules(cands, engine_args(setting, cfg.context), out, f"{m.name} {m.expert_quant}")
    report.write_csv(out / "placements.csv", cands, inputs)
    report.figure(out / "plan.png", cands, f"{m.name} {m.expert_quant}, {inputs['hardware']}, ctx {cfg.context}",
                  opts["measured"])
    print(f"figure: {out / 'plan.png'}; every placement: {out / 'placements.csv'}")
    return cands


def _model_file(text: str, model) -> str:
    """The llama.cpp command lines name the file of a ``model=gguf:PATH`` model instead of ``MODEL.gguf``."""
    import shlex

    path = model.get("gguf_path") if isinstance(model, dict) else None
    return text.replace("MODEL.gguf", shlex.quote(str(path))) if path else text


def best_per_family(cands: list) -> list:
    """The fastest fitting placement of each (engine, policy, knob) family, fastest first."""
    best: dict = {}
    for c in cands:
        key = (c.engine, c.policy, c.knob)
        if c.fits and (key not in best or c.tps > best[key].tps):
            best[key] = c
    return sorted(best.values(), key=lambda c: -c.tps)


def _sim_args() -> str:
    from hydra.core.hydra_config import HydraConfig

    return " ".join(a for a in HydraConfig.get().overrides.task if a.split("=")[0] not in PLAN_ONLY)


def _uncertainty(setting: Setting):
    """The interval source and a candidate's classes (the plan's machine and model, its runtime)."""
    from sim.fidelity.training_set import hardware_classes
    from sim.fidelity.uncertainty import Uncertainty

    base = hardware_classes(setting.hw("llamacpp"), setting.spec.name)
    return Uncertainty(), lambda c: {**base, "runtime": c.runtime}


def _text(cfg, setting: Setting, cands: list, opts: dict, wall: float, out) -> str:
    m = setting.spec
    ranked = best_per_family(cands)
    src = f"trace {cfg.trace}" if cfg.trace else f"{setting.workload} routing (synthetic)"
    lines = [f"plan: {m.name} ({m.expert_quant} experts, {m.dense_quant} rest) on {setting.hw('llamacpp').name}, "
             f"context {cfg.context}, {src}, {cfg.gen_tokens} generated tokens",
             f"evaluated {len(cands)} placements ({sum(c.fits for c in cands)} fit) in {wall:.1f} s"]
    if not ranked:
        lines.append("nothing fits: even with every expert on the CPU the rest does not fit in VRAM")
        return "\n".join(lines)
    unc, classes = _uncertainty(setting)

    def speed(c) -> str:
        return unc.speed(c.tps, classes(c))

    engines = [c for c in ranked if c.engine != "dynamic"]
    lines.append(f"{'#':>2}  {'tok/s':>7}  {'80% interval':>13}  {'placement (engines)':<58} VRAM")
    for i, c in enumerate(engines[:opts["top"]], 1):
        lines.append(f"{i:>2}  {c.tps:>7.1f}  {unc.band(c.tps, classes(c)):>13}  {report.describe(c, m.n_layers):<58} "
                     f"{report.vram_parts(c)}")
    args = engine_args(setting, cfg.context)
    lines += headline.engine_lines(ranked, cands, args, m.expert_quant, opts, out, speed)
    lines += headline.simulator_lines(ranked, m.n_layers, _sim_args(), opts["top"], speed)
    if opts["measured"]:
        n, tps = opts["measured"]
        pred = next(c for c in cands if c.engine == "llama_cpp" and c.knob == "n_cpu_moe" and c.value == n)
        lines.append(f"llama.cpp --n-cpu-moe {n}: predicted {unc.speed(pred.tps, classes(pred))}, measured {tps:g} tok/s "
                     f"({100 * (pred.tps / tps - 1):+.0f}%); {'fits' if pred.fits else 'does not fit'} in "
                     f"{pred.plan.vram / GIB:.1f} GiB")
    lines += headline.sure_lines(c.runtime for c in ranked[:opts["top"]] + engines[:1])
    lines += sorted({unc.extrapolation(classes(c)) for c in ranked[:opts["top"]]} - {""})
    if "llama_cpp" in opts["engines"]:
        lines.append("llama.cpp keeps a layer's experts in one tensor: -ot and --n-cpu-moe place whole layers' "
                     "experts; a per-expert split is kTransformers' or a dynamic policy's")
    return "\n".join(lines)


def engine_args(setting: Setting, context: int) -> EngineArgs:
    """What every llama.cpp command of the plan shares (layers, context, the priced CPU threads)."""
    m, hw = setting.spec, setting.hw("llamacpp")
    return EngineArgs(n_layers=m.n_layers, n_dense=m.n_dense_layers, context=context, threads=hw.cpu_threads,
                      cpu=hw.cpu, mem=setting.engine or _default_memory())


def _default_memory():
    """llama.cpp's defaults (f16 KV, -ub 512, flash attention on) when the plan was given none."""
    from sim.machine.vram import MemoryOptions

    return MemoryOptions()
