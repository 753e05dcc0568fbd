"""The policy's view of a run, built once for every executor: cost model, cost table, context.

:func:`build_context` is what both :func:`sim.run.runner.run_one` and the live executor
(:func:`real.offload.context.policy_context`) call, so a policy given the same trace is told the
same slots, costs, profile and future on both sides (DESIGN.md section 3.3).
"""
from __future__ import annotations

import numpy as np

from sim.machine.cost_model import CostModel, table_tokens
from sim.policies.base import Policy, PolicyContext


def policy_cost_model(policy: Policy, hw, m, d, gamma: int, n_slots: int | None = None) -> CostModel:
    """The cost model of a run of ``policy`` (its CPU efficiency scale, tables up to gamma+1 tokens);
    with ``n_slots`` given, a placement that holds every expert and runs no layer, nor the output
    layer, on the CPU is one GPU-only forward (``graphs``: the runtime's CUDA-graph kernel cost)."""
    graphs = (n_slots is not None and n_slots >= m.n_layers * m.n_experts
              and policy.cpu_layer_count(m.n_layers) == 0 and not policy.output_layer_on_cpu(m.n_layers))
    return CostModel(hw, m, d, cpu_scale=policy.cpu_efficiency_scale, n_max=table_tokens(gamma), graphs=graphs)


def table_context(prompt_tokens: int, gen_tokens: int) -> int:
    """The KV length at which a run's cost table is taken: the middle of the generation."""
    return prompt_tokens + gen_tokens // 2


def build_context(policy: Policy, cost: CostModel, n_slots: int, gamma: int, table_context: int,
                  seed: int = 0, profile: np.ndarray | None = None,
                  future: np.ndarray | None = None) -> PolicyContext:
    """The :class:`PolicyContext` of a run: ``table_context`` is the KV length at which the cost
    table's attention time is taken; ``profile`` / ``future`` reach only the policies that ask for
    them (``needs_profile`` / ``needs_future``)."""
    m = cost.model
    return PolicyContext(
        n_layers=m.n_layers, n_experts=m.n_experts, top_k=m.top_k, n_slots=n_slots, gamma=gamma,
        costs=cost.cost_table(gamma, table_context), seed=seed,
        profile=profile if policy.needs_profile else None,
        future_counts=future if policy.needs_future else None)


def routing_counts(experts: np.ndarray, n_layers: int, n_experts: int) -> np.ndarray:
    """Per-(layer, expert) token counts of a routing ``[T, L, k]`` (an offline profile)."""
    idx = (np.arange(n_layers)[None, :, None] * n_experts + experts.astype(np.int64)).ravel()
    return np.bincount(idx, minlength=n_layers * n_experts).reshape(n_layers, n_experts).astype(float)
