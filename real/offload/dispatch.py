"""Applying a policy's placement to one layer: tallies, slot reservations, transfers to start.

:func:`dispatch` follows ``sim.engine.Engine._dispatch`` / ``_dispatch_one`` decision for
decision (same counters, same order: resident GPU experts, CPU experts, then FETCH/STREAM in
ascending expert id, then ``extra_fetch``), so that a synchronous real run and a simulated replay
of its trace count the same hits, transfers and CPU executions. It runs under the executor's lock;
the computation itself is :mod:`real.offload.layer`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from real.offload.copier import Transfer
from sim.accounting import tally_requests
from sim.policies.base import FETCH, STREAM


@dataclass
class LayerPlan:
    """Where each requested expert of a layer runs: ``gpu`` as ``(expert, buffer)``, ``cpu`` ids,
    ``waits`` as ``(expert, transfer)`` (computed on the device once landed), ``extra`` transfers
    nobody computes (``extra_fetch``), and the staging buffers to give back after the layer."""

    gpu: list = field(default_factory=list)
    cpu: list = field(default_factory=list)
    waits: list = field(default_factory=list)
    extra: list = field(default_factory=list)
    stages: list = field(default_factory=list)


def dispatch(ex, layer: int, requested: np.ndarray, placement) -> LayerPlan:
    """Tally the layer's requests and start its transfers; returns the :class:`LayerPlan`."""
    cache, c, pool = ex.cache, ex.c, ex.pool
    req = requested
    where = np.asarray(placement.where)[req]
    on_gpu, on_cpu = tally_requests(c, cache, ex.prefetched, layer, req, where, ex.policy.name)
    plan = LayerPlan(gpu=[(int(e), ("slot", pool.slot((layer, int(e))))) for e in req[on_gpu]],
                     cpu=[int(e) for e in req[on_cpu]])
    c.gpu_execs += len(plan.gpu)
    c.cpu_execs += len(plan.cpu)
    rest = ~(on_gpu | on_cpu)
    for e, w in zip(req[rest].tolist(), where[rest].tolist()):
        _dispatch_one(ex, layer, e, w, plan)
    for e in placement.extra_fetch:
        e = int(e)
        if cache.inflight[layer, e]:
            plan.extra.append(ex.jobs[(layer, e)])
        elif not cache.resident[layer, e] and ex.reserve(layer, e):
            plan.extra.append(ex.submit_demand(layer, e))
    return plan


def _dispatch_one(ex, layer: int, e: int, w: int, plan: LayerPlan) -> None:
    """A FETCH or STREAM placement of one expert."""
    cache, c = ex.cache, ex.c
    if w == STREAM:
        job: Transfer = ex.stream(layer, e)
        plan.stages.append(job.where[1])
        ex.copier.submit(job)
        plan.waits.append((e, job))
    elif w != FETCH:
        raise ValueError(f"policy {ex.policy.name!r} returned placement code {w} (valid: 0..3)")
    elif cache.resident[layer, e]:
        plan.gpu.append((e, ("slot", ex.pool.slot((layer, e)))))
    elif cache.inflight[layer, e]:
        plan.waits.append((e, ex.jobs[(layer, e)]))
    elif ex.reserve(layer, e):
        plan.waits.append((e, ex.submit_demand(layer, e)))
    else:
        c.fallbacks += 1
        c.cpu_execs += 1
        plan.cpu.append(e)
        return
    c.gpu_execs += 1
