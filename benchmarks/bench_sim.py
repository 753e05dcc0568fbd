"""Simulator speed per policy: events/s, simulated tokens per wall second, "faster than real".

For every registered policy (or ``--policy``), one SD run of Qwen3-30B-A3B (48 layers, gamma 8,
gsm8k, ``--tokens`` generated tokens) is timed ``--repeat`` times (best wall time kept, the trace
built beforehand), and a separate run counts the SimPy events processed (by wrapping
``Environment.step``, so the timed runs carry no counting overhead; copies the link lands in a
coalesced run are not SimPy events, so a tree that coalesces processes fewer events for the same
run and its events/s is not comparable with an older tree's). "x real" is simulated decode
seconds per wall second. With ``--other CHECKOUT`` the same measurement runs against another source
tree (its own worker process with that ``PYTHONPATH``), interleaved policy by policy so both see
the same machine load, and the speedup is printed.

Targets on a 2-core machine: 512 tokens under 0.5 s of wall time on one core (>= 100x real), the
default sweep at cache_ratio=0.17 under 60 s on 2 cores.

    python benchmarks/bench_sim.py [--policy moespac] [--tokens 512] [--other /path/to/old/checkout] [--cpu] [--sweep]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def run_args(policy: str, tokens: int) -> dict:
    """``run_one`` arguments of the benchmarked run (Qwen3-30B-A3B, gsm8k, gamma 8, ``tokens``
    generated), with its synthetic trace built beforehand (synthesis is benchmarked elsewhere)."""
    try:
        from sim.run.workload import synthetic_trace
    except ImportError:                      # an older checkout (--other): before sim/run/
        from sim.runner import synthetic_trace

    synthetic_trace("qwen3_30b_a3b", "gsm8k", tokens + 9, 0)
    return dict(policy=policy, workload="gsm8k", gen_tokens=tokens, gamma=8)


def _run_one():
    """``run_one`` taking keyword arguments, in this tree (a RunSpec) or an older one (--other)."""
    try:
        from sim.run.runner import run_one
        from sim.run.spec import RunSpec
    except ImportError:
        from sim.runner import run_one
        return run_one
    return lambda **args: run_one(RunSpec.of(**args))


def measure(policy: str, tokens: int, repeat: int) -> dict:
    """Best-of-``repeat`` wall time of one run of ``policy``, its event count and simulated time."""
    import simpy

    run_one = _run_one()

    args = run_args(policy, tokens)
    walls, cpus = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        res = run_one(**args)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    step, n = simpy.Environment.step, [0]

    def counting_step(env):
        n[0] += 1
        return step(env)

    simpy.Environment.step = counting_step
    try:
        run_one(**args)
    finally:
        simpy.Environment.step = step
    return {"policy": policy, "wall_s": min(walls), "cpu_s": min(cpus), "events": n[0], "tokens": int(res.row["gen_tokens"]),
            "decode_s": float(res.row["decode_s"]), "tps": float(res.row["tps"])}


def worker() -> None:
    """Answer one JSON line per request line ``policy tokens repeat`` (run under a given PYTHONPATH)."""
    for line in sys.stdin:
        policy, tokens, repeat = line.split()
        print(json.dumps(measure(policy, int(tokens), int(repeat))), flush=True)


class Worker:
    """A measuring process for one source tree."""

    def __init__(self, root: Path):
        env = dict(os.environ, PYTHONPATH=str(root))
        self.proc = subprocess.Popen([sys.executable, str(HERE), "--worker"], cwd=root, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, policy: str, tokens: int, repeat: int) -> dict:
        self.proc.stdin.write(f"{policy} {tokens} {repeat}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"benchmark worker died while measuring {policy}")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _fmt(m: dict, key: str = "wall_s") -> str:
    w = m[key]
    return (f"{w:7.3f} s {m['events'] / w / 1e3:6.1f} kev/s {m['tokens'] / w:6.0f} tok/s "
            f"{m['decode_s'] / w:6.1f}x real")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", action="append", help="policies to time (default: every registered one)")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--other", type=Path, help="another checkout to measure in the same run (the 'before')")
    ap.add_argument("--sweep", action="store_true", help="also time the default sweep (2 jobs)")
    ap.add_argument("--cpu", action="store_true",
                    help="rate by process CPU time instead of wall time (a machine shared with other jobs)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker()
    root = Path(os.environ.get("PYTHONPATH", str(HERE.parents[1])).split(os.pathsep)[0]).resolve()
    sys.path.insert(0, str(root))
    from sim.policies.registry import policy_names

    policies = args.policy or policy_names()
    this = Worker(root)
    other = Worker(args.other.resolve()) if args.other else None
    print(f"{args.tokens} tokens, gamma 8, qwen3_30b_a3b, gsm8k; best of {args.repeat}; this tree: {root}"
          + (f"; before: {args.other}" if other else ""))
    key = "cpu_s" if args.cpu else "wall_s"
    print(f"times: best {'process CPU' if args.cpu else 'wall'} seconds per run")
    for p in policies:
        before = other.ask(p, args.tokens, args.repeat) if other else None
        after = this.ask(p, args.tokens, args.repeat)
        line = f"{p:>21} {_fmt(after, key)}"
        if before:
            same = "" if before["tps"] == after["tps"] else "  TPS DIFFERS"
            line += f" | before {_fmt(before, key)} | {before[key] / after[key]:5.2f}x faster{same}"
        print(line, flush=True)
    this.close()
    if other:
        other.close()
    if args.sweep:
        with tempfile.TemporaryDirectory() as out:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "sim", "sweep", "cache_ratio=0.17", f"out={out}", "n_jobs=2"],
                           check=True, capture_output=True, cwd=root)
            print(f"default sweep at cache_ratio=0.17 (2 jobs): {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
