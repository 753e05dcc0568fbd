"""The cost model of a resolved run: one function for the simulator and the live executor."""
from dataclasses import fields, replace

import numpy as np
import pytest

from real.offload.context import policy_context
from sim.policies import make_policy
from sim.run.resolve import resolve, run_cost_model
from sim.run.runner import run_one
from sim.run.spec import RunSpec

LAYERS = 16   # olmoe_1b_7b: every expert fits an RTX 4090


def _spec(gpu_layers: int) -> RunSpec:
    return RunSpec.of(policy="llamacpp", policy_args={"gpu_layers": gpu_layers}, model="olmoe_1b_7b",
                      workload="gsm8k", gen_tokens=4, table_tokens=300)


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))


@pytest.mark.parametrize("gpu_layers, graphs", [(LAYERS, False), (LAYERS + 1, True)])
def test_simulator_and_live_executor_get_the_same_cost_table(gpu_layers, graphs):
    """-ngl N with N = layer count: every expert on the GPU but the output layer on the CPU, so no
    CUDA graph; N past the layer count: one GPU-only forward, a graph. Both executors agree."""
    spec = _spec(gpu_layers)
    cost = run_cost_model(resolve(spec))
    assert cost.graphs is graphs
    sim_table = run_one(spec).engine.ctx.costs
    live_table = policy_context(make_policy("llamacpp", gpu_layers=gpu_layers), spec).costs
    assert _same(sim_table, live_table)
    assert _same(sim_table, cost.cost_table(0, 300))
    other = replace(cost, graphs=not graphs).cost_table(0, 300)   # the graph flag shows in the table
    assert not _same(sim_table, other)
