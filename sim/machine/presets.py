"""Preset files and checked spec construction: reading ``conf/`` YAML (parsed once per file version),
and building a spec dataclass from a mapping with its names, types and ranges checked."""
from __future__ import annotations

import copy
import os
from dataclasses import MISSING, fields
from functools import lru_cache
from typing import Any

from omegaconf import OmegaConf

from sim.machine.quant import FORMATS

PRECISION_BYTES = {name: f.bytes_per_weight for name, f in FORMATS.items()}


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the source, field and range."""


_POSITIVE = {"vram_gib", "gpu_mem_bw_gbs", "gpu_tflops", "pcie_h2d_gbs", "cpu_mem_bw_gbs", "cpu_tflops",
             "cpu_threads", "n_layers", "n_experts", "top_k", "hidden", "moe_intermediate", "expert_params",
             "mem_bw_gbs", "fp16_tflops", "h2d_gbs", "pageable_gbs", "cores", "sockets", "mem_channels", "mem_mts",
             "fp32_tflops", "kernels_per_layer", "copies_per_expert"}
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
        if key in _POSITIVE and not getattr(cls, 'zero_allowed', False) and not (isinstance(value, (int, float)) and value > 0):
            raise ConfigError(f"{source}: field '{key}' must be a number > 0, got {value!r}")
        if key in _FRACTION and not (isinstance(value, (int, float)) and 0 < value <= 1):
            raise ConfigError(f"{source}: field '{key}' must lie in (0, 1], got {value!r}")
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
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{where}: {what}") from None


def read_yaml(path) -> dict:
    """A YAML file as a fresh dict (parsed once per file version: OmegaConf parsing is slow)."""
    return copy.deepcopy(_read_yaml(str(path), os.stat(path).st_mtime_ns))
