"""Points files: published measurements, each with the ``python -m sim run`` overrides that
reproduce its configuration.

A points file is YAML with ``points:`` (each ``id``, ``measured_tok_s``, ``source``, ``grade``,
optional ``system`` / ``group`` (same machine) and ``run:``, a mapping of run keys) and optional
``ratios:`` (same-machine claims: ``id``, ``num``, ``den`` point ids). Run keys are those of
``conf/run.yaml`` plus ``policy``, ``workload``, ``hardware``, ``gpu``/``host``/``link`` (preset
names), their fields as ``gpu.X`` / ``host.X`` / ``link.X``, flat machine fields as ``hardware.X``
(``hardware.cpu_threads``: the engine's CPU threads), ``runtime`` and ``runtime.X``, and policy
parameters as ``policy.X``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


from sim.machine.specs import ConfigError

RUN_KEYS = {"policy", "workload", "model", "draft", "quant", "quant_dense", "gamma", "acceptance", "cache_ratio",
            "slots_per_layer", "vram_budget_gib", "prompt_tokens", "gen_tokens", "context", "seed", "runtime",
            "hardware", "gpu", "host", "link",
            "ubatch", "cache_type_k", "cache_type_v", "flash_attn", "swa_full", "unified_memory", "op_offload"}   # engine memory flags
PREFIXES = ("gpu.", "host.", "link.", "hardware.", "runtime.", "policy.")


@dataclass(frozen=True)
class Point:
    """One published measurement and the run that models it."""

    id: str
    measured_tok_s: float
    source: str
    grade: str
    run: dict
    system: str = ""
    group: str = ""
    note: str = ""


@dataclass(frozen=True)
class Ratio:
    """A same-machine claim: measured tok/s of point ``num`` over point ``den``."""

    id: str
    num: str
    den: str
    claim: str = ""


@dataclass
class PointsFile:
    """The points and ratio claims of one file."""

    path: str
    points: list[Point]
    ratios: list[Ratio] = field(default_factory=list)


def load_points(path: str | Path) -> PointsFile:
    """Read and check a points file (plain data: no interpolation, see :mod:`traces.datafile`);
    errors name the file, the point and the key (:mod:`sim.fidelity.points_check`)."""
    from sim.fidelity.points_check import check_file, check_point, check_ratio
    from traces.datafile import DataFileError, load_data_yaml

    path = Path(path)
    try:
        raw = load_data_yaml(path, "points")
    except DataFileError as exc:
        raise ConfigError(str(exc)) from None
    points, raw_ratios = check_file({} if raw is None else raw, path)
    pts, seen = [], set()
    for i, p in enumerate(points):
        where = check_point(p, i, path)
        bad = [k for k in p["run"] if k not in RUN_KEYS and not str(k).startswith(PREFIXES)]
        if bad:
            raise ConfigError(f"{where}: unknown run key(s) {bad}; allowed: {sorted(RUN_KEYS)} and {PREFIXES}")
        if str(p["id"]) in seen:
            raise ConfigError(f"{where}: duplicate id")
        seen.add(str(p["id"]))
        pts.append(Point(str(p["id"]), float(p["measured_tok_s"]), str(p["source"]), str(p["grade"]),
                         dict(p["run"]), str(p.get("system") or ""), str(p.get("group") or ""),
                         str(p.get("note") or "")))
    if not pts:
        raise ConfigError(f"points={path}: no points")
    for i, r in enumerate(raw_ratios):
        check_ratio(r, i, path)
    ratios = [Ratio(str(r["id"]), str(r["num"]), str(r["den"]), str(r.get("claim") or "")) for r in raw_ratios]
    for r in ratios:
        for pid in (r.num, r.den):
            if pid not in seen:
                raise ConfigError(f"{path}: ratio {r.id} names unknown point {pid!r}")
    return PointsFile(str(path), pts, ratios)


def _machine(run: dict) -> dict | str:
    """The hardware argument of :func:`sim.run.runner.run_one` from a point's run keys."""
    from sim.machine.compose import composition, load_yaml

    name = run.get("hardware", "rtx4090_pcie4")
    flat = {k[len("hardware."):]: v for k, v in run.items() if k.startswith("hardware.")}
    patched = any(k.startswith(("gpu.", "host.", "link.")) for k in run)
    if not (flat or patched or any(g in run for g in ("gpu", "host", "link"))):
        return name
    comp = composition(name) or {}
    out = {**{k: v for k, v in comp.items() if k not in ("name",)}, **flat}
    for group in ("gpu", "host", "link"):
        part = run.get(group, comp.get(group))
        if part is None:
            raise ConfigError(f"run key '{group}' is needed (hardware {name!r} names none)")
        fields = {k[len(group) + 1:]: v for k, v in run.items() if k.startswith(group + ".")}
        out[group] = {**load_yaml(group, part), **fields} if fields else part
    return out


def run_kwargs(run: dict, gen_tokens: int | None = None, runtime_patch: dict | None = None) -> dict:
    """Keyword arguments of :func:`sim.run.runner.run_one` for a point's run mapping; ``gen_tokens``
    caps the generated tokens (validation speed), ``runtime_patch`` sets runtime fields (calibration)."""
    kw = {k: v for k, v in run.items() if k in RUN_KEYS - {"hardware", "gpu", "host", "link", "runtime"}}
    kw["hardware"] = _machine(run)
    rt = {k[len("runtime."):]: v for k, v in run.items() if k.startswith("runtime.")}
    rt.update(runtime_patch or {})
    if rt or "runtime" in run:
        kw["runtime"] = {**rt, "name": run.get("runtime", "policy")} if rt else run["runtime"]
    pa = {k[len("policy."):]: v for k, v in run.items() if k.startswith("policy.")}
    if pa:
        kw["policy_args"] = pa
    if gen_tokens is not None:
        kw["gen_tokens"] = min(int(kw.get("gen_tokens", gen_tokens)), int(gen_tokens))
    kw.setdefault("experiment", "validate")
    return kw


def point_runtime(point: Point) -> str:
    """The runtime profile a point runs on (its ``runtime`` key, else its policy preset's)."""
    from sim.policies.registry import policy_runtime

    rt = point.run.get("runtime")
    return rt if isinstance(rt, str) and rt != "policy" else policy_runtime(point.run.get("policy", "moespac"))
