"""``python -m sim run|sweep [key=value ...]`` (Hydra: ``-m`` multirun and launchers work)."""
from __future__ import annotations

import sys

COMMANDS = {"run": "run_command", "sweep": "sweep_command", "plan": "plan_command"}
PLAIN = ("validate", "calibrate")   # key=value commands without Hydra (sim/fidelity)
USAGE = """usage: python -m sim {run,sweep,plan,validate,calibrate} [key=value ...] [-m] [hydra/launcher=joblib]
  run    one policy on one workload:  python -m sim run policy=moespac workload=gsm8k cache_ratio=0.17
  sweep  every policy x workload:     python -m sim sweep cache_ratio=0.17
         a named experiment:          python -m sim sweep experiment=paper_qwen3
  plan   the fastest placement that fits, with the engine flags:  python -m sim plan quant=q4_k_m gpu=rtx2080 context=4096
  validate  predicted vs measured:    python -m sim validate points=conf/validation/train.yaml [out=DIR] [json=true]
  calibrate fit a runtime profile:    python -m sim calibrate points=conf/validation/train.yaml runtime=llama_cpp
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
    if len(sys.argv) >= 2 and sys.argv[1] in PLAIN:
        from sim.fidelity.cli import main as plain

        return plain(sys.argv[1], sys.argv[2:])
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(USAGE)
    command = sys.argv.pop(1)
    sys.argv[1:] = _format_flag(expand_hf(sys.argv[1:]))
    if command == "plan":
        from sim.plan.command import cli_args; sys.argv[1:] = cli_args(sys.argv[1:])  # noqa: E702
    import hydra

    from sim import cli
    from sim.config import ConfigError
    from sim.paths import CONF_DIR

    task = getattr(cli, COMMANDS[command])

    def guarded(cfg):
        try:
            return task(cfg)
        except (ConfigError, KeyError, ValueError) as exc:
            sys.exit(f"error: {exc}")

    hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name=command)(guarded)()


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


if __name__ == "__main__":
    main()
