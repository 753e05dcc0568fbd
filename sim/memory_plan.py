"""The VRAM budget: how many expert slots fit after everything that must stay on the GPU.

``cache_ratio`` = expert slots / all routed experts (0.17 = 1044 of 6144 for Qwen3-30B-A3B).
A plan that does not fit fails before simulating, saying how much is missing and the largest ratio
that fits.
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.config import ConfigError, DraftSpec, HardwareSpec, ModelSpec

GIB = 2 ** 30


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes of each VRAM tenant and the resulting number of expert slots."""

    vram: float
    reserved: float
    non_expert: float
    draft: float
    kv: float
    workspace: float
    expert_bytes: int
    n_experts_total: int
    n_slots: int

    @property
    def free_for_experts(self) -> float:
        return self.vram - self.reserved - self.non_expert - self.draft - self.kv - self.workspace

    @property
    def max_slots(self) -> int:
        return max(0, int(self.free_for_experts // self.expert_bytes))

    @property
    def max_ratio(self) -> float:
        return self.max_slots / self.n_experts_total

    def summary(self) -> str:
        parts = [("reserved", self.reserved), ("non-expert weights", self.non_expert), ("draft", self.draft),
                 ("KV cache", self.kv), ("workspace", self.workspace),
                 (f"{self.n_slots} expert slots", self.n_slots * self.expert_bytes)]
        body = ", ".join(f"{name} {b / GIB:.2f} GiB" for name, b in parts)
        return f"VRAM {self.vram / GIB:.1f} GiB: {body}"


def plan_memory(hw: HardwareSpec, model: ModelSpec, draft: DraftSpec, cache_ratio: float,
                context: int = 4096, check: bool = True) -> MemoryPlan:
    """Turn ``cache_ratio`` into slots and check that everything fits in VRAM.

    ``context`` is the KV-cache length reserved for target and draft; the workspace (compute
    buffers, allocator slack) is the machine's ``workspace_gib``. With ``check=False`` an over-full
    plan is returned anyway (for what-if tables).
    """
    if not 0.0 <= cache_ratio <= 1.0:
        raise ConfigError(f"cache_ratio must lie in 0..1, got {cache_ratio}")
    total = model.n_layers * model.n_experts
    plan = MemoryPlan(
        vram=hw.vram_gib * GIB,
        reserved=hw.reserved_gib * GIB,
        non_expert=model.non_expert_params * model.bytes_per_param,
        draft=draft.weight_bytes,
        kv=context * (model.kv_bytes_per_token + draft.kv_bytes_per_token),
        workspace=hw.workspace_gib * GIB,
        expert_bytes=model.expert_bytes,
        n_experts_total=total,
        n_slots=int(round(cache_ratio * total)),
    )
    if check and plan.free_for_experts < 0:
        raise ConfigError(
            f"{model.name} + draft {draft.name} do not fit on {hw.name} even without expert slots: "
            f"{-plan.free_for_experts / GIB:.2f} GiB missing. {plan.summary()}")
    if check and plan.n_slots > plan.max_slots:
        need = (plan.n_slots - plan.max_slots) * plan.expert_bytes
        raise ConfigError(
            f"cache_ratio={cache_ratio} does not fit on {hw.name} with {model.name} + draft {draft.name}: "
            f"{plan.n_slots} slots need {need / GIB:.2f} GiB more than the VRAM has. "
            f"The largest ratio that fits is {plan.max_ratio:.3f} ({plan.max_slots} slots). {plan.summary()}")
    return plan
