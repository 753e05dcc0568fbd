"""One MoE layer's experts, computed where the policy placed them.

:func:`run` (a verify forward): routing to the host, ``place`` and :func:`dispatch` under the
executor's lock, then the CPU tier starts on the cold experts while the device computes the
resident ones and, as their copies land, the fetched and streamed ones; a failed copy falls back
to the CPU. The layer joins when both tiers are done, and the per-expert outputs are added in
ascending expert order, as the eager reference does (:meth:`LayerRouting.combine`). :func:`bypass` (prefill, final forward,
profiling pre-pass) computes every expert from host weights without asking the policy.
"""
from __future__ import annotations

import time

import torch

from real.offload.copier import STREAM
from real.offload.dispatch import dispatch
from real.offload.expert_math import LayerRouting, expert_forward


def run(ex, layer: int, module, hidden: torch.Tensor, top_k_index: torch.Tensor,
        top_k_weights: torch.Tensor) -> torch.Tensor:
    """The verify forward's experts of MoE layer ``layer`` (policy decisions, counted)."""
    routing = LayerRouting(top_k_index, ex.host.n_experts)
    with ex.lock:
        ex.signals.at_layer(layer, hidden, routing, top_k_weights)
        plan = dispatch(ex, layer, routing, ex.signals)
    ex.copier.wake()   # place() may have queued prefetches (next-layer predictions), as in the simulator
    out = _compute(ex, layer, hidden, routing, top_k_weights, plan)
    ex.layer_end(layer, routing.counts)
    return out


def _compute(ex, layer, hidden, routing, weights, plan) -> torch.Tensor:
    act, pool, t1 = ex.acts[layer], ex.pool, time.perf_counter()
    routing.to_device(hidden.device)
    host_in = (hidden.to("cpu"), weights.to("cpu")) if plan.cpu else None
    futures = [_cpu_task(ex, layer, e, routing, host_in) for e in plan.cpu]
    outs, used = {}, []

    def on_device(e, where):
        pos, tok = routing.rows(e)
        gate_up, down = pool.buffers(where)
        outs[e] = expert_forward(hidden[tok], gate_up, down, act, weights[tok, pos])
        used.append(where)

    for e, where in plan.gpu:
        on_device(e, where)
    for e, job in plan.waits:
        ex.wait(job)
        if job.ok:
            with ex.lock:
                where = job.where if job.kind == STREAM else ("slot", pool.slot((layer, e)))
            on_device(e, where)
            continue
        with ex.lock:   # the copy failed: its slots are free again; the CPU computes the expert
            ex.core.fell_back()
        host_in = host_in or (hidden.to("cpu"), weights.to("cpu"))
        futures.append(_cpu_task(ex, layer, e, routing, host_in))
    for job in plan.extra:
        ex.wait(job)
    t_gpu = _device_done(ex.api)
    results = [f.result() for f in futures]
    _tally(ex, t1, t_gpu, max((r[2] for r in results), default=None))
    for e, out, _ in results:
        outs[e] = out.to(hidden.device)
    final = routing.combine(outs, hidden)
    with ex.lock:
        pool.mark_used(used)
        for stage in plan.stages:
            pool.release_stage(stage)
    return final


def _cpu_task(ex, layer, e, routing, host_in):
    pos, tok = routing.host_rows(e)
    gate_up, down = ex.host.expert(layer, e)
    return ex.cpu.submit(e, host_in, (tok, pos), gate_up, down, ex.acts[layer])


def _device_done(api) -> float:
    """When the device finished the layer's queued expert kernels (host clock)."""
    if api is not None:
        api.stream_sync(api.current_stream())
    return time.perf_counter()


def _tally(ex, t1: float, t_gpu: float, t_cpu: float | None) -> None:
    """The bubble (|device end - CPU end|) and the time the device sat waiting for the CPU."""
    if t_cpu is None:
        return
    ex.c.bubble_s += abs(t_gpu - t_cpu)
    if t_cpu > t_gpu:
        ex.wait_s += t_cpu - t_gpu


def bypass(ex, layer: int, module, hidden: torch.Tensor, top_k_index: torch.Tensor,
           top_k_weights: torch.Tensor) -> torch.Tensor:
    """Every routed expert from host weights (copied to the device when it is not the CPU)."""
    routing = LayerRouting(top_k_index, ex.host.n_experts)
    routing.to_device(hidden.device)
    outs = {}
    for e in routing.requested.tolist():
        gate_up, down = (t.to(hidden.device, non_blocking=True) for t in ex.host.expert(layer, e))
        pos, tok = routing.rows(e)
        outs[e] = expert_forward(hidden[tok], gate_up, down, ex.acts[layer], top_k_weights[tok, pos])
    return routing.combine(outs, hidden)
