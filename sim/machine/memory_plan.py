"""The VRAM budget: how many expert slots fit after everything that must stay on the GPU.

``cache_ratio`` = expert slots / all routed experts (0.17 = 1044 of 6144 for Qwen3-30B-A3B); an
engine knob (``slots_per_layer``, ``policy.n_cpu_moe``, kTransformers' GPU experts) may set the
slots instead. ``vram_budget_gib`` caps what the engine may use. A plan that does not fit fails
before simulating, saying how much is missing and the largest setting that fits.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from sim.machine.specs import ConfigError, DraftSpec, HardwareSpec, ModelSpec

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
    n_layers: int = 1
    n_experts: int = 1
    context: int = 0
    detail: str = ""
    terms: object = None        # sim.machine.vram.VramTerms when the runtime's engine places VRAM its own way
    spilled: float = 0.0        # bytes beyond VRAM that CUDA unified memory pages to host memory

    @property
    def free_for_experts(self) -> float:
        return self.vram + self.spilled - self.reserved - self.non_expert - self.draft - self.kv - self.workspace

    @property
    def max_slots(self) -> int:
        return max(0, int(self.free_for_experts // self.expert_bytes))

    @property
    def max_ratio(self) -> float:
        return self.max_slots / self.n_experts_total

    def largest_settings(self) -> str:
        """The largest setting of each placement knob that fits."""
        whole = min(self.n_layers, self.max_slots // self.n_experts)
        return (f"cache_ratio<={self.max_ratio:.3f} ({self.max_slots} slots), "
                f"slots_per_layer<={min(self.n_experts, self.max_slots // self.n_layers)}, "
                f"policy.n_cpu_moe>={self.n_layers - whole} (experts of {whole} of {self.n_layers} layers on the GPU)")

    def summary(self) -> str:
        if self.terms is not None:
            return f"VRAM {self.vram / GIB:.1f} GiB{self.detail}: {self.terms.render(self.n_slots * self.expert_bytes)}"
        parts = [("reserved", self.reserved), (f"non-expert weights{self.detail}", self.non_expert),
                 ("draft", self.draft), (f"KV cache ({self.context} tokens)", self.kv), ("workspace", self.workspace),
                 (f"{self.n_slots} expert slots", self.n_slots * self.expert_bytes)]
        body = ", ".join(f"{name} {b / GIB:.2f} GiB" for name, b in parts)
        return f"VRAM {self.vram / GIB:.1f} GiB: {body}"

    def report(self) -> str:
        """The plan as lines: each part, what is left, and the largest setting that fits."""
        used = self.vram + self.spilled - self.free_for_experts + self.n_slots * self.expert_bytes
        host = (f"; token embedding in host memory {self.terms.host_weights / GIB:.2f} GiB"
                if self.terms is not None and self.terms.host_weights else "")
        host += (f"; {self.spilled / GIB:.2f} GiB beyond VRAM paged to host memory (unified memory)"
                 if self.spilled else "")
        return "\n".join([f"memory plan: {self.summary()}",
                          f"  used {used / GIB:.2f} of {self.vram / GIB:.2f} GiB; one expert {self.expert_bytes / 2**20:.2f} MiB{host}",
                          f"  largest that fits: {self.largest_settings()}"])


@dataclass(frozen=True)
class PlanOptions:
    """How a memory plan is asked for: ``check`` (False returns an over-full plan, for what-if
    tables), expert slots set by an engine knob (``n_slots``, replacing the cache ratio), a VRAM cap
    (``vram_budget_gib``), MoE layers whole on the CPU (``cpu_layers``, llama.cpp ``-ngl``), and the
    engine's memory options (``engine``: :class:`sim.machine.vram.MemoryOptions`; None: defaults)."""

    check: bool = True
    n_slots: int | None = None
    vram_budget_gib: float | None = None
    cpu_layers: int = 0
    engine: object = None


