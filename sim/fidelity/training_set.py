"""What the training points cover: the classes a prediction is held against to say when it extrapolates.

A prediction is classed on four axes: the GPU preset (``conf/gpu`` name), the host preset
(``conf/host`` name), the runtime (``conf/runtime`` name) and the model family (the model's name
without its size and version: ``qwen3_30b_a3b`` -> ``qwen3``, ``hf:Mixtral-8x7B-v0.1`` -> ``mixtral``,
``deepseek_v2_lite`` -> ``deepseek``). An axis whose value no training point has is an
extrapolation; a runtime with fewer than ``FEW`` training points is named with its count.
The training classes are written once, with the held-out residuals, by ``python -m sim calibrate
runtime=all`` (:mod:`sim.fidelity.residual_store`).
"""
from __future__ import annotations

import re

AXES = ("gpu", "host", "runtime", "family")
FEW = 3   # a runtime with fewer training points than this is named with its count
_SIZE = re.compile(r"^(\d+(x\d+)?[bm]?|a\d+[bm]?|v\d+)$")   # 30b, 8x7b, a3b, v3, 5 (of 4.5): not the family


def model_family(name: str) -> str:
    """A model's family: its name's leading tokens up to the first size or version token."""
    tokens = [t for t in re.split(r"[_\-.:/\s]+", str(name).lower().removeprefix("hf:")) if t]
    keep = []
    for t in tokens:
        if keep and _SIZE.match(t):
            break
        keep.append(t)
    return "_".join(keep) or "unknown"


def point_classes(run: dict, runtime: str) -> dict:
    """The classes of a points-file run mapping (its ``gpu``/``host`` presets, else its named
    ``hardware`` composition's) and its runtime."""
    from sim.machine.compose import composition

    comp = composition(str(run.get("hardware", "rtx4090_pcie4"))) or {}
    part = lambda group: _name(run.get(group, comp.get(group, "unknown")))
    return {"gpu": part("gpu"), "host": part("host"), "runtime": runtime,
            "family": model_family(run.get("model", "qwen3_30b_a3b"))}


def hardware_classes(hw, model_name: str) -> dict:
    """The classes of a resolved run: a :class:`sim.machine.specs.HardwareSpec` and its model's name."""
    parts = hw.parts or {}
    return {"gpu": str(parts.get("gpu", hw.name)), "host": str(parts.get("host", hw.name)),
            "runtime": str(hw.runtime), "family": model_family(model_name)}


def _name(part) -> str:
    return str(part.get("name", "unknown")) if isinstance(part, dict) else str(part)


def counts(records: list[dict], exclude_source: str | None = None) -> dict[str, dict[str, int]]:
    """Training points per value on each axis (points of ``exclude_source`` left out)."""
    out: dict[str, dict[str, int]] = {a: {} for a in AXES}
    for r in records:
        if r.get("source") == exclude_source:
            continue
        for a in AXES:
            out[a][r[a]] = out[a].get(r[a], 0) + 1
    return out


def missing_axes(classes: dict, records: list[dict], exclude_source: str | None = None) -> list[str]:
    """The axes on which no training point shares the prediction's value."""
    seen = counts(records, exclude_source)
    return [a for a in AXES if seen[a].get(classes[a], 0) == 0]


def extrapolation_line(classes: dict, records: list[dict]) -> str:
    """One line naming what the training points lack for this prediction ('' when nothing):
    ``extrapolating: no training point on gpu rtx5070ti, host epyc_ddr5_12ch; runtime vllm has 1 point``."""
    seen = counts(records)
    label = {"gpu": "gpu", "host": "host", "runtime": "runtime", "family": "model family"}
    none = [f"{label[a]} {classes[a]}" for a in AXES if seen[a].get(classes[a], 0) == 0]
    n_rt = seen["runtime"].get(classes["runtime"], 0)
    parts = ([f"no training point on {', '.join(none)}"] if none else []) + \
        ([f"runtime {classes['runtime']} has {n_rt} point{'s' if n_rt > 1 else ''}"] if 0 < n_rt < FEW else [])
    return "extrapolating: " + "; ".join(parts) if parts else ""
