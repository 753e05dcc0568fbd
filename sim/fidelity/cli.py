"""The ``validate`` and ``calibrate`` commands: ``key=value`` arguments over conf/<command>.yaml."""
from __future__ import annotations

import sys

from omegaconf import OmegaConf

from sim.paths import CONF_DIR


def options(command: str, argv: list[str]) -> dict:
    """conf/<command>.yaml with ``key=value`` arguments applied; an unknown key or a malformed
    argument exits 2 with a one-line message naming it."""
    base = OmegaConf.to_container(OmegaConf.load(CONF_DIR / f"{command}.yaml"))
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq or key not in base:
            print(f"error: {command}: argument {arg!r} is not key=value with key one of {sorted(base)}",
                  file=sys.stderr)
            sys.exit(2)
        base[key] = OmegaConf.from_dotlist([arg])[key]
    for key in ("gen_tokens", "n_jobs", "min_points", "bench_gen_tokens"):
        if key in base and not (isinstance(base[key], int) and base[key] >= 1):
            print(f"error: {command}: {key} must be an integer >= 1, got {base[key]!r}", file=sys.stderr)
            sys.exit(2)
    return base


def main(command: str, argv: list[str]) -> None:
    """Run ``validate`` or ``calibrate``; configuration errors exit 2 with one line."""
    from sim.config import ConfigError

    opts = options(command, argv)
    try:
        if command == "validate":
            from sim.fidelity.validate import validate

            validate(str(opts["points"]), opts["out"] or None, bool(opts["json"]), opts["gen_tokens"], opts["n_jobs"])
        elif opts.get("bench"):
            from sim.fidelity.machine_command import calibrate_bench

            calibrate_bench(opts)
        else:
            from sim.fidelity.calibrate import calibrate

            calibrate(str(opts["points"]), str(opts["runtime"]), bool(opts["write"]), bool(opts["loso"]),
                      opts["min_points"], opts["gen_tokens"], opts["n_jobs"])
    except (ConfigError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
