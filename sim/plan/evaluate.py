"""Fast, exact evaluation of placements for the planner: one trace, one schedule and one cost table
per engine, reused by every placement.

A static placement (llama.cpp, kTransformers: a fixed GPU expert mask, nothing moves at decode) has
no state across layers, so a decode step costs the fixed parts (draft, embeddings and lm_head,
attention) plus, per MoE layer, ``max(T_gpu, T_cpu) + sync`` (sync only when CPU experts ran) — the
same recurrence as :class:`sim.engine.decode.Engine` and :mod:`tests.sim.fast_eval`, vectorised over steps and
experts. Each layer's seconds depend only on its own mask row, so whole-layer placements
(``--n-cpu-moe N``, ``-ot`` layer sets) are sums of two per-layer vectors: two evaluations price
all 2^L of them. The tests check every number here against the SimPy engine.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.machine import specs as config
from sim.machine.memory_plan import MemoryPlan, plan_memory
from sim.policies import make_policy
from sim.policies.registry import policy_runtime
from sim.protocol.context import build_context, policy_cost_model, table_context
from sim.run.workload import preset_spec, routing_shape, run_profile, schedule, synthetic_trace
from traces.schema import Trace
from traces.windows import Schedule
from sim.machine.memory_plan import PlanOptions


@dataclass
class Setting:
    """What every placement of one plan shares: model, machine, context, routing and run length."""

    model: object                  # a conf/model name or mapping (config.model accepts both)
    hardware: object               # a composition mapping or a conf/hardware name
    runtime: object = None         # None / "policy": each engine's own runtime
    quant: str | None = None
    quant_dense: str | None = None
    draft: str = "none"
    gamma: int = 8
    context: int = 4096
    prompt_tokens: int = 256
    gen_tokens: int = 256
    seed: int = 0
    workload: str = "gsm8k"
    trace: Trace | None = None
    acceptance: float | None = None
    vram_budget_gib: float | None = None
    engine: object = None          # sim.machine.vram.MemoryOptions (KV cache types, flash attention); None: defaults
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def spec(self) -> config.ModelSpec:
        if "model" not in self._cache:
            self._cache["model"] = config.model(self.model, self.quant, self.quant_dense)
        return self._cache["model"]

    def hw(self, policy: str) -> config.HardwareSpec:
        """The machine under ``policy``'s runtime (or the runtime the plan names for all)."""
        key = ("hw", policy_runtime(policy))
        if key not in self._cache:
            self._cache[key] = config.hardware(self.hardware, runtime=self.runtime, default_runtime=key[1])
        return self._cache[key]

    def draft_spec(self, speculative: bool) -> config.DraftSpec:
        return preset_spec("draft", self.draft if speculative else "none")

    def gamma_of(self, speculative: bool) -> int:
        return int(self.gamma) if speculative else 0

    def trace_key(self, gamma: int) -> tuple | None:
        """The synthetic trace's memo key for ``gamma`` (None when the plan runs on ``trace``)."""
        if self.trace is not None:
            return None
        m = self.spec
        return (m.name, self.workload, self.gen_tokens + gamma + 1, self.seed, routing_shape(m))

    def trace_for(self, gamma: int) -> Trace:
        """The routing every placement is priced on: the user's trace, or the synthetic one."""
        key = self.trace_key(gamma)
        return self.trace if key is None else synthetic_trace(*key)

    def schedule(self, gamma: int) -> Schedule:
        """The decode steps for ``gamma``, built once per plan (every engine's table shares them)."""
        if ("schedule", gamma) in self._cache:
            return self._cache[("schedule", gamma)]
        from sim.speculation.fair import run_acceptance
        from sim.speculation.schedule import speculative_schedule

        trace, key, d = self.trace_for(gamma), self.trace_key(gamma), self.draft_spec(gamma > 0)
        acc = run_acceptance(self.workload, d, self.acceptance)   # the draft preset's, as a run's
        sched = (speculative_schedule(trace, False, gamma, self.gen_tokens, acc, self.seed, d, None)
                 or schedule(trace, key, gamma, self.gen_tokens, acc, self.seed))
        self._cache[("schedule", gamma)] = sched
        return sched

    def memory(self, policy: str, n_slots: int, cpu_layers: int = 0) -> MemoryPlan:
        """The VRAM plan of ``n_slots`` expert slots under ``policy``, with ``cpu_layers`` MoE layers
        kept whole in host DRAM (``-ngl``); never raises: ``fits`` says."""
        speculative = make_policy(policy).speculative
        return plan_memory(self.hw(policy), self.spec, self.draft_spec(speculative), 0.0, self.context,
                           opts=PlanOptions(check=False, n_slots=n_slots, vram_budget_gib=self.vram_budget_gib,
                           cpu_layers=cpu_layers, engine=self.engine))


