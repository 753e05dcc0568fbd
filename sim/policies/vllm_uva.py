"""vLLM ``--cpu-offload-gb``: offloaded weights are read by GPU kernels over PCIe (UVA)."""
from __future__ import annotations

import numpy as np

from sim.policies.base import STREAM, Placement, Policy, Signals
from sim.policies.common import static_where
from sim.policies.static_sets import layer_experts, whole_layers


class VllmUVA(Policy):
    """vLLM CPU offload: a static set of layers resident, every other expert streamed (AR).

    Mechanism (github.com/vllm-project/vllm, ``maybe_offload_to_cpu`` in
    ``model_executor/models/utils.py``; RFC issue #3563, UVA backend): parameters are pinned in
    host memory in declaration order until ``--cpu-offload-gb`` is reached, and the GPU kernels
    read them through unified virtual addressing on every forward pass; there is no expert cache
    and no prefetch (peers: "offloads params in declaration order"). Since offloading starts from
    the first layer, the experts that stay on the GPU are those of the *last* layers; with the
    budget fixed in expert slots, ``n_slots // n_experts`` whole layers stay resident. Every
    requested expert of another layer is computed on the GPU with ``STREAM`` (weights read over
    PCIe, no slot).

    Parameters:
        resident_layers: ``"last"`` (default, vLLM's declaration-order offload) or ``"first"``.
    """

    speculative = False

    def __init__(self, resident_layers: str = "last"):
        self.resident_layers = resident_layers

    def initial_residency(self) -> list[tuple[int, int]]:
        c = self.ctx
        layers = whole_layers(c.n_layers, c.n_experts, c.n_slots, self.resident_layers)
        return layer_experts(layers, c.n_experts)

    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        return Placement(static_where(cache, layer, STREAM))
