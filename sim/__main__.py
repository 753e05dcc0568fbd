"""``python -m sim run|sweep|plan|breakeven [key=value ...]`` (Hydra: ``-m`` multirun and launchers work).

Before Hydra composes anything, the command line is checked (:func:`precheck`): unknown top-level
keys (also ``+key=``) are refused with the nearest valid ones, every value of a key with a rule in
:mod:`sim.run.user_input` (each value of a multirun sweep too) is type- and range-checked, and ``out=``
must be creatable. User mistakes print one ``error:`` line and exit with status 2, never a traceback;
a failed job of a multirun is reported by name and the other jobs still write their results.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

COMMANDS = {"run": "sim.commands.run:run_command", "sweep": "sim.commands.sweep:sweep_command",
            "plan": "sim.commands.plan:plan_command", "crossover": "sim.commands.crossover:crossover_command",
            "breakeven": "sim.commands.breakeven:breakeven_command"}
PLAIN = ("validate", "calibrate")   # key=value commands without Hydra (sim/fidelity)
USAGE = """usage: python -m sim {run,sweep,plan,crossover,breakeven,validate,calibrate} [key=value ...] [-m] [hydra/launcher=joblib]
  run    one policy on one workload:  python -m sim run policy=moespac workload=gsm8k cache_ratio=0.17
  sweep  every policy x workload:     python -m sim sweep cache_ratio=0.17
         a named experiment:          python -m sim sweep experiment=paper_qwen3
  plan   the fastest placement that fits, with the engine flags:  python -m sim plan quant=q4_k_m gpu=rtx2080 context=4096
  crossover the prefill micro-batch where copying beats the CPU:  python -m sim crossover quant=q4_k_m gpu=rtx3090 host=desktop_ddr4_2ch
  breakeven  when speculation pays:  python -m sim breakeven draft=qwen3_0_6b workload=gsm8k
  validate  predicted vs measured:    python -m sim validate points=conf/validation/train.yaml [out=DIR] [json=true]
  calibrate fit a runtime profile:    python -m sim calibrate points=conf/validation/train.yaml runtime=llama_cpp
  Show the composed config with --cfg job; list presets under conf/{policy,workload,hardware,model,draft,experiment}."""
ERRORS_ENV = "SIM_MULTIRUN_ERRORS"
MULTIRUN = ("-m", "--multirun")
NOT_GROUPS = {"validation"}   # conf/ folders that hold data files, not Hydra config groups


def expand_hf(args: list[str]) -> list[str]:
    """``model=hf:PATH`` -> ``model=hf model.hf_path=PATH`` and ``model=gguf:PATH`` -> ``model=gguf
    model.gguf_path=PATH`` (a path is no Hydra preset name)."""
    out = []
    for a in args:
        kind = next((k for k in ("hf", "gguf") if a.startswith(f"model={k}:")), None)
        if kind:
            out += [f"model={kind}", f"model.{kind}_path={a[len(f'model={kind}:'):]}"]
        else:
            out.append(a)
    return out


def _format_flag(args: list[str]) -> list[str]:
    """Accept ``--format=csv`` / ``--format csv`` as the Hydra override ``format=csv``."""
    out, it = [], iter(args)
    for a in it:
        if a.startswith("--format="):
            a = "format=" + a.split("=", 1)[1]
        elif a == "--format":
            a = "format=" + next(it, "")
        out.append(a)
    return out


def _values(override) -> list:
    return list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]


def precheck(command: str, args: list[str]) -> None:
    """Refuse bad overrides before Hydra runs (raises :class:`sim.run.user_input.UserInputError`)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from sim.commands.hydra_guard import check_override
    from sim.paths import CONF_DIR
    from sim.run.user_input import RULES, UserInputError, check, refuse_unknown
    from traces.atomic import OutputPathError, check_writable

    overrides = [a for a in args if not a.startswith("-") and "=" in a]   # flags and their values skipped
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # Hydra reports its own grammar errors
        return
    from sim.machine.specs import read_yaml

    for path in sorted((CONF_DIR / "runtime").glob("*.yaml")):   # the files calibrate rewrites: a broken
        read_yaml(path)                                          # one is one line here, not Hydra's traceback
    own = OmegaConf.load(CONF_DIR / f"{command}.yaml")
    valid = (set(own) - {"defaults"}) | {p.name for p in CONF_DIR.iterdir() if p.is_dir()} - NOT_GROUPS | {"hydra"}
    out = str(own.get("out"))
    for o in parsed:
        key = o.key_or_group
        check_override(key)                  # hydra.* beyond the launcher, and any _target_, refused
        if key.startswith("hydra") or o.is_delete():
            continue
        refuse_unknown([key.split(".")[0].split("/")[0]], valid, f"sim {command}")
        if "." in key and not (o.is_add() or o.is_force_add()) and o.package is None:
            _refuse_unknown_field(key, own, parsed)
        if key in RULES:
            for v in _values(o):
                for x in v if isinstance(v, list) else [v]:   # a list-valued key: each element
                    check(key, x)
        if key == "out":
            out = str(o.value())
    if "${" not in out:
        try:
            check_writable(out, "out", kind="dir")
        except OutputPathError as exc:
            raise UserInputError(str(exc)) from None


