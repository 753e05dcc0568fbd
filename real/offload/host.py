"""Master copies of the routed experts in host memory, taken out of a transformers model.

After :func:`take_experts` every MoE layer's ``experts.gate_up_proj`` / ``down_proj`` parameters
are empty placeholders on the compute device and the weights live here, one ``[E, 2I, H]`` and
one ``[E, H, I]`` tensor per MoE layer, pinned when CUDA is used (asynchronous host->device
copies need page-locked memory; the device API's ``pin`` makes them so). Attention, dense layers, routers and shared experts are not
touched: they stay on the compute device with the rest of the model.
"""
from __future__ import annotations

import torch


class OffloadError(RuntimeError):
    """The model cannot be run with offloaded experts (layout not supported, bad options)."""


class HostExperts:
    """Per MoE layer, the host tensors ``gate_up[l] [E, 2I, H]`` and ``down[l] [E, H, I]``."""

    def __init__(self, gate_up: list[torch.Tensor], down: list[torch.Tensor]):
        if not gate_up or len(gate_up) != len(down):
            raise OffloadError("need one gate_up and one down tensor per MoE layer")
        shapes = {(tuple(g.shape), tuple(d.shape), g.dtype) for g, d in zip(gate_up, down)}
        if len(shapes) != 1:
            raise OffloadError(f"MoE layers have different expert shapes {sorted(map(str, shapes))}; "
                               "one slot pool needs one shape")
        self.gate_up, self.down = gate_up, down

    @property
    def n_layers(self) -> int:
        """MoE layers."""
        return len(self.gate_up)

    @property
    def n_experts(self) -> int:
        """Routed experts per layer."""
        return int(self.gate_up[0].shape[0])

    @property
    def dtype(self) -> torch.dtype:
        """Dtype of the expert weights."""
        return self.gate_up[0].dtype

    @property
    def expert_shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Shapes of one expert's ``gate_up`` and ``down`` matrices."""
        return tuple(self.gate_up[0].shape[1:]), tuple(self.down[0].shape[1:])

    @property
    def expert_bytes(self) -> int:
        """Bytes one expert moves over the link (gate_up + down)."""
        return int(self.gate_up[0][0].nbytes + self.down[0][0].nbytes)

    def expert(self, layer: int, expert: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Host views ``(gate_up [2I, H], down [H, I])`` of one expert."""
        return self.gate_up[layer][expert], self.down[layer][expert]


def check_layout(experts: torch.nn.Module) -> None:
    """Refuse expert modules whose math differs from the fused gate/up + down layout handled here."""
    for flag, want in (("has_gate", True), ("has_bias", False), ("is_transposed", False),
                       ("is_concatenated", True), ("has_post_expert_norm", False)):
        if getattr(experts, flag, want) != want:
            raise OffloadError(f"{type(experts).__name__}.{flag} = {not want}: only fused [gate; up] "
                               "experts without bias, transposition or post-norm are supported")
    for name in ("gate_up_proj", "down_proj", "act_fn", "num_experts"):
        if not hasattr(experts, name):
            raise OffloadError(f"{type(experts).__name__} has no {name!r} (not a transformers 5.x fused experts module)")


def take_experts(modules: list[torch.nn.Module], device: torch.device, pin=None) -> HostExperts:
    """Move the expert weights of ``modules`` to host memory (``pin(tensor)`` makes them page-locked,
    e.g. :meth:`real.offload.device_api.CudaApi.pin`; None leaves them pageable).

    Each module keeps empty placeholder parameters on ``device`` so that moving or inspecting the
    model does not bring the experts back.
    """
    gate_up, down = [], []
    for mod in modules:
        check_layout(mod)
        for name, store in (("gate_up_proj", gate_up), ("down_proj", down)):
            t = getattr(mod, name).detach().to("cpu").contiguous()
            store.append(pin(t) if pin is not None else t)
            setattr(mod, name, torch.nn.Parameter(torch.empty(0, dtype=t.dtype, device=device),
                                                  requires_grad=False))
    return HostExperts(gate_up, down)
