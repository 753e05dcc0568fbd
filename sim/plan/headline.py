"""The top of ``sim plan``'s answer: the fastest placement a released engine runs (llama.cpp or
kTransformers) with its exact flags explained, the ``-ot`` twin, the kTransformers rules and the
``llama-bench`` call that measures the best llama.cpp candidates; then, apart, the simulator's
research policies, which no engine flag runs; then how sure each runtime's figure is.
"""
from __future__ import annotations

from sim.plan import report
from sim.plan.confidence import how_sure
from sim.plan.flags import STATIC, EngineArgs, bench_line, cpu_blocks, explain, server_line

KT_RULES = "ktransformers_rules.yaml"
BENCH_TOP = 3


def llama_static(cands: list) -> list:
    """Fitting llama.cpp placements of whole layers' experts (no draft), fastest first, one per layer set."""
    seen, out = set(), []
    for c in sorted((c for c in cands if c.fits and c.engine == "llama_cpp" and c.knob in STATIC),
                    key=lambda c: -c.tps):
        key = (c.knob, c.value, c.gpu_layers)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def best_flagged(cands: list):
    """The fastest fitting llama.cpp (with or without draft) whole-layer expert placement, or None."""
    ok = [c for c in cands if c.fits and c.engine in ("llama_cpp", "llama_cpp_sd") and c.knob in STATIC]
    return max(ok, key=lambda c: c.tps, default=None)


def _command(c, a: EngineArgs, quant: str, sim_args: str) -> str:
    if c.engine in ("llama_cpp", "llama_cpp_sd") and c.knob in STATIC:
        return server_line(c, a)
    return report.command(c, a.n_layers, a.n_dense, a.context, quant, sim_args)


def tok_s(c) -> str:
    """A candidate's predicted speed, plain."""
    return f"{c.tps:.1f} tok/s"


def engine_lines(ranked: list, cands: list, a: EngineArgs, quant: str, opts: dict, out_dir,
                 speed=tok_s) -> list[str]:
    """The best engine placement, its flags, the -ot twin, the kTransformers rules and the bench call;
    ``speed(c)`` formats a prediction (with its interval, :mod:`sim.fidelity.uncertainty`)."""
    engines = [c for c in ranked if c.engine != "dynamic"]
    if not engines:
        return ["", "no engine placement fits (llama.cpp or kTransformers)"]
    best = engines[0]
    lines = ["", f"best: {report.describe(best, a.n_layers)}: {speed(best)} predicted",
             "  " + _command(best, a, quant, ""), f"  VRAM {report.vram_parts(best)}"]
    lines += [f"  or {speed(c)}: {_command(c, a, quant, '')}" for c in engines[1:opts["top"]]]
    flagged = best_flagged(cands)
    if flagged is not None:
        which = "its flags" if flagged is best else f"flags of the best llama.cpp placement ({flagged.tps:.1f} tok/s)"
        lines += ["", f"{which}:"] + [f"  {line}" for line in explain(flagged, a)]
        if flagged.knob == "n_cpu_moe":
            lines.append("  with -ot instead: " + server_line(flagged, a, use_ot=True))
        lines.append(f"  kTransformers optimize rules for the same layers: {out_dir / KT_RULES}")
    top = llama_static(cands)[:BENCH_TOP]
    if top:
        lines += [f"measure the top {len(top)} llama.cpp placements in one call, then pass measured=N:TPS:",
                  "  " + bench_line(top, a, opts["prompt_tokens"], opts["gen_tokens"])]
    return lines


def simulator_lines(ranked: list, n_layers: int, sim_args: str, top: int, speed=tok_s) -> list[str]:
    """The research policies of the ranking: simulated only, no engine flag."""
    dyn = [c for c in ranked if c.engine == "dynamic"][:top]
    if not dyn:
        return []
    return ["", "simulator policies, no engine flag (research: no released engine runs them):"] + [
        f"  {speed(c)}  {report.describe(c, n_layers)}: "
        + report.command(c, n_layers, 0, 0, "", sim_args).split(") ", 1)[-1] for c in dyn]


def sure_lines(runtimes) -> list[str]:
    """"how sure" per runtime: points and sources behind it, median error, barely calibrated or not."""
    return ["how sure (calibration of each runtime, conf/validation/train.yaml and docs/fidelity.md):"] + [
        f"  {r}: {how_sure(r)}" for r in sorted(set(runtimes))]


def write_kt_rules(cands: list, a: EngineArgs, out_dir, title: str):
    """Write the kTransformers rules of the best llama.cpp placement to ``out_dir``; its path, or None."""
    from sim.plan.kt_rules import write_rules

    c = best_flagged(cands)
    if c is None:
        return None
    cpu = cpu_blocks(c, a)
    gpu = [a.n_dense + l for l in range(a.n_layers) if a.n_dense + l not in cpu]
    return write_rules(out_dir / KT_RULES, gpu, cpu, f"{title}: {report.describe(c, a.n_layers)}")
