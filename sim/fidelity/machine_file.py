"""``machine=DIR/machine.yaml``: a machine calibrated by ``python -m sim calibrate bench=FILE``.

The file names the datasheet parts (``gpu``, ``host``, ``link``: preset names or mappings) and the
fitted flat machine fields (``hardware:``: ``cpu_mem_eff``, ``cpu_flops_eff``, ``pcie_h2d_gbs``, ``gpu_mem_eff``,
``step_overhead_us``); :func:`machine_hardware` turns it into the hardware composition every
command accepts, so a calibrated machine replaces ``hardware=`` / ``gpu=`` / ``host=`` / ``link=``
for any policy and runtime (the flat fields override what the runtime profile would give).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sim.machine.specs import ConfigError

FLAT_FIELDS = ("cpu_mem_eff", "cpu_flops_eff", "pcie_h2d_gbs", "gpu_mem_eff", "step_overhead_us")


def load_machine(path: str | Path) -> dict:
    """The checked content of a machine.yaml (errors name the file and the key)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"machine={path}: no such file (write one with python -m sim calibrate bench=FILE out=DIR)")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"machine={path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if doc.get("kind") != "calibrated_machine":
        raise ConfigError(f"machine={path}: key 'kind' must be calibrated_machine, got {doc.get('kind')!r}")
    for key in ("gpu", "host", "link", "hardware"):
        if key not in doc:
            raise ConfigError(f"machine={path}: missing key '{key}'")
    for k, v in doc["hardware"].items():
        if k not in FLAT_FIELDS or not (isinstance(v, (int, float)) and v > 0):
            raise ConfigError(f"machine={path}: hardware.{k}={v!r}: allowed keys {list(FLAT_FIELDS)}, each a number > 0")
    return doc


def machine_hardware(path: str | Path) -> dict:
    """The hardware composition ``{name, gpu, host, link, <fitted flat fields>}`` of a machine.yaml;
    its name ends in ``@calibrated-<hash of the fitted values>``."""
    doc = load_machine(path)
    parts = {k: doc[k] for k in ("gpu", "host", "link")}
    label = "+".join(v if isinstance(v, str) else str(v.get("name", k)) for k, v in parts.items())
    digest = hashlib.sha1(json.dumps([parts, doc["hardware"]], sort_keys=True).encode()).hexdigest()[:8]
    return {"name": f"{label}@calibrated-{digest}", **parts, **{k: float(v) for k, v in doc["hardware"].items()}}
