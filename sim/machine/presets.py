"""Preset files and checked spec construction: reading ``conf/`` YAML (parsed once per file version),
and building a spec dataclass from a mapping with its names, types and ranges checked."""
from __future__ import annotations

import copy
import math
import os
from dataclasses import MISSING, fields
from functools import lru_cache
from typing import Any

from omegaconf import OmegaConf

from sim.machine.quant import FORMATS
from traces.datafile import yaml_error_text

PRECISION_BYTES = {name: f.bytes_per_weight for name, f in FORMATS.items()}
MAX_EXPERTS = 4096   # routed experts the simulator takes (its per-expert state grows with them; sim.machine.hf_check)


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the source, field and range."""


_POSITIVE = {"vram_gib", "gpu_mem_bw_gbs", "gpu_tflops", "pcie_h2d_gbs", "cpu_mem_bw_gbs", "cpu_tflops",
             "cpu_threads", "n_layers", "n_experts", "top_k", "hidden", "moe_intermediate", "expert_params",
             "mem_bw_gbs", "fp16_tflops", "h2d_gbs", "pageable_gbs", "cores", "sockets", "mem_channels", "mem_mts",
             "fp32_tflops", "kernels_per_layer", "copies_per_expert"}
_FRACTION = {"gpu_mem_eff", "gpu_flops_eff", "cpu_mem_eff", "cpu_flops_eff", "gpu_attn_eff"}
_NON_NEGATIVE = {"single_thread_ghz", "eager_ref_ghz", "host_single_thread_ghz"}   # 0: unknown / not scaled


def _check_number(annotation, key: str, value, source: str) -> None:
    """A field annotated ``int``/``float`` (``| None``: null too) holds a finite number, not a string,
    a boolean, ``inf`` or ``nan`` (which would otherwise fail deep in the cost model)."""
    kind = str(annotation).replace(" ", "")
    if kind not in ("int", "float", "int|None", "float|None", str(int), str(float)):
        return
    if value is None and "None" in kind:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{source}: field '{key}' must be a finite number, got {value!r}")


def _check_experts(data: dict, source: str) -> None:
    """Routed experts within the simulator's range (:data:`MAX_EXPERTS`), top-k at most the experts."""
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
        if key in _POSITIVE and not getattr(cls, 'zero_allowed', False) and not (isinstance(value, (int, float)) and value > 0):
            raise ConfigError(f"{source}: field '{key}' must be a number > 0, got {value!r}")
        if key in _NON_NEGATIVE and not (isinstance(value, (int, float)) and value >= 0):
            raise ConfigError(f"{source}: field '{key}' must be >= 0 (0 = unknown), got {value!r}")
        if key in _FRACTION and not (isinstance(value, (int, float)) and 0 < value <= 1):
            raise ConfigError(f"{source}: field '{key}' must lie in (0, 1], got {value!r}")
    if "n_experts" in names and "top_k" in names:
        _check_experts(data, source)
    for key in ("precision", "quant", "quant_dense"):
        if "quant" in names and data.get(key) is not None and data[key] not in PRECISION_BYTES:
            raise ConfigError(f"{source}: field '{key}' must be one of {', '.join(PRECISION_BYTES)}, got {data[key]!r}")
    return cls(**data)


@lru_cache(maxsize=512)
def _read_yaml(path: str, mtime_ns: int) -> dict:
    import yaml

    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except yaml.YAMLError as exc:        # a duplicate key, a bad indent: one line naming file and line
        where, what = yaml_error_text(exc)
        raise ConfigError(f"{path}{where}: {what}") from None


def preset_file(group: str, name: str):
    """The path of preset ``conf/<group>/<name>.yaml``; an unknown name lists the valid ones."""
    from sim.paths import CONF_DIR, preset_names

    path = CONF_DIR / group / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"unknown {group} {name!r}; valid: {', '.join(preset_names(group))}")
    return path


def read_yaml(path) -> dict:
    """A YAML file as a fresh dict (parsed once per file version: OmegaConf parsing is slow)."""
    return copy.deepcopy(_read_yaml(str(path), os.stat(path).st_mtime_ns))
