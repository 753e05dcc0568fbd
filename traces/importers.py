"""Importers of public recorded routing into :class:`traces.schema.Trace` (``source="imported"``).

Recognised inputs (see ``shared/real-traces/*/README.md`` for their provenance):

* ``mixtral_decode_topk.npz`` (Mixtral-8x7B, keys ``<request>_experts`` / ``_probs`` /
  ``_layer_full``): one trace per request.
* ``*_routing.jsonl`` (Mixtral-8x7B, one JSON object per (token, layer)): one trace per problem.
* ``qwen3_30b_a3b_routes.npz`` (Qwen3-30B-A3B, keys ``experts_p<i>``, ``phase_p<i>``): decode rows
  only, one trace per prompt.
* a trace file written by :func:`traces.io.save_trace` (loaded as is).

Missing (token, layer) rows (-1) are filled with the previous token's row of the same layer (the
next present row for a leading gap) and ``meta.origin`` says how many.
"""
from __future__ import annotations

import json
import os
import re
import zipfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from traces.errors import TraceError
from traces.io import load_trace
from traces.schema import SCHEMA_VERSION, Trace

FORMATS = ("mixtral_decode_topk.npz (Mixtral per-request arrays)",
           "*_routing.jsonl (Mixtral per-(token, layer) rows)",
           "qwen3_30b_a3b_routes.npz (Qwen3 experts_p<i>/phase_p<i>)",
           "a trace .npz written by traces.io.save_trace")
MODEL_SHAPES = {"mixtral_8x7b": (32, 8, 2), "qwen3_30b_a3b": (48, 128, 8)}


def import_trace(source: str | os.PathLike) -> Trace | list[Trace]:
    """Import recorded routing from ``source``; a list when the file holds several requests."""
    path = Path(source)
    if not path.is_file():
        raise TraceError(path, "<file>", "no such file" if not path.exists() else
                         f"give one file, not a folder; recognised formats: {'; '.join(FORMATS)}")
    if path.name.endswith("_routing.jsonl"):
        return _import_routing_jsonl(path)
    if path.suffix == ".npz":
        return _import_npz(path)
    raise TraceError(path, "<format>", f"unknown trace format; recognised formats: {'; '.join(FORMATS)}")


def _import_npz(path: Path) -> Trace | list[Trace]:
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
            if "meta" in keys and "experts" in keys:
                return load_trace(path)
            if any(re.fullmatch(r"experts_p\d+", k) for k in keys):
                return _unwrap([_qwen3_prompt(path, z, p) for p in _suffixes(keys, "experts_p")])
            if any(k.endswith("_experts") for k in keys):
                names = sorted(k[: -len("_experts")] for k in keys if k.endswith("_experts"))
                return [_mixtral_request(path, z, n) for n in names]
    except TraceError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as exc:
        raise TraceError(path, "<file>", f"not a readable .npz archive of a known layout: {exc}") from None
    raise TraceError(path, "<keys>", f"unknown .npz layout (keys {sorted(keys)[:8]}); "
                                     f"recognised formats: {'; '.join(FORMATS)}")


def _unwrap(traces: list[Trace]) -> Trace | list[Trace]:
    return traces[0] if len(traces) == 1 else traces


def _suffixes(keys, prefix: str) -> list[str]:
    return sorted((k[len(prefix):] for k in keys if re.fullmatch(re.escape(prefix) + r"\d+", k)), key=int)


