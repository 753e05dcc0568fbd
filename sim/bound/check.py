"""Every policy against the LP bound of its own run (schedule, slots, cost model)."""
from __future__ import annotations

from sim.bound.lp import decode_bound
from sim.run.spec import RunSpec


def policies_vs_bound(cfg: dict, names, context0: int = 256) -> list[tuple[str, dict, float]]:
    """``(policy, result row, bound TPS)`` per policy, each bound solved once per distinct run
    shape: its schedule (fixed-gamma schedules are shared; an online schedule is its policy's own),
    its machine with the runtime of its system, its CPU scale and slots."""
    from sim.run.runner import run_one

    memo, out = {}, []
    for name in names:
        res = run_one(RunSpec.of(policy=name, **cfg))
        e = res.engine
        key = (name if e.sched.online else e.sched.gamma, repr(e.cost.hw), e.cost.cpu_scale, e.ctx.n_slots)
        if key not in memo:
            memo[key] = decode_bound(e.cost, e.sched, e.ctx.n_slots, context0).tps
        out.append((name, res.row, memo[key]))
    return out