def plan_memory(hw: HardwareSpec, model: ModelSpec, draft: DraftSpec, cache_ratio: float,
                context: int = 4096, opts: PlanOptions = PlanOptions()) -> MemoryPlan:
    """Turn ``cache_ratio`` (or ``n_slots``, when an engine knob sets them) into slots and check
    that everything fits in VRAM (or in ``vram_budget_gib`` of it).

    ``context`` is the KV-cache length reserved for target and draft (sliding-window layers keep at
    most their window); the workspace is the runtime's ``workspace_gib`` plus its
    ``draft_workspace_gib`` when a draft runs; ``cpu_layers`` MoE layers computed whole on the CPU
    (``-ngl``) keep their attention, router and shared-expert weights and their KV in host DRAM. With ``check=False`` an over-full plan is returned
    anyway (for what-if tables). Under the llama.cpp and kTransformers runtimes the parts are those
    engines' own placement (:mod:`sim.machine.vram`), with ``engine`` (:class:`sim.machine.vram.MemoryOptions`:
    KV cache types, micro-batch, flash attention) or its defaults; a llama.cpp-family engine with
    ``unified_memory`` pages what exceeds VRAM to host memory (``spilled``) instead of failing.
    """
    check, n_slots, vram_budget_gib, cpu_layers, engine = (opts.check, opts.n_slots, opts.vram_budget_gib,
                                                           opts.cpu_layers, opts.engine)
    if not 0.0 <= cache_ratio <= 1.0:
        raise ConfigError(f"cache_ratio must lie in 0..1, got {cache_ratio}")
    total = model.n_layers * model.n_experts
    if n_slots is not None and not 0 <= n_slots <= total:
        raise ConfigError(f"expert slots must lie in 0..{total} for {model.name}, got {n_slots}")
    layer_params = model.attn_params_per_layer + model.hidden * model.n_experts + model.shared_params
    vram = hw.vram_gib if vram_budget_gib is None else min(hw.vram_gib, float(vram_budget_gib))
    plan = MemoryPlan(
        vram=vram * GIB,
        reserved=hw.reserved_gib * GIB,
        non_expert=(model.non_expert_params - cpu_layers * layer_params) * model.bytes_per_param,
        draft=draft.weight_bytes,
        kv=model.kv_bytes(context) * (1 - cpu_layers / model.n_layers) + context * draft.kv_bytes_per_token,
        workspace=(hw.workspace_gib + (hw.draft_workspace_gib if draft.params > 0 else 0.0)) * GIB,
        expert_bytes=model.expert_bytes,
        n_experts_total=total,
        n_slots=int(round(cache_ratio * total)) if n_slots is None else int(n_slots),
        n_layers=model.n_layers, n_experts=model.n_experts, context=context,
        detail=f" ({model.dense_quant}; experts {model.file_expert_types or model.expert_quant}, {model.attention.upper()} attention)",
    )
    plan = _engine_plan(plan, hw, model, draft, context, cpu_layers, engine)
    from sim.machine.vram import LLAMA_CPP_RUNTIMES

    if plan.terms is not None and getattr(engine, "unified_memory", False) and hw.runtime in LLAMA_CPP_RUNTIMES:
        plan = replace(plan, spilled=max(0.0, plan.n_slots * plan.expert_bytes - plan.free_for_experts))
    if check and plan.free_for_experts < 0:
        raise ConfigError(
            f"{model.name} + draft {draft.name} do not fit on {hw.name} even without expert slots: "
            f"{-plan.free_for_experts / GIB:.2f} GiB missing.{_copy_hint(plan, hw, model, draft, cpu_layers, engine)} "
            f"{plan.summary()}")
    if check and plan.n_slots > plan.max_slots:
        need = (plan.n_slots - plan.max_slots) * plan.expert_bytes
        what = f"cache_ratio={cache_ratio}" if n_slots is None else f"{n_slots} expert slots"
        raise ConfigError(
            f"{what} does not fit on {hw.name} with {model.name} + draft {draft.name}: "
            f"{plan.n_slots} slots need {need / GIB:.2f} GiB more than the VRAM has. "
            f"The largest ratio that fits is {plan.max_ratio:.3f} ({plan.max_slots} slots); "
            f"largest settings: {plan.largest_settings()}.{_copy_hint(plan, hw, model, draft, cpu_layers, engine)} "
            f"{plan.summary()}")
    return plan


def _copy_hint(plan: MemoryPlan, hw: HardwareSpec, model: ModelSpec, draft: DraftSpec, cpu_layers: int, engine) -> str:
    """A sentence when the plan fits without llama.cpp's op-offload copy of one layer's host experts
    (``op_offload=false``, ``--no-op-offload``), else an empty string."""
    if plan.terms is None or engine is None or not getattr(engine, "op_offload", False):
        return ""
    alt = _engine_plan(plan, hw, model, draft, plan.context, cpu_layers, replace(engine, op_offload=False))
    if alt.workspace >= plan.workspace or alt.n_slots > alt.max_slots:
        return ""
    return (f" It fits with op_offload=false (llama.cpp --no-op-offload: the prompt's host experts computed on "
            f"the CPU, {(plan.workspace - alt.workspace) / GIB:.2f} GiB less compute buffer).")


def _engine_plan(plan: MemoryPlan, hw: HardwareSpec, model: ModelSpec, draft: DraftSpec, context: int,
                 cpu_layers: int, engine) -> MemoryPlan:
    """``plan`` with its parts replaced by the runtime's engine placement (:mod:`sim.machine.vram`), if it has one."""
    from sim.machine.vram import engine_terms

    t = engine_terms(hw, model, draft, context, cpu_layers, engine, plan.n_slots)
    if t is None:
        return plan
    return replace(plan, reserved=t.context + t.pool, non_expert=t.model_bytes, draft=t.draft, kv=t.kv + t.draft_kv,
                   workspace=t.compute + t.draft_workspace, terms=t, detail=t.formats or plan.detail)
