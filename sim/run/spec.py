"""The run specification: every input of one simulated run, in one frozen tree.

A :class:`RunSpec` groups the knobs by what they describe (the machine, the model, the draft and
speculation, the policy, the workload, the memory placement, prefill and batching, the run itself).
Every command builds one (:meth:`RunSpec.of` from flat ``key=value`` names, each name a field of
exactly one group); :func:`sim.run.resolve.resolve` and :func:`sim.run.runner.run_one` take one; a
row's identity is derived from every field (:func:`sim.run.resolve.identity_of`). Adding a knob is one
field here plus its use (and, for the command line, its range in :mod:`sim.run.user_input`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

from sim.machine.presets import ConfigError
from sim.prefill.decision import KT_DEFAULT_THRESHOLD


@dataclass(frozen=True)
class MachineChoice:
    """The machine: a ``conf/hardware`` preset name or a composition mapping (``gpu``/``host``/``link``
    and field overrides), and the runtime profile (None: the policy's)."""

    hardware: Any = "rtx4090_pcie4"
    runtime: Any = None


@dataclass(frozen=True)
class ModelChoice:
    """The target model (preset name, ``hf:PATH`` or a mapping) and its weight formats."""

    model: Any = "qwen3_30b_a3b"
    quant: str | None = None
    quant_dense: str | None = None


@dataclass(frozen=True)
class DraftChoice:
    """Speculation: the draft (preset name or mapping), drafted tokens per step, per-token acceptance
    (None: the workload's) and the shape of the accepted counts (:mod:`traces.acceptance`)."""

    draft: Any = "qwen3_4b_fp8"
    gamma: int = 8
    acceptance: float | None = None
    acceptance_model: dict | None = None


@dataclass(frozen=True)
class PolicyChoice:
    """The policy preset, its parameter overrides, and ``overlap=False`` (blocking prefetches)."""

    policy: str = "llamacpp"
    policy_args: dict | None = None
    overlap: bool | None = None


@dataclass(frozen=True)
class WorkloadChoice:
    """The workload preset (None: a replayed trace's own), or a trace to replay, and the prompt length."""

    workload: str | None = "gsm8k"
    trace: Any = None
    prompt_tokens: int = 256


@dataclass(frozen=True)
class MemoryChoice:
    """Where experts may live: the cacheable share of experts, or slots per layer, a VRAM cap, the KV
    context reserved, ``equal_vram`` (an AR policy gets the draft's VRAM as slots), and the KV cache
    element types, flash attention and full-size sliding-window caches that size llama.cpp's KV cache
    and compute buffer (``-ctk`` / ``-ctv`` / ``-fa`` / ``--swa-full``, :mod:`sim.machine.vram`), and
    ``unified_memory`` (``GGML_CUDA_ENABLE_UNIFIED_MEMORY=1``: what exceeds VRAM pages to host memory),
    ``op_offload`` (false: llama.cpp ``--no-op-offload``, the prompt's host experts computed on the CPU,
    never copied into the compute buffer)."""

    cache_ratio: float = 0.17
    slots_per_layer: int | None = None
    vram_budget_gib: float | None = None
    context: int = 4096
    equal_vram: bool = False
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: bool = True
    swa_full: bool = False
    unified_memory: bool = False
    op_offload: bool = True


@dataclass(frozen=True)
class ServingOptions:
    """Prefill before the decode (micro-batches of ``ubatch``, copy-or-CPU by ``prefill_rule``) and
    ``batch`` concurrent requests, request i joining at step ``i * stagger`` (:mod:`sim.run.requests`)."""

    prefill: bool = False
    ubatch: int = 512
    prefill_rule: str = "auto"
    prefill_threshold: int = KT_DEFAULT_THRESHOLD
    batch: int = 1
    stagger: int = 0


@dataclass(frozen=True)
class RunControl:
    """The run itself: tokens to generate, seed, experiment label, timeline export, and the KV length
    of the policy's cost table (None: the middle of the generation; a replay passes the real run's)."""

    gen_tokens: int = 512
    seed: int = 0
    experiment: str = "adhoc"
    timeline: bool = False
    table_tokens: int | None = None


@dataclass(frozen=True)
class RunSpec:
    """Every input of one run, grouped; build with :meth:`of` from flat names."""

    machine: MachineChoice = field(default_factory=MachineChoice)
    model: ModelChoice = field(default_factory=ModelChoice)
    draft: DraftChoice = field(default_factory=DraftChoice)
    policy: PolicyChoice = field(default_factory=PolicyChoice)
    workload: WorkloadChoice = field(default_factory=WorkloadChoice)
    memory: MemoryChoice = field(default_factory=MemoryChoice)
    serving: ServingOptions = field(default_factory=ServingOptions)
    run: RunControl = field(default_factory=RunControl)

    @classmethod
    def of(cls, **flat) -> "RunSpec":
        """A spec from flat names (``policy=``, ``cache_ratio=``, ...); unknown names are refused."""
        return cls().replace(**flat)

    def replace(self, **flat) -> "RunSpec":
        """This spec with the given flat fields changed."""
        groups: dict[str, dict] = {}
        for key, value in flat.items():
            group = GROUP_OF.get(key)
            if group is None:
                raise ConfigError(f"{key}={value!r}: not a run key; valid: {', '.join(sorted(GROUP_OF))}")
            groups.setdefault(group, {})[key] = value
        return dataclasses.replace(self, **{g: dataclasses.replace(getattr(self, g), **v) for g, v in groups.items()})

    def flat(self) -> dict:
        """Every field by its flat name."""
        return {f.name: getattr(getattr(self, g), f.name) for g, cls in GROUPS.items() for f in fields(cls)}


GROUPS = {f.name: f.default_factory for f in fields(RunSpec)}
GROUP_OF = {f.name: g for g, cls in GROUPS.items() for f in fields(cls)}
FLAT_KEYS = tuple(GROUP_OF)
assert len(GROUP_OF) == sum(len(fields(c)) for c in GROUPS.values()), "a flat name belongs to one group"

RECORDED = {   # flat keys whose resolved value enters a run's identity under another name (None: never)
    "hardware": "hardware_spec", "runtime": "hardware_spec", "model": "model_spec", "quant": "model_spec",
    "quant_dense": "model_spec", "draft": "draft_spec", "policy_args": "policy_params", "overlap": "policy_params",
    "trace": "trace", "gen_tokens": "gen_tokens_asked", "timeline": None}
IDENTITY_CORE = ("experiment", "policy", "policy_params", "workload", "acceptance", "model_spec", "draft_spec",
                 "hardware_spec", "cache_ratio", "gamma", "gen_tokens_asked", "prompt_tokens", "context", "seed",
                 "slots_per_layer", "vram_budget_gib", "equal_vram", "acceptance_model", "trace", "trace_sha256",
                 "code_version")   # always in a run's identity
IDENTITY_COLUMNS = IDENTITY_CORE + tuple(k for k in FLAT_KEYS if k not in IDENTITY_CORE and k not in RECORDED)
