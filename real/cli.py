"""``python -m real run|profile|validate key=value ...``: live execution on this machine.

torch and transformers are imported only when a command runs, so ``--help`` and bad arguments
answer at once. Every bad input exits with status 2 and one line naming the key; ``run
check=true`` exits with status 1 when an offloaded token differs from plain greedy decoding.
"""
from __future__ import annotations

import sys

USAGE = """usage: python -m real {run,profile,validate} [key=value ...]
  run       offloaded speculative decoding with one policy, result rows + traces:
            python -m real run target=tiny:qwen3_moe draft=tiny:dense policy=moespac cache_ratio=0.25 \\
                prompts=tiny:2 gamma=4 max_new_tokens=32 [sync=true] [check=true] [out=DIR]
            python -m real run synthetic=qwen3_30b_a3b layers=8 policy=llamacpp_sd cache_ratio=0.17
  profile   measure this machine, write a hardware YAML (tables the cost model uses):
            python -m real profile out=conf/hardware/my_gpu.yaml name=my_gpu [fast=true]
  validate  real vs simulated on the same traces, diff table:
            python -m real validate synthetic=qwen3_30b_a3b layers=8 hardware=conf/hardware/my_gpu.yaml \\
                policies=moespac,llamacpp_sd out=out/validate
            python -m real validate run=out/my_run
Keys of each command: python -m real {run,profile,validate} --help"""


def _options(command: str):
    from real.offload import options
    return {"run": options.RunOptions, "profile": options.ProfileOptions,
            "validate": options.ValidateOptions}[command]


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in ("run", "profile", "validate"):
        print(USAGE, file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    command, args = argv[0], argv[1:]
    from real.offload.options import OptionError, parse, valid_keys
    if any(a in ("-h", "--help") for a in args):
        print(f"python -m real {command} keys: {valid_keys(_options(command))}")
        return 0
    try:
        opts = parse(_options(command), args)
        return _dispatch(command, opts)
    except (OptionError, ValueError, KeyError, OSError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", file=sys.stderr)
        return 2


def _dispatch(command: str, opts) -> int:
    from sim.machine.specs import ConfigError
    from traces.errors import TraceError
    try:
        if command == "run":
            from real.offload.run import run
            report = run(opts)
            return 1 if report.mismatches else 0
        if command == "profile":
            from real.offload.profile_yaml import profile
            hw = profile(opts)
            print(f"wrote {opts.out}: hardware '{hw['name']}' ({hw['gpu']}), transfer "
                  f"{hw['tables']['transfer_us']:.1f} us/expert, link {hw['pcie_h2d_gbs']:.1f} GB/s")
            return 0
        from real.offload.validate import validate
        validate(opts)
        return 0
    except (ConfigError, TraceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
