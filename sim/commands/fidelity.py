"""The ``validate`` and ``calibrate`` commands: ``key=value`` arguments over conf/<command>.yaml."""
from __future__ import annotations

import sys

from omegaconf import OmegaConf

from sim.paths import CONF_DIR


def options(command: str, argv: list[str]) -> dict:
    """conf/<command>.yaml with ``key=value`` arguments applied; an unknown key or a malformed
    argument exits 2 with a one-line message naming it."""
    base = OmegaConf.to_container(OmegaConf.load(CONF_DIR / f"{command}.yaml"))
    flags = [k for k, v in base.items() if isinstance(v, bool)]
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq or key not in base:
            print(f"error: {command}: argument {arg!r} is not key=value with key one of {sorted(base)}",
                  file=sys.stderr)
            sys.exit(2)
        if key in flags and value.lower() not in ("true", "false"):   # not maybe, yes, on, 1: as Hydra's commands
            print(f"error: {command}: {key}={value!r}: must be true or false", file=sys.stderr)
            sys.exit(2)
        base[key] = OmegaConf.from_dotlist([arg])[key]
    for key in ("gen_tokens", "n_jobs", "min_points", "bench_gen_tokens"):
        if key in base and not (isinstance(base[key], int) and not isinstance(base[key], bool) and base[key] >= 1):
            print(f"error: {command}: {key} must be an integer >= 1, got {base[key]!r}", file=sys.stderr)
            sys.exit(2)
    return base


def check_outputs(command: str, opts: dict) -> None:
    """What the command will write, checked before any point is simulated: validate's ``out=``
    folder, calibrate's ``conf/runtime`` folder when ``write=true`` (:class:`OutputPathError`)."""
    from traces.atomic import check_writable

    if command == "validate" and opts["out"]:
        check_writable(str(opts["out"]), "out", kind="dir")
    elif command == "calibrate" and opts["write"] and not opts.get("bench"):   # bench= writes only out=
        check_writable(CONF_DIR / "runtime", "runtime (write=true writes conf/runtime)", kind="dir")


def main(command: str, argv: list[str]) -> None:
    """Run ``validate`` or ``calibrate``; configuration errors exit 2 with one line."""
    from sim.machine.specs import ConfigError
    from traces.atomic import OutputPathError

    opts = options(command, argv)
    try:
        check_outputs(command, opts)
        if command == "validate":
            from sim.fidelity.validate import validate

            validate(str(opts["points"]), opts["out"] or None, bool(opts["json"]), opts["gen_tokens"], opts["n_jobs"],
                     residuals=opts["residuals"] or None)
        elif opts.get("bench"):
            from sim.fidelity.machine_command import calibrate_bench

            calibrate_bench(opts)
        else:
            from sim.fidelity.calibrate import calibrate

            calibrate(str(opts["points"]), str(opts["runtime"]), bool(opts["write"]), bool(opts["loso"]),
                      opts["min_points"], opts["gen_tokens"], opts["n_jobs"], opts["residuals"] or None)
    except (ConfigError, KeyError, OutputPathError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
