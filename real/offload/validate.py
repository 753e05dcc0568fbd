"""``python -m real validate``: the real engine and the simulator on the same traces, diff table.

As LLMServingSim's ``bench validate``: the same workload runs for real (``python -m real run``,
which records its trace) and is then replayed by the simulator with the same model, draft,
policy, gamma, cache ratio and hardware spec (ideally one measured by ``python -m real
profile``); each metric is computed the same way on both sides and printed with its diff,
``(sim - real) / real``. With ``sync=true`` the decision counts must also agree exactly.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from real.offload.replay import count_differences, replay
from real.offload.run import total
from sim.policies import make_policy
from sim.protocol.metrics import Counters

METRICS = (("Throughput (tok/s)", "tps", 1.0), ("Step mean (ms)", "step_ms_mean", 1.0),
           ("Step P50 (ms)", "step_ms_p50", 1.0), ("Step P90 (ms)", "step_ms_p90", 1.0),
           ("Step P99 (ms)", "step_ms_p99", 1.0), ("Hit rate (%)", "hit_rate", 100.0),
           ("Transfers", "n_transfers", 1.0), ("CPU share (%)", "cpu_expert_share", 100.0))


@dataclass
class PolicyValidation:
    """Real and simulated totals of one policy over the same traces."""

    policy: str
    real: Counters
    sim: Counters
    n_traces: int
    real_rows: list = field(default_factory=list)
    sim_rows: list = field(default_factory=list)

    def table(self) -> list[tuple[str, float, float, float]]:
        """``(metric, real, sim, diff %)`` rows."""
        r, s = self.real.row(), self.sim.row()
        out = []
        for label, key, scale in METRICS:
            a, b = scale * r[key], scale * s[key]
            out.append((label, a, b, 100.0 * (b - a) / a if a else float("nan")))
        return out


def real_counters(trace) -> Counters:
    """The real run's counters stored in its trace's metadata."""
    return Counters(**trace.meta["real"]["counters"])


def validate_traces(traces: list, policy: str, hardware: dict | None, sync: bool | None) -> PolicyValidation:
    """Replay every trace of one policy's real run in the simulator and pair the totals."""
    sims = [replay(t, policy=policy, sync=sync, hardware=hardware) for t in traces]
    return PolicyValidation(policy, total([real_counters(t) for t in traces]), total([s.engine.c for s in sims]),
                            len(traces), sim_rows=[s.row for s in sims])


def format_table(v: PolicyValidation, sync: bool) -> str:
    """The diff table of one policy (and, in sync mode, the decision-count verdict)."""
    lines = [f"policy {v.policy}: {v.n_traces} trace(s), {v.real.tokens} tokens, {v.real.steps} steps",
             f"{'Metric':<22}{'Real':>12}{'Sim':>12}{'Diff%':>9}"]
    lines += [f"{m:<22}{a:>12.3f}{b:>12.3f}{d:>8.1f}%" for m, a, b, d in v.table()]
    if sync:
        diff = count_differences(v.real, v.sim)
        lines.append("decision counts (sync): identical" if not diff else f"decision counts (sync) DIFFER: {diff}")
    return "\n".join(lines)


DEFAULT_POLICIES = "moespac,llamacpp_sd"


def _by_policy(traces: list) -> dict:
    """Traces of a `real run` folder grouped by the policy that made each (never replayed as another)."""
    from traces.errors import TraceError
    groups: dict = {}
    for t in traces:
        policy = t.meta.get("policy")
        if not isinstance(t.meta.get("real"), dict) or not policy:
            raise TraceError(t.path, "meta.policy", f"not a trace of `python -m real run` (source "
                                                    f"{t.meta.get('source')!r}); validate needs its real counters")
        groups.setdefault(policy, []).append(t)
    return groups


def _traces_of(folder: Path) -> list:
    from traces.io import list_traces, load_trace
    return [load_trace(p) for p in list_traces(folder / "traces")]


def validate(opts, prepared=None) -> list[PolicyValidation]:
    """Run (or load, with ``run=DIR``) the real side per policy, replay it, print and write the table.

    ``prepared`` (:func:`real.offload.run.prepare` of the same models) is reused and left open;
    without it the models are built here and closed at the end."""
    from real.offload.run import load_hardware, prepare, run
    out = Path(opts.out) if opts.out else None
    sim_hw = load_hardware(opts.sim_hardware) if opts.sim_hardware else None
    results = []
    if opts.run:
        groups = _by_policy(_traces_of(Path(opts.run)))
        wanted = list(groups) if opts.policies == DEFAULT_POLICIES else \
            [p.strip() for p in opts.policies.split(",") if p.strip()]
        missing = [p for p in wanted if p not in groups]
        if missing:
            raise ValueError(f"policies={opts.policies}: run={opts.run} holds traces of {', '.join(groups)} only")
        for policy in wanted:
            results.append(validate_traces(groups[policy], policy, sim_hw, None))
    else:
        policies = [p.strip() for p in opts.policies.split(",") if p.strip()]
        for policy in policies:
            make_policy(policy)   # every name is checked before the models load
        own = prepared is None
        if own:
            prepared = prepare(replace(opts, policy=policies[0], check=False))   # models built once
        try:
            for policy in policies:
                sub = replace(opts, policy=policy, out=str(out / policy) if out else None, quiet=True, check=False)
                report = run(sub, prepared)
                v = validate_traces(report.traces, policy, sim_hw, None)
                v.real_rows = report.rows
                results.append(v)
        finally:
            if own:
                prepared.close()
    sync = bool(results and results[0].n_traces and opts.sync)
    text = "\n\n".join(format_table(v, sync) for v in results)
    print(text)
    if out is not None:
        write(out, results, text)
    return results


def write(out: Path, results: list[PolicyValidation], text: str) -> None:
    """summary.txt (the tables), validation.csv (one row per policy and metric), results.parquet."""
    from sim.run.results import RESULTS_FILE, append_rows
    from traces.io import atomic_write_bytes
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "summary.txt", lambda f: f.write((text + "\n").encode()))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["policy", "metric", "real", "sim", "diff_pct"])
    for v in results:
        for m, a, b, d in v.table():
            w.writerow([v.policy, m, f"{a:.6g}", f"{b:.6g}", f"{d:.3f}" if np.isfinite(d) else "nan"])
    atomic_write_bytes(out / "validation.csv", lambda f: f.write(buf.getvalue().encode()))
    rows = [r for v in results for r in v.real_rows + v.sim_rows]
    if rows:
        path = out / RESULTS_FILE
        if path.exists():
            path.unlink()
        append_rows(path, rows)
