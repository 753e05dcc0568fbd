"""Where a simulated run's CPU time goes, by layer of the simulator, and what removing a layer could gain.

For every policy (or ``--policy``), one SD run of Qwen3-30B-A3B (48 layers, gamma 8, gsm8k,
``--tokens`` generated tokens: bench_sim.py's run, its trace built beforehand) runs under cProfile.
Each function's own time goes to the layer its file belongs to:

- ``policy``: sim/policies (the decision objects);
- ``protocol``: sim/protocol, sim/protocol/accounting.py, sim/protocol/expert_cache.py, sim/protocol/signals.py (the clock-free core);
- ``engine``: sim/engine/decode.py, sim/engine/link.py (the clock-owning executors' Python);
- ``simpy``: the SimPy package (event queue, process resumption);
- ``setup``: everything else of the project (resolve, cost tables, schedule, the result row).

Time spent in functions outside the project (numpy's Python wrappers, C builtins such as
``ndarray.item``) goes to the layers of their callers, split as cProfile records it per caller
(and through further outside callers, in proportion to their cumulative time per caller), so the
shares add up to the profiled total. cProfile's own per-call cost inflates call-heavy Python, so
the shares are approximate (the profiled total is printed beside the unprofiled CPU time).

The last columns are Amdahl bounds on the whole run: ``free policy`` = total / (total - policy),
the speedup if every policy call cost nothing; ``free policy+core`` = total / (engine + simpy +
setup), if the policy and the protocol core cost nothing while SimPy and the engine stay as they are.

    python benchmarks/where_time_goes.py [--policy moespac] [--tokens 512]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_sim import run_args  # noqa: E402  (the benchmarked run, one definition)
from sim.run.spec import RunSpec

LAYERS = ("policy", "protocol", "engine", "simpy", "setup")
PROTOCOL_FILES = ("sim/protocol/accounting.py", "sim/protocol/expert_cache.py", "sim/protocol/signals.py")
ENGINE_FILES = ("sim/engine/decode.py", "sim/engine/link.py")


def layer_of(filename: str, root: Path = ROOT) -> str | None:
    """The simulator layer a function's file belongs to; None for code outside the project and SimPy."""
    path = filename.replace("\\", "/")
    if path.startswith(("~", "<")):                     # C builtins, frozen and generated code
        return None
    if "/simpy/" in path:
        return "simpy"
    try:
        rel = Path(path).resolve().relative_to(root).as_posix()
    except (ValueError, OSError):
        return None
    if rel.startswith("sim/policies/"):
        return "policy"
    if rel.startswith("sim/protocol/") or rel in PROTOCOL_FILES:
        return "protocol"
    if rel in ENGINE_FILES:
        return "engine"
    return "setup"


def attribute(stats: dict, layer=layer_of) -> dict[str, float]:
    """Seconds per layer from pstats' raw table ``{func: (cc, nc, tt, ct, callers)}``: a project
    or SimPy function's own time to its layer; an outside function's own time to its callers,
    split by the own time cProfile recorded per caller, and through outside callers further up
    in proportion to their cumulative time per caller (a call cycle of outside functions ends in
    ``setup``). The values sum to the profiled total."""
    layers = {f: layer(f[0]) for f in stats}
    memo: dict = {}

    def mix(callers: dict, col: int) -> dict[str, float]:
        """The layer fractions of time spent on behalf of ``callers`` (weights: column ``col``)."""
        total = sum(edge[col] for edge in callers.values())
        out = dict.fromkeys(LAYERS, 0.0)
        for caller, edge in callers.items():
            w = edge[col] / total if total > 0 else 1.0 / len(callers)
            for name, f in fractions(caller).items():
                out[name] += w * f
        return out

    def fractions(func) -> dict[str, float]:
        """Where time spent in ``func`` belongs, as layer fractions (memoised)."""
        name = layers.get(func)
        if name is not None:
            return {name: 1.0}
        if func in memo:
            return memo[func] or {"setup": 1.0}         # None: in progress (a call cycle)
        callers = stats[func][4] if func in stats else {}
        if not callers:
            return {"setup": 1.0}                       # the profiler's root
        memo[func] = None
        memo[func] = mix(callers, 3)
        return memo[func]

    out = dict.fromkeys(LAYERS, 0.0)
    for func, (_, _, tt, _, callers) in stats.items():
        part = fractions(func) if layers[func] is not None or not callers else mix(callers, 2)
        for name, f in part.items():
            out[name] += tt * f
    return out


def profile_run(policy: str, tokens: int) -> tuple[dict[str, float], float]:
    """Per-layer seconds of one profiled run of ``policy`` and the same run's unprofiled CPU time."""
    from sim.run.runner import run_one

    args = run_args(policy, tokens)
    run_one(RunSpec.of(**args))                                     # warm every memo the run shares
    t = time.process_time()
    run_one(RunSpec.of(**args))
    plain = time.process_time() - t
    prof = cProfile.Profile()
    prof.enable()
    run_one(RunSpec.of(**args))
    prof.disable()
    return attribute(pstats.Stats(prof).stats), plain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", action="append", help="policies to profile (default: every registered one)")
    ap.add_argument("--tokens", type=int, default=512)
    args = ap.parse_args()
    if args.tokens < 1:
        raise SystemExit(f"error: --tokens must be an integer >= 1, got {args.tokens}")
    from sim.policies.registry import policy_names

    names = policy_names()
    bad = [p for p in args.policy or () if p not in names]
    if bad:
        raise SystemExit(f"error: --policy {bad[0]!r} is not a policy; choose from {', '.join(names)}")
    print(f"{args.tokens} tokens, gamma 8, qwen3_30b_a3b, gsm8k; share of the profiled CPU time per layer")
    print(f"{'policy':>21} {'plain s':>8} {'prof s':>7} " + " ".join(f"{n:>8}" for n in LAYERS)
          + f" {'free policy':>12} {'free policy+core':>17}")
    for p in args.policy or names:
        sec, plain = profile_run(p, args.tokens)
        total = sum(sec.values())
        share = {k: v / total for k, v in sec.items()}
        kept = sec["engine"] + sec["simpy"] + sec["setup"]
        print(f"{p:>21} {plain:8.3f} {total:7.3f} " + " ".join(f"{share[n]:8.1%}" for n in LAYERS)
              + f" {total / max(total - sec['policy'], 1e-12):11.2f}x {total / max(kept, 1e-12):16.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
