"""A layer's placement on real buffers: the protocol core's :class:`sim.protocol.LayerPlan` with
slots, staging buffers and copy jobs bound.

The core (the same code as the simulator's) asks the policy, tallies the requests, reserves
slots and says which copies to start and what waits for which; :func:`dispatch` starts those
copies on the copy engine in the core's order and returns what :mod:`real.offload.layer`
computes where. It runs under the executor's lock.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from real.offload.copier import STREAM


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


def dispatch(ex, layer: int, routing, signals) -> LayerPlan:
    """Ask the policy where ``layer``'s experts run, apply it (core) and start its copies."""
    req = routing.requested
    core_plan = ex.core.place(layer, routing.counts, signals, req, routing.counts[req])
    plan = LayerPlan(gpu=[(e, ("slot", ex.pool.slot((layer, e)))) for e in core_plan.gpu], cpu=list(core_plan.cpu))
    for w in core_plan.waits:
        job = ex.submit(w.copy) if w.copy is not None else ex.jobs[w.key]
        if w.copy is not None and w.copy.kind == STREAM:   # a stream: its staging buffer goes back after the layer
            plan.stages.append(job.where[1])
        if w.experts:
            plan.waits.extend((e, job) for e in w.experts)
        else:
            plan.extra.append(job)
    return plan
