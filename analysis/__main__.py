"""``python -m analysis report results=PATH [out=DIR] [experiment=NAME] [timeline=auto|files|simulate|off]``."""
from __future__ import annotations

import sys
import time

from omegaconf import OmegaConf

USAGE = """usage: python -m analysis report results=PATH [key=value ...]
  results=PATH          a results.parquet, or a folder searched for them (required; a bare PATH also works)
  out=DIR               where report.md and the PNGs go (default out/report)
  experiment=NAME       the experiment of the main table (default: paper_qwen3 if present)
  timeline=MODE         auto (files, else re-simulate) | files | simulate | off (default auto)
  timeline_workload=W   workload of a re-simulated timeline (default mmlu_pro)"""
DEFAULTS = {"results": None, "out": "out/report", "experiment": None, "timeline": "auto",
            "timeline_workload": "mmlu_pro"}


def parse(args: list[str]) -> dict:
    """key=value arguments over DEFAULTS; a lone argument without '=' is the results path."""
    bare = [a for a in args if "=" not in a]
    if len(bare) > 1:
        raise ValueError(f"unexpected arguments {bare}; use key=value")
    dotted = [a for a in args if "=" in a] + ([f"results={bare[0]}"] if bare else [])
    try:
        given = OmegaConf.to_container(OmegaConf.from_dotlist(dotted))
    except Exception as exc:  # OmegaConf's grammar errors have several types
        raise ValueError(f"cannot parse arguments {dotted}: {exc}") from exc
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(DEFAULTS)}")
    cfg = {**DEFAULTS, **given}
    if isinstance(cfg["timeline"], bool):  # YAML reads off/on/false/true as booleans
        cfg["timeline"] = "auto" if cfg["timeline"] else "off"
    if not cfg["results"]:
        raise ValueError("results=PATH is required")
    return {k: (str(v) if v is not None else None) for k, v in cfg.items()}


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for usage errors, 1 for input errors)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "report" or argv[1:2] in (["-h"], ["--help"]):
        print(USAGE, file=sys.stderr)
        return 0 if argv[1:2] in (["-h"], ["--help"]) else 2
    try:
        cfg = parse(argv[1:])
    except ValueError as exc:
        print(f"error: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    from analysis.load import AnalysisError
    from analysis.report import build_report

    t = time.perf_counter()
    try:
        path = build_report(cfg["results"], cfg["out"], cfg["experiment"], cfg["timeline"], cfg["timeline_workload"])
    except (AnalysisError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"report: {path} ({time.perf_counter() - t:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
