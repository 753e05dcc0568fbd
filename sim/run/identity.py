"""The identity of a simulated run: every input that can change its numbers, and a stable hash of it.

A run is identified by its experiment name, policy and resolved parameters, the resolved model,
draft and hardware specs (every dataclass field, serialised generically, so fields added to a spec
join the identity without code here), the workload and its acceptance, the trace (path and content
hash, or the synthetic generator), requested gen/prompt tokens, context, gamma, seed, cache ratio and
the code version. :func:`run_id` hashes it; a resumed sweep skips exactly the runs whose id is
already in the results file, so a changed input can never return an old row.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
from functools import lru_cache
from pathlib import Path

import numpy as np

from sim.run import spec

ROOT = Path(__file__).resolve().parents[2]
SPEC_COLUMNS = ("model_spec", "draft_spec", "hardware_spec")
IDENTITY_COLUMNS = spec.IDENTITY_COLUMNS   # every key a run's identity may hold (sim.run.resolve.identity_of)


def spec_record(spec) -> dict:
    """Every field of a spec dataclass (or a mapping) as plain JSON-ready values."""
    data = dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else dict(spec)
    for key in getattr(spec, "OMIT_AT_DEFAULT", ()):     # optional fields, unset: records stay as before
        if not data.get(key):
            data.pop(key, None)
    return json.loads(json.dumps(data, sort_keys=True, default=str))


def spec_label(preset: str, given: dict, preset_fields: dict) -> str:
    """The name of a spec changed from its preset: ``rtx4090_pcie4[pcie_h2d_gbs=50]`` (every changed
    field, sorted); the preset's name when nothing changed."""
    changed = sorted(k for k in given if k != "name" and given[k] != preset_fields.get(k))
    if not changed:
        return preset
    return f"{preset}[{','.join(f'{k}={given[k]}' for k in changed)}]"


@lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit of the code, with ``+dirty.<hash of the changed files>`` when the code or
    config folders differ from it (untracked files included, :mod:`sim.run.code_hash`), else the
    package version."""
    from sim.run.code_hash import dirty_suffix

    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        if head:
            return head[:12] + dirty_suffix(ROOT)
    except (OSError, subprocess.SubprocessError):
        pass
    from importlib.metadata import PackageNotFoundError, version
    try:
        return "moe-spac-lab " + version("moe-spac-lab")
    except PackageNotFoundError:
        return "unknown"


@lru_cache(maxsize=256)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def trace_digest(trace) -> str:
    """Content hash of a replayed trace: of its file, or of its arrays and metadata when in memory."""
    if trace.path and os.path.isfile(trace.path):
        st = os.stat(trace.path)
        return _file_digest(os.path.abspath(trace.path), st.st_size, st.st_mtime_ns)
    h = hashlib.sha256(json.dumps(trace.meta, sort_keys=True, default=str).encode())
    h.update(np.ascontiguousarray(trace.experts).tobytes())
    return h.hexdigest()[:16]


def run_id(identity: dict) -> str:
    """A stable hash (16 hex digits) of an identity dict (key order and float noise do not matter)."""
    text = json.dumps(_canonical(identity), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _canonical(value):
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(f"{float(value):.12g}")
    return value


def identity_columns(identity: dict) -> dict:
    """The identity as result-row columns: scalars as they are, specs and parameters as JSON text."""
    row = {}
    for key, value in identity.items():
        row[key] = json.dumps(_canonical(value), sort_keys=True) if isinstance(value, dict) else value
    row["run_id"] = run_id(identity)
    return row
