"""The ``slot_offload`` experts implementation and its installation on a transformers model.

transformers 5.x dispatches every fused experts module's forward through
``ALL_EXPERTS_FUNCTIONS`` by ``config._experts_implementation``. :func:`register` adds
``slot_offload``, whose function receives the experts module as ``self`` and hands the layer to
the executor bound to that module. :func:`install` binds every MoE layer to an executor (its MoE
position ``0..L-1``; dense layers are skipped), adds the layer-start pre-hooks, moves the expert
weights to host memory and switches the model to ``slot_offload``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from real.offload.host import OffloadError, take_experts
from real.router_hooks import find_moe_layers

IMPL = "slot_offload"
BINDING = "_slot_offload_binding"


@dataclass
class Binding:
    """Which executor computes this experts module, and as which MoE layer."""

    executor: object
    layer: int


def slot_offload_forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                         top_k_weights: torch.Tensor) -> torch.Tensor:
    """The registered experts function: delegate to the executor bound to ``self``."""
    binding = self.__dict__.get(BINDING)
    if binding is None:
        raise OffloadError(f"{type(self).__name__} runs with experts implementation {IMPL!r} but was "
                           "never installed on an executor (use real.offload.experts_fn.install)")
    return binding.executor.experts_forward(binding.layer, self, hidden_states, top_k_index, top_k_weights)


def register() -> None:
    """Register ``slot_offload`` with transformers (idempotent)."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    if IMPL not in ALL_EXPERTS_FUNCTIONS:
        ALL_EXPERTS_FUNCTIONS.register(IMPL, slot_offload_forward)


def moe_modules(model) -> tuple[list[int], list, list]:
    """Decoder-layer indices, experts modules and gates of every MoE layer of ``model``."""
    found = find_moe_layers(model)
    if not found:
        raise OffloadError(f"{type(model).__name__} has no MoE layers to offload")
    layers = model.model.layers
    return ([i for i, _ in found], [layers[i].mlp.experts for i, _ in found], [g for _, g in found])


def take_model_experts(model, device: torch.device, api=None):
    """Move ``model``'s routed experts to host memory (pinned by the device API: ``api``, else the
    one of ``device``, none on the CPU); returns the HostExperts."""
    from real.offload.device_api import device_api
    _, experts, _ = moe_modules(model)
    api = api if api is not None else device_api(device)
    return take_experts(experts, torch.device(device), pin=api.pin if api is not None else None)


def install(model, executor) -> list:
    """Bind ``model``'s MoE layers to ``executor`` and switch it to ``slot_offload``.

    Returns the pre-hook handles (``handle.remove()`` undoes the hooks).
    """
    register()
    index, experts, _ = moe_modules(model)
    handles = []
    for pos, (i, mod) in enumerate(zip(index, experts)):
        mod.__dict__[BINDING] = Binding(executor, pos)
        handles.append(model.model.layers[i].register_forward_pre_hook(
            lambda module, args, pos=pos: executor.layer_start(pos)))
    model.set_experts_implementation(IMPL)
    return handles
