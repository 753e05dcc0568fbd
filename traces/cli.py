"""``python -m traces synth|stats|import|capture [key=value ...]``.

Arguments are ``key=value`` pairs parsed with ``OmegaConf.from_dotlist``; unknown keys are an error
that lists the valid ones. ``main`` returns the process exit status (0 ok, 2 usage or input error).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

from traces.errors import TraceError

USAGE = """usage: python -m traces <command> [key=value ...]
  synth    a calibrated synthetic trace:
           python -m traces synth model=qwen3_30b_a3b workload=gsm8k tokens=512 seed=0 out=FILE
  stats    routing statistics of a trace file or folder (text table, JSON, figure):
           python -m traces stats trace=FILE [json=true] [figure=PNG] [slots=[8,16,32]]
  import   recorded public routing into trace files:
           python -m traces import source=PATH out=FILE_OR_DIR
  capture  record routing from Hugging Face models (needs the `real` extra):
           python -m traces capture key=value ..."""

DEFAULTS = {
    "synth": {"model": "qwen3_30b_a3b", "workload": "alpaca", "tokens": 512, "seed": 0, "out": None},
    "stats": {"trace": None, "json": False, "figure": None, "slots": None},
    "import": {"source": None, "out": None},
}


class UsageError(ValueError):
    """Bad command-line arguments."""


def parse_args(command: str, argv: list[str]) -> dict:
    """``key=value`` pairs over the command's defaults; unknown or missing keys raise UsageError."""
    bad = [a for a in argv if "=" not in a]
    if bad:
        raise UsageError(f"{command}: arguments must be key=value, got {bad}")
    for key, _, value in (a.partition("=") for a in argv):   # YAML would read yes/on/off as booleans
        if isinstance((DEFAULTS.get(command) or {}).get(key), bool) and value.lower() not in ("true", "false"):
            raise UsageError(f"{command}: {key}={value!r}: must be true or false")
    try:
        given = OmegaConf.to_container(OmegaConf.from_dotlist(argv), resolve=True)
    except Exception as exc:  # OmegaConf raises several grammar errors
        raise UsageError(f"{command}: cannot parse {argv}: {exc}") from None
    if command not in DEFAULTS:
        return given
    valid = DEFAULTS[command]
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise UsageError(f"{command}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(valid)}")
    args = {**valid, **given}
    missing = [k for k, v in args.items() if v is None and k in ("out", "trace", "source")]
    if missing:
        raise UsageError(f"{command}: missing required key(s) {', '.join(missing)}=...")
    return _checked(command, args)


def _checked(command: str, args: dict) -> dict:
    """Types and ranges of the arguments (the table of :mod:`sim.run.user_input`), output paths creatable."""
    from sim.run.user_input import UserInputError, check, check_all
    from traces.atomic import OutputPathError, check_writable

    try:
        args = check_all(args, [k for k in args if k not in ("slots", "out", "trace", "source")])
        if command == "stats" and args["slots"] is not None:
            slots = args["slots"]
            if not isinstance(slots, list) or not slots:
                raise UserInputError(f"slots={slots!r}: must be a list of integers >= 0, e.g. slots=[8,16,32]")
            args["slots"] = [check("slots", c) for c in slots]
        if command == "synth":
            if not str(args["out"]).endswith(".npz"):
                raise UserInputError(f"out={args['out']}: give a trace file name ending in .npz")
            check_writable(args["out"], "out")
        if command == "stats" and args["figure"]:
            check_writable(args["figure"], "figure")
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None
    except UserInputError as exc:
        raise UsageError(f"{command}: {exc}") from None
    return args


def cmd_synth(args: dict) -> None:
    """Write a synthetic trace and print a one-line summary."""
    from traces.io import save_trace
    from traces.synth import synthesize

    trace = synthesize(args["model"], args["workload"], args["tokens"], args["seed"])
    path = save_trace(trace, args["out"])
    print(f"wrote {path}: {trace.meta['model']} / {trace.meta['workload']}, {trace.n_tokens} tokens, "
          f"seed {trace.meta['generator']['seed']}, {trace.meta['segments']} segments")


def cmd_stats(args: dict) -> None:
    """Print the statistics of a trace file or folder; optionally write a figure."""
    from traces.io import list_traces, load_trace
    from traces.stats import analyse, curves, format_table

    traces = [load_trace(p) for p in list_traces(args["trace"])]
    st = analyse(traces, slots=args["slots"])
    print(json.dumps(st, indent=1) if args["json"] else format_table(st))
    if args["figure"]:
        from traces.plots import plot_stats

        plot_stats(st, curves(traces), args["figure"])
        print(f"figure: {args['figure']}", file=sys.stderr if args["json"] else sys.stdout)


def cmd_import(args: dict) -> None:
    """Import recorded routing; one request to a file, several to a folder of ``<prompt>.npz``."""
    from traces.importers import import_trace
    from traces.io import save_trace

    from traces.atomic import OutputPathError, check_writable

    out = Path(args["out"])
    try:
        check_writable(out, "out", kind="file" if out.suffix == ".npz" else "dir")
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None
    got = import_trace(args["source"])
    if isinstance(got, list) and len(got) > 1 and out.suffix == ".npz":
        raise UsageError(f"out={out}: the source holds {len(got)} requests; give a folder for their "
                         "<prompt>.npz files (or one .npz per request is not possible)")
    if not isinstance(got, list) and out.suffix == ".npz":
        paths = [save_trace(got, out)]
    else:
        got = got if isinstance(got, list) else [got]
        paths = [save_trace(t, out / f"{_safe(t.meta['prompt_id'])}.npz") for t in got]
    for p, t in zip(paths, got if isinstance(got, list) else [got]):
        print(f"wrote {p}: {t.n_tokens} tokens; {t.meta['origin']}")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in ("synth", "stats", "import", "capture"):
        print(USAGE if not argv else f"unknown command {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    try:
        args = parse_args(command, rest)
        if command == "capture":
            from real.capture import main as capture_main

            print(json.dumps(capture_main(args), indent=1))
        else:
            {"synth": cmd_synth, "stats": cmd_stats, "import": cmd_import}[command](args)
    except (UsageError, TraceError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
