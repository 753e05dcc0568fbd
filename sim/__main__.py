"""``python -m sim run|sweep|breakeven [key=value ...]`` (Hydra: ``-m`` multirun and launchers work)."""
from __future__ import annotations

import sys

COMMANDS = {"run": "sim.cli:run_command", "sweep": "sim.cli:sweep_command",
            "breakeven": "sim.speculation.command:breakeven_command"}
USAGE = """usage: python -m sim {run,sweep,breakeven} [key=value ...] [-m] [hydra/launcher=joblib]
  run    one policy on one workload:  python -m sim run policy=moespac workload=gsm8k cache_ratio=0.17
  sweep  every policy x workload:     python -m sim sweep cache_ratio=0.17
         a named experiment:          python -m sim sweep experiment=paper_qwen3
  breakeven  when speculation pays:   python -m sim breakeven draft=qwen3_0_6b workload=gsm8k
  Show the composed config with --cfg job; list presets under conf/{policy,workload,hardware,model,draft,experiment}."""


def expand_hf(args: list[str]) -> list[str]:
    """``model=hf:PATH`` -> ``model=hf model.hf_path=PATH`` (a path is no Hydra preset name)."""
    out = []
    for a in args:
        if a.startswith("model=hf:"):
            out += ["model=hf", f"model.hf_path={a[len('model=hf:'):]}"]
        else:
            out.append(a)
    return out


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(USAGE)
    command = sys.argv.pop(1)
    sys.argv[1:] = expand_hf(sys.argv[1:])
    import importlib

    import hydra

    from sim.config import ConfigError
    from sim.paths import CONF_DIR

    module, name = COMMANDS[command].split(":")
    task = getattr(importlib.import_module(module), name)

    def guarded(cfg):
        try:
            return task(cfg)
        except (ConfigError, KeyError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)

    hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name=command)(guarded)()


if __name__ == "__main__":
    main()