def _refuse_unknown_field(key: str, own, parsed) -> None:
    """``group.field=`` or ``mapping.field=`` naming a field the preset (or the command's own mapping)
    lacks: refused with the nearest fields, as Hydra would refuse it, but in one line (``+key=`` adds)."""
    from omegaconf import DictConfig, OmegaConf

    from sim.paths import CONF_DIR
    from sim.run.user_input import refuse_unknown

    top, field = key.split(".", 1)
    field = field.split(".")[0]
    if isinstance(own.get(top), DictConfig):
        fields, where = list(own[top]), top
    else:
        chosen = next((o.value() for o in parsed if o.key_or_group == top and isinstance(o.value(), str)), None)
        default = next((d[top] for d in own.get("defaults", []) if isinstance(d, DictConfig) and top in d), None)
        path = CONF_DIR / top / f"{chosen or default}.yaml"
        if not (chosen or default) or not path.exists():
            return
        preset = OmegaConf.load(path)
        if "defaults" in preset or "@package" in path.read_text():   # composed or repackaged: Hydra decides
            return
        fields, where = list(preset), f"{top}={chosen or default}"
    refuse_unknown([field], fields, where)


def _report_multirun_errors(path: str) -> None:
    lines = [l for l in Path(path).read_text().splitlines() if l.strip()] if os.path.exists(path) else []
    os.unlink(path) if os.path.exists(path) else None
    if lines:
        print(f"error: {len(lines)} job(s) of the multirun failed (the others wrote their results):",
              file=sys.stderr)
        for l in lines:
            print(f"  {l}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] in PLAIN:
        from sim.commands.fidelity import main as plain

        return plain(sys.argv[1], sys.argv[2:])
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(USAGE)
    command = sys.argv.pop(1)
    rest = _format_flag(expand_hf(sys.argv[1:]))
    flags = [a for a in rest if a in MULTIRUN]
    sys.argv[1:] = flags + [a for a in rest if a not in MULTIRUN]   # -m anywhere, as the usage shows
    if command in ("plan", "crossover"):
        from sim.commands.plan import cli_args
        sys.argv[1:] = cli_args(sys.argv[1:])
    sys.argv[0] = f"python -m sim {command}"
    import hydra

    import importlib

    from sim.machine.specs import ConfigError
    from sim.paths import CONF_DIR
    from traces.atomic import BusyError
    from traces.errors import TraceError

    try:
        precheck(command, sys.argv[1:])
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    module, name = COMMANDS[command].split(":")
    task = getattr(importlib.import_module(module), name)
    if flags:
        fd, errors = tempfile.mkstemp(prefix="sim-multirun-", suffix=".log")
        os.close(fd)
        os.environ[ERRORS_ENV] = errors

    def guarded(cfg):
        try:
            return task(cfg)
        except (ConfigError, TraceError, BusyError, KeyError, ValueError, OSError) as exc:
            msg = f"error: {exc}" if not isinstance(exc, KeyError) else f"error: {exc.args[0]}"
            log = os.environ.get(ERRORS_ENV)
            if log is None:
                print(msg, file=sys.stderr)
                sys.exit(2)
            from hydra.core.hydra_config import HydraConfig
            job = ",".join(HydraConfig.get().overrides.task)
            print(f"{msg} (job {job})", file=sys.stderr, flush=True)
            with open(log, "a") as f:
                f.write(f"{job}: {msg}\n")
            return None

    try:
        hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name=command)(guarded)()
    finally:
        if flags:
            _report_multirun_errors(os.environ[ERRORS_ENV])


if __name__ == "__main__":
    main()