def fits(plan: MemoryPlan) -> bool:
    """Whether everything of ``plan`` (its expert slots included) fits in its VRAM."""
    return plan.free_for_experts >= 0 and plan.n_slots <= plan.max_slots


def vram_used(plan: MemoryPlan) -> float:
    """Bytes the plan puts in VRAM."""
    return plan.vram - plan.free_for_experts + plan.n_slots * plan.expert_bytes


class StaticTable:
    """Per-(step, layer, expert) GPU and CPU seconds of one engine on one schedule, and the fixed parts.

    ``decode_s(mask)`` is the decode time of the static placement ``mask`` ([L, E] bool, True = on
    the GPU); ``layer_s(mask)`` its per-layer part; ``ngl_s(n)`` the decode time of llama.cpp's
    ``-ngl n`` (the last ``n`` MoE layers whole on the GPU, the others whole on the CPU, attention
    included, and the output layer on the CPU unless ``n`` exceeds the layer count).
    """

    def __init__(self, setting: Setting, policy: str, all_gpu: bool = False):
        """``all_gpu``: price the one placement with every expert on the GPU (a GPU-only forward,
        whose kernels the runtime may run as a CUDA graph: ``CostModel.graphs``)."""
        pol = make_policy(policy)
        m, g = setting.spec, setting.gamma_of(pol.speculative)
        self.policy, self.setting, self.gamma = policy, setting, g
        self.extra_decodes = pol.draft_extra_decodes
        self.sched = setting.schedule(g)
        self.cost = policy_cost_model(pol, setting.hw(policy), m, setting.draft_spec(pol.speculative), g,
                                      n_slots=m.n_layers * m.n_experts if all_gpu else None)
        c = self.sched.counts
        on = c > 0
        self.gpu = np.where(on, self.cost.gpu_expert_table()[c], 0.0)
        self.cpu = np.where(on, self.cost.cpu_expert_table()[c], 0.0)
        self.sync = self.cost.layer_sync_s()
        self.beside = np.array([self.cost.gpu_beside_s(int(n)) for n in self.sched.n_verify])[:, None]
        self.parts = self._fixed_parts(setting.prompt_tokens)
        self.fixed_s = self.parts["draft"] + self.parts["head_gpu"] + m.n_layers * self.parts["attn_gpu"]
        self.tokens = int(self.sched.produced.sum())
        self._whole = self._cpu_whole = None

    def _fixed_parts(self, context: int) -> dict:
        """Seconds of the whole run that no expert placement changes, by part: the draft, the
        output head (embeddings, dense layers, lm_head, host) on the GPU or on the CPU, and one MoE
        layer's attention (+ router, shared experts) on the GPU or on the CPU."""
        cost, s = self.cost, self.sched
        parts = dict.fromkeys(("draft", "head_gpu", "head_cpu", "attn_gpu", "attn_cpu"), 0.0)
        for step in range(s.n_steps):
            n = int(s.n_verify[step])
            parts["draft"] += cost.draft_step_s(s.draft_decodes(step), self.extra_decodes, context)
            parts["head_gpu"] += cost.step_fixed_s(n)
            parts["head_cpu"] += cost.cpu_step_fixed_s(n)
            parts["attn_gpu"] += cost.layer_fixed_s(n, context)
            parts["attn_cpu"] += cost.cpu_layer_fixed_s(n, context)
            context += int(s.produced[step])
        return parts

    def layer_s(self, mask: np.ndarray, beside: bool = True) -> np.ndarray:
        """Seconds of each MoE layer's experts over the run under ``mask``; ``beside``: the GPU also
        runs the shared experts where the runtime overlaps them with the CPU's (a layer on the GPU)."""
        mask = np.asarray(mask, dtype=bool)
        g = np.einsum("sle,le->sl", self.gpu, mask.astype(float)) + (self.beside if beside else 0.0)
        c = np.einsum("sle,le->sl", self.cpu, (~mask).astype(float))
        return (np.maximum(g, c) + self.sync * (c > 0)).sum(axis=0)

    def decode_s(self, mask: np.ndarray) -> float:
        return self.fixed_s + float(self.layer_s(mask).sum())

    def tps(self, decode_s: float) -> float:
        return self.tokens / decode_s

    def ngl_s(self, n_gpu_layers: int) -> float:
        """Decode seconds of llama.cpp ``-ngl n_gpu_layers`` (no ``--n-cpu-moe``): the first
        ``L - n`` MoE layers run whole on the CPU (attention from host DRAM, experts on the CPU),
        the output layer too unless ``n > L`` (llama.cpp ``llm_load_tensors``: ``i_gpu_start =
        n_layer - n_gpu_layers``; the output layer is offloaded only past the last block). ``n > L``
        is the GPU-only forward: price it on a table built with ``all_gpu=True``."""
        L = self.gpu.shape[1]
        on_gpu, on_cpu = self.whole_layer_s()[0], self.cpu_layer_s()
        c = L - min(int(n_gpu_layers), L)
        p = self.parts
        head = p["head_cpu"] if n_gpu_layers <= L else p["head_gpu"]
        return (p["draft"] + head + (L - c) * p["attn_gpu"] + c * p["attn_cpu"]
                + float(on_cpu[:c].sum()) + float(on_gpu[c:].sum()))

    def cpu_layer_s(self) -> np.ndarray:
        """Per layer: the experts' seconds of a layer whole on the CPU (``-ngl``: its shared experts
        run there with its attention, none beside on the GPU); computed once per table."""
        if self._cpu_whole is None:
            self._cpu_whole = self.layer_s(np.zeros(self.gpu.shape[1:], bool), beside=False)
        return self._cpu_whole

    def whole_layer_s(self) -> tuple[np.ndarray, np.ndarray]:
        """Per layer: seconds with all its experts on the GPU, and with all on the CPU (computed
        once per table: every whole-layer placement is priced from these two vectors)."""
        if self._whole is None:
            L, E = self.gpu.shape[1:]
            self._whole = self.layer_s(np.ones((L, E), bool)), self.layer_s(np.zeros((L, E), bool))
        return self._whole

    def policy_mask(self, n_slots: int, **policy_args) -> np.ndarray:
        """The GPU mask the policy places in ``n_slots`` slots (its own ``initial_residency``)."""
        m, s = self.setting.spec, self.setting
        pol = make_policy(self.policy, **policy_args)
        ctx = build_context(pol, self.cost, n_slots, self.gamma, table_context(s.prompt_tokens, s.gen_tokens),
                            seed=s.seed, profile=run_profile(pol, m, s.seed, self.setting.trace_for(self.gamma)))
        pol.reset(ctx, None)
        mask = np.zeros((m.n_layers, m.n_experts), bool)
        for layer, expert in pol.initial_residency():
            mask[layer, expert] = True
        return mask

