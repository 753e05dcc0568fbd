"""Plain dataclasses for hardware, model and draft specs (converted from Hydra/YAML at the boundary).

The hot loop never touches OmegaConf (its attribute access is ~600x slower than a dataclass).
Every spec is checked when built: a wrong or missing field raises :class:`ConfigError` naming the
file (or group) and the field with its allowed range.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

from omegaconf import OmegaConf

from sim.paths import CONF_DIR, preset_names

PRECISION_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "fp8": 1.0, "q8_0": 1.0625, "q4_k_m": 0.5625, "int4": 0.5625}


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the source, field and range."""


@dataclass(frozen=True)
class HardwareSpec:
    """One machine: GPU, PCIe link, CPU; rates in GB/s and TFLOP/s, overheads in microseconds."""

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
    kv_bytes_per_token: int
    precision: str = "f16"

    @property
    def bytes_per_param(self) -> float:
        return PRECISION_BYTES[self.precision]

    @property
    def expert_bytes(self) -> int:
        return int(self.expert_params * self.bytes_per_param)


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
             "cpu_threads", "n_layers", "n_experts", "top_k", "hidden", "moe_intermediate", "expert_params"}
_FRACTION = {"gpu_mem_eff", "gpu_flops_eff", "cpu_mem_eff", "cpu_flops_eff"}


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
        if key in _POSITIVE and cls is not DraftSpec and not (isinstance(value, (int, float)) and value > 0):
            raise ConfigError(f"{source}: field '{key}' must be a number > 0, got {value!r}")
        if key in _FRACTION and not (isinstance(value, (int, float)) and 0 < value <= 1):
            raise ConfigError(f"{source}: field '{key}' must lie in (0, 1], got {value!r}")
    if data.get("precision", "f16") not in PRECISION_BYTES and cls is ModelSpec:
        raise ConfigError(f"{source}: field 'precision' must be one of {sorted(PRECISION_BYTES)}, got {data['precision']!r}")
    return cls(**data)


def load_preset(group: str, name: str) -> dict:
    """The YAML preset ``conf/<group>/<name>.yaml`` as a dict; unknown names list the valid ones."""
    path = CONF_DIR / group / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"unknown {group} {name!r}; valid: {', '.join(preset_names(group))}")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)


def hardware(name_or_cfg) -> HardwareSpec:
    """A :class:`HardwareSpec` from a preset name or a config mapping."""
    if isinstance(name_or_cfg, str):
        return build_spec(HardwareSpec, load_preset("hardware", name_or_cfg), f"conf/hardware/{name_or_cfg}.yaml")
    return build_spec(HardwareSpec, name_or_cfg, "hardware")


def model(name_or_cfg) -> ModelSpec:
    """A :class:`ModelSpec` from a preset name or a config mapping."""
    if isinstance(name_or_cfg, str):
        return build_spec(ModelSpec, load_preset("model", name_or_cfg), f"conf/model/{name_or_cfg}.yaml")
    return build_spec(ModelSpec, name_or_cfg, "model")


def draft(name_or_cfg) -> DraftSpec:
    """A :class:`DraftSpec` from a preset name or a config mapping."""
    if isinstance(name_or_cfg, str):
        return build_spec(DraftSpec, load_preset("draft", name_or_cfg), f"conf/draft/{name_or_cfg}.yaml")
    return build_spec(DraftSpec, name_or_cfg, "draft")