def fill_missing(experts: np.ndarray, weights: np.ndarray | None = None, path=None
                 ) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Replace missing rows (any id < 0) by the previous token's row of the same layer, or the next
    present row where none precedes; returns the filled copies and the number of rows filled."""
    ex = experts.copy()
    w = None if weights is None else weights.copy()
    missing = (ex < 0).any(axis=-1)  # [T, L]
    for l in np.flatnonzero(missing.any(axis=0)):
        present = np.flatnonzero(~missing[:, l])
        if present.size == 0:
            raise TraceError(path, "experts", f"layer {l} has no routing rows at all")
        src = present[np.clip(np.searchsorted(present, np.arange(len(ex)), side="right") - 1, 0, None)]
        ex[:, l] = ex[src, l]
        if w is not None:
            w[:, l] = w[src, l]
    return ex, w, int(missing.sum())


def _meta(model: str, path: Path, request: str, workload: str, origin: str, **extra) -> dict:
    L, E, k = MODEL_SHAPES[model]
    return {"schema_version": SCHEMA_VERSION, "model": model, "n_layers": L, "n_experts": E, "top_k": k,
            "dense_layers": [], "shared_experts": 0, "source": "imported", "workload": workload,
            "prompt_id": request, "origin": f"{path.name}: {origin}", **extra}


def _filled_trace(model: str, path: Path, request: str, workload: str, what: str,
                  experts: np.ndarray, weights: np.ndarray | None, **extra) -> Trace:
    ex, w, n = fill_missing(np.asarray(experts), weights, path)
    origin = (f"{what}; {n} missing (token, layer) rows of {ex.shape[0] * ex.shape[1]} filled with the "
              f"previous token's row of the same layer" if n else f"{what}; no missing rows")
    meta = _meta(model, path, request, workload, origin, filled_rows=n, **extra)
    trace = Trace(meta=meta, experts=ex.astype(np.int16),
                  weights=None if w is None else w.astype(np.float32), path=str(path))
    return trace.validate()


def _mixtral_request(path: Path, z, name: str) -> Trace:
    ex = z[f"{name}_experts"].astype(np.int16)
    probs = z[f"{name}_probs"] if f"{name}_probs" in z.files else None
    full = z[f"{name}_layer_full"].tolist() if f"{name}_layer_full" in z.files else None
    return _filled_trace("mixtral_8x7b", path, name, name.split("_p")[0],
                         f"request {name}, decode rows", ex, probs, layer_full=full)


def _qwen3_prompt(path: Path, z, p: str) -> Trace:
    ex = z[f"experts_p{p}"]
    phase = z[f"phase_p{p}"] if f"phase_p{p}" in z.files else np.ones(len(ex), np.int8)
    dec = ex[phase == 1]
    pid = str(z[f"prompt_id_p{p}"]) if f"prompt_id_p{p}" in z.files else f"p{p}"
    what = (f"prompt p{p} ({pid}), {len(dec)} decode rows kept, {len(ex) - len(dec)} prefill rows "
            f"dropped (only partly logged)")
    return _filled_trace("qwen3_30b_a3b", path, pid, pid.split(":")[0], what, dec, None)


GAP_FACTOR, GAP_SLACK = 2, 16   # a problem's largest token_idx may not exceed 2 x its distinct tokens + 16


def _check_row(path: Path, n: int, ids: list, probs) -> None:
    """Refuse implausible values of one routing row, naming its line."""
    if any(e < 0 for e in ids):
        raise TraceError(path, f"line {n}", f"negative expert id in {ids}")
    if probs is not None:
        p = np.asarray(probs, dtype=float)
        if p.shape != (len(ids),) or not np.all(np.isfinite(p)) or (p < 0).any() or (p > 1).any():
            raise TraceError(path, f"line {n}", f"gating_probs {list(probs)} must be {len(ids)} numbers in [0, 1]")


def _check_token_range(path: Path, key: tuple, lines: dict) -> None:
    """Refuse a problem whose largest token_idx lies far beyond its other rows (most of the trace
    would be filled in)."""
    tokens = sorted({t for _, t in lines})
    top = tokens[-1]
    if top + 1 > GAP_FACTOR * len(tokens) + GAP_SLACK:
        line = min(n for (_, t), n in lines.items() if t == top)
        nxt = tokens[-2] if len(tokens) > 1 else None
        raise TraceError(path, f"line {line}", f"token_idx {top} of problem {key[0]}/{key[1]} is far beyond its "
                                               f"other rows ({len(tokens)} distinct tokens, next largest {nxt}); "
                                               "the trace would be mostly filled in")


def _read_routing_rows(path: Path) -> dict[tuple, dict]:
    """``{(dataset, problem_id): {(layer, token_idx): (experts, gating_probs)}}`` from a jsonl file;
    implausible rows (negative ids, gate weights outside [0, 1], a token_idx far beyond the others)
    are refused with their line number."""
    lines: dict[tuple, dict] = defaultdict(dict)
    groups: dict[tuple, dict] = defaultdict(dict)
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                key, row = (r["dataset"], int(r["problem_id"])), (int(r["layer"]), int(r["token_idx"]))
                groups[key][row] = ([int(e) for e in r["experts"]], r.get("gating_probs"))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise TraceError(path, f"line {n}", f"not a routing row ({exc!r}); expected keys "
                                                    "dataset, problem_id, layer, experts, token_idx") from None
            _check_row(path, n, *groups[key][row])
            lines[key][row] = n
    if not groups:
        raise TraceError(path, "<rows>", "holds no routing rows")
    for key, rows in lines.items():
        _check_token_range(path, key, rows)
    return groups


def _import_routing_jsonl(path: Path) -> list[Trace]:
    L, _, k = MODEL_SHAPES["mixtral_8x7b"]
    out = []
    for (dataset, pid), rows in sorted(_read_routing_rows(path).items()):
        T = max(t for _, t in rows) + 1
        ex = np.full((T, L, k), -1, np.int16)
        w = np.zeros((T, L, k), np.float32)
        for (l, t), (ids, probs) in rows.items():
            if not 0 <= l < L or t < 0 or len(ids) != k:
                raise TraceError(path, "layer/token_idx/experts",
                                 f"row (layer {l}, token {t}, experts {ids}) does not fit {L} layers, top-{k}")
            ex[t, l] = ids
            w[t, l] = probs if probs is not None else 0.0
        name = f"{dataset}_p{pid}"
        out.append(_filled_trace("mixtral_8x7b", path, name, dataset, f"problem {dataset}/{pid}, decode rows",
                                 ex, w))
    return out
