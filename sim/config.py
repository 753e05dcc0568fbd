"""Plain dataclasses for hardware, model and draft specs (converted from Hydra/YAML at the boundary).

The hot loop never touches OmegaConf (its attribute access is ~600x slower than a dataclass).
Every spec is checked when built: a wrong or missing field raises :class:`ConfigError` naming the
file (or group) and the field with its allowed range.
"""
from __future__ import annotations

import copy
import os
from dataclasses import MISSING, dataclass, fields
from functools import lru_cache
from typing import Any

from omegaconf import OmegaConf

from sim.paths import CONF_DIR, preset_names

from sim.specs.quant import FORMATS, bytes_per_weight

PRECISION_BYTES = {name: f.bytes_per_weight for name, f in FORMATS.items()}
LEGACY_DRAFT_OVERHEAD_FRAC = 0.5  # a flat machine without draft_overhead_us: half the target's (custom_cuda's ratio)


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the source, field and range."""


@dataclass(frozen=True)
class HardwareSpec:
    """One resolved machine: GPU, PCIe link, CPU and the runtime's efficiencies; rates in GB/s and
    TFLOP/s, overheads in microseconds. Built by :func:`hardware` from a gpu x host x link
    composition and a runtime profile (:mod:`sim.specs.machine`), or flat (``real profile`` output).
    """

    name: str
    gpu: str
    vram_gib: float
    gpu_mem_bw_gbs: float
    gpu_mem_eff: float
    gpu_tflops: float
    gpu_flops_eff: float
    gpu_kernel_us: float
    pcie_h2d_gbs: float
    pcie_latency_us: float
    cpu: str
    cpu_mem_bw_gbs: float
    cpu_mem_eff: float
    cpu_tflops: float
    cpu_flops_eff: float
    cpu_threads: int
    cpu_expert_us: float
    layer_sync_us: float
    step_overhead_us: float
    reserved_gib: float
    workspace_gib: float = 4.4  # engine compute buffers + allocator slack (see conf/hardware)
    tables: dict | None = None  # measured cost tables written by `python -m real profile`
    runtime: str = "custom_cuda"            # the runtime profile these efficiencies come from
    draft_workspace_gib: float = 0.0        # extra workspace when a draft model runs
    draft_overhead_us: float | None = None  # per draft forward; None: LEGACY_DRAFT_OVERHEAD_FRAC x step
    kernels_per_layer: int = 8              # conf/runtime/custom_cuda.yaml documents these four
    kernels_per_shared_expert: int = 3
    kernels_per_draft_layer: int = 8
    copies_per_expert: int = 1
    gpu_quant_eff: dict | None = None       # expert format -> multiplier on gpu_mem_eff
    cpu_quant_eff: dict | None = None       # expert format -> multiplier on cpu_mem_eff
    parts: dict | None = None               # the gpu/host/link presets it was composed of
    cpu_op_us: float = 0.0                  # conf/runtime/custom_cuda.yaml documents these four
    cpu_ops_per_layer: int = 0
    cpu_kv_eff: float = 1.0
    sample_us: float = 0.0
    gpu_graph_kernel_us: float = 0.0        # per kernel inside a CUDA graph (0: the runtime uses none)
    gpu_ops_per_expert: int = 1             # GPU kernel launches (eager ops) per GPU expert call
    gpu_quant_ops: dict | None = None       # format -> extra eager ops per GPU linear of that format
    stream_dense: bool = False              # a streamed (UVA) layer's dense weights cross the link too
    cpu_isa: str = ""                       # the host's widest ISA (avx2 | avx512 | amx)
    cpu_dequant_ops: dict | None = None     # format -> FLOP-equivalent CPU ops per weight per token (2 if absent)
    cpu_isa_ops_scale: dict | None = None   # ISA -> multiplier on cpu_dequant_ops
    host_dram_gbs: float = 0.0              # sustained host DRAM GB/s shared by CPU kernels and DMA (0: not modelled)

    def __post_init__(self):
        if self.draft_overhead_us is None:
            object.__setattr__(self, "draft_overhead_us", LEGACY_DRAFT_OVERHEAD_FRAC * self.step_overhead_us)


@dataclass(frozen=True)
class ModelSpec:
    """A MoE target model: routing shape and byte sizes."""

    name: str
    n_layers: int
    n_dense_layers: int
    n_experts: int
    top_k: int
    n_shared_experts: int
    hidden: int
    moe_intermediate: int
    expert_params: int
    non_expert_params: float
    attn_params_per_layer: int
    lm_head_params: int
    kv_bytes_per_token: int                 # KV bytes per context token of the full-attention layers
    precision: str = "f16"                  # legacy: the format of every weight when quant is unset
    quant: str | None = None                # routed experts' format (sim.specs.quant)
    quant_dense: str | None = None          # every other weight's format (default: quant)
    shared_intermediate: int = 0            # FFN width of one shared expert (0: moe_intermediate)
    dense_intermediate: int = 0             # FFN width of a dense (non-MoE) layer
    embed_params: int = 0                   # token embedding (0 when tied into lm_head or unknown)
    kv_swa_bytes_per_token: int = 0         # KV bytes per token of the sliding-window layers
    sliding_window: int = 0                 # their window (tokens)
    attention: str = "gqa"                  # gqa | mla (how kv_bytes_per_token was derived)
    source: str = ""                        # where the architecture numbers come from

    @property
    def expert_quant(self) -> str:
        return self.quant or self.precision

    @property
    def dense_quant(self) -> str:
        return self.quant_dense or self.quant or self.precision

    @property
    def bytes_per_param(self) -> float:
        """Bytes per weight of everything except the routed experts."""
        return PRECISION_BYTES[self.dense_quant]

    @property
    def expert_bytes(self) -> int:
        return int(self.expert_params * bytes_per_weight(self.expert_quant))

    @property
    def shared_params(self) -> int:
        """Weights of all shared experts of one layer."""
        return self.n_shared_experts * 3 * self.hidden * (self.shared_intermediate or self.moe_intermediate)

    @property
    def total_params(self) -> float:
        return self.n_layers * self.n_experts * self.expert_params + self.non_expert_params

    @property
    def active_params(self) -> float:
        """Weights one token reads: everything but the routed experts it did not choose."""
        return self.n_layers * self.top_k * self.expert_params + self.non_expert_params

    def kv_bytes(self, context: int) -> int:
        """Target KV-cache bytes for ``context`` tokens (sliding-window layers keep at most their window)."""
        return context * self.kv_bytes_per_token + min(context, self.sliding_window) * self.kv_swa_bytes_per_token


@dataclass(frozen=True)
class DraftSpec:
    """A dense draft model for speculative decoding (``name: none`` for none)."""

    name: str
    params: float
    bytes_per_param: float
    n_layers: int
    kv_bytes_per_token: int
    kind: str = "model"                 # model | head (EAGLE/MTP: reads the target's hidden state) | ngram
    host_us_per_token: float = 0.0      # host time per drafted token (n-gram lookup, sampling)
    acceptance: dict | None = None      # per-workload first-position acceptance (None: the workload's)
    acceptance_decay: float = 1.0       # conditional acceptance falls by this factor per position
    source: str = ""

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_param


_POSITIVE = {"vram_gib", "gpu_mem_bw_gbs", "gpu_tflops", "pcie_h2d_gbs", "cpu_mem_bw_gbs", "cpu_tflops",
             "cpu_threads", "n_layers", "n_experts", "top_k", "hidden", "moe_intermediate", "expert_params",
             "mem_bw_gbs", "fp16_tflops", "h2d_gbs", "pageable_gbs", "cores", "sockets", "mem_channels", "mem_mts",
             "fp32_tflops", "kernels_per_layer", "copies_per_expert"}
_FRACTION = {"gpu_mem_eff", "gpu_flops_eff", "cpu_mem_eff", "cpu_flops_eff"}


def _check_number(annotation, key: str, value, source: str) -> None:
    """A field annotated ``int``/``float`` (``| None``: null too) holds a finite number, not a string,
    a boolean, ``inf`` or ``nan`` (which would otherwise fail deep in the cost model)."""
    kinds = {str(annotation).replace(" ", "")}
    if not kinds & {"int", "float", "int|None", "float|None", str(int), str(float)}:
        return
    from sim.user_input import Rule, UserInputError, check

    try:
        check(key, value, Rule("number", nullable="None" in str(annotation)))
    except UserInputError:
        raise ConfigError(f"{source}: field '{key}' must be a finite number, got {value!r}") from None


def _check_experts(data: dict, source: str) -> None:
    """Routed experts within the simulator's range (:data:`sim.specs.hf_check.MAX_EXPERTS`: the
    per-expert state grows with it), top-k at most the experts."""
    from sim.specs.hf_check import MAX_EXPERTS

    n, k = data.get("n_experts"), data.get("top_k")
    if isinstance(n, (int, float)) and n > MAX_EXPERTS:
        raise ConfigError(f"{source}: field 'n_experts' must be at most {MAX_EXPERTS}, got {n!r}")
    if isinstance(n, (int, float)) and isinstance(k, (int, float)) and k > n:
        raise ConfigError(f"{source}: field 'top_k' must be at most n_experts ({n}), got {k!r}")


def build_spec(cls, data: Any, source: str):
    """Build ``cls`` from a mapping, checking names, types and ranges; errors name ``source`` and the field."""
    if not isinstance(data, dict):
        data = OmegaConf.to_container(data, resolve=True)
    names = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{source}: unknown field(s) {unknown}; valid: {sorted(names)}")
    missing = [n for n, f in names.items()
               if n not in data and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise ConfigError(f"{source}: missing field(s) {missing}")
    for key, value in data.items():
        _check_number(names[key].type, key, value, source)
        if key in _POSITIVE and cls is not DraftSpec and not (isinstance(value, (int, float)) and value > 0):
            raise ConfigError(f"{source}: field '{key}' must be a number > 0, got {value!r}")
        if key in _FRACTION and not (isinstance(value, (int, float)) and 0 < value <= 1):
            raise ConfigError(f"{source}: field '{key}' must lie in (0, 1], got {value!r}")
    if cls is ModelSpec:
        _check_experts(data, source)
    for key in ("precision", "quant", "quant_dense"):
        if cls is ModelSpec and data.get(key) is not None and data[key] not in PRECISION_BYTES:
            raise ConfigError(f"{source}: field '{key}' must be one of {', '.join(PRECISION_BYTES)}, got {data[key]!r}")
    return cls(**data)


@lru_cache(maxsize=512)
def _read_yaml(path: str, mtime_ns: int) -> dict:
    import yaml

    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except yaml.YAMLError as exc:        # a duplicate key, a bad indent: one line naming file and line
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{where}: {what}") from None


def read_yaml(path) -> dict:
    """A YAML file as a fresh dict (parsed once per file version: OmegaConf parsing is slow)."""
    return copy.deepcopy(_read_yaml(str(path), os.stat(path).st_mtime_ns))


def load_preset(group: str, name: str) -> dict:
    """The YAML preset ``conf/<group>/<name>.yaml`` as a dict; unknown names list the valid ones."""
    path = CONF_DIR / group / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"unknown {group} {name!r}; valid: {', '.join(preset_names(group))}")
    if group == "hardware":
        from sim.specs.machine import composition

        comp = composition(name)
        if comp is not None:
            return comp
    return read_yaml(path)


def hardware(name_or_cfg, runtime=None, default_runtime: str = "custom_cuda") -> HardwareSpec:
    """A :class:`HardwareSpec` from a preset name or a mapping: a composition ``{name, gpu, host,
    link, <flat field overrides>}`` (parts by name or as mappings) resolved with ``runtime`` (a name,
    a mapping, or None for ``default_runtime``), or a flat machine (every field, e.g. a profile)."""
    from sim.specs.machine import compose, runtime_spec

    data, source = name_or_cfg, "hardware"
    if isinstance(name_or_cfg, str):
        data, source = load_preset("hardware", name_or_cfg), f"conf/hardware/{name_or_cfg}.yaml"
    elif not isinstance(data, dict):
        data = OmegaConf.to_container(data, resolve=True)
    if "host" in data:
        data = compose(data, runtime_spec(data.get("runtime", runtime), default_runtime))
    return build_spec(HardwareSpec, data, source)


def model(name_or_cfg, quant: str | None = None, quant_dense: str | None = None) -> ModelSpec:
    """A :class:`ModelSpec` from a preset name, ``hf:PATH`` (a config.json or its folder), or a
    mapping (``hf_path`` in it derives from that file, other keys override); ``quant`` sets the
    routed experts' format and ``quant_dense`` the rest (default: ``quant``)."""
    if isinstance(name_or_cfg, str) and name_or_cfg.startswith("hf:"):
        data, source = _hf(name_or_cfg[3:]), name_or_cfg
    elif isinstance(name_or_cfg, str):
        data, source = load_preset("model", name_or_cfg), f"conf/model/{name_or_cfg}.yaml"
    else:
        data = name_or_cfg if isinstance(name_or_cfg, dict) else OmegaConf.to_container(name_or_cfg, resolve=True)
        data, source = dict(data), "model"
        if data.get("hf_path"):
            data = {**_hf(data.pop("hf_path")), **{k: v for k, v in data.items() if v is not None}}
        data.pop("hf_path", None)
    if quant is not None:
        data = {**data, "quant": quant, "quant_dense": quant_dense or quant}
    elif quant_dense is not None:
        data = {**data, "quant_dense": quant_dense}
    return build_spec(ModelSpec, data, source)


def _hf(path: str) -> dict:
    from sim.specs.hf_config import UnsupportedConfig, from_path

    try:
        return from_path(path)
    except UnsupportedConfig as exc:
        raise ConfigError(str(exc)) from None


def draft(name_or_cfg) -> DraftSpec:
    """A :class:`DraftSpec` from a preset name or a config mapping."""
    if isinstance(name_or_cfg, str):
        return build_spec(DraftSpec, load_preset("draft", name_or_cfg), f"conf/draft/{name_or_cfg}.yaml")
    return build_spec(DraftSpec, name_or_cfg, "draft")
