"""Reading and writing trace files (``.npz``): validated loads, atomic writes.

A trace file is a NumPy ``.npz`` archive with a JSON ``meta`` string and the arrays of
:class:`traces.schema.Trace`. Writing goes through :func:`traces.atomic.atomic_write_bytes` (temporary file
and rename), so an interrupted write never leaves a truncated trace behind.
"""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from traces.atomic import atomic_write_bytes  # noqa: F401  (the project's one atomic writer)
from traces.errors import TraceError
from traces.schema import SDRecord, Trace

_ARRAYS = ("experts", "weights", "next_pred", "alt_experts", "prefill")
_SD = ("sd_experts", "sd_accepted", "sd_n_verified")


def save_trace(trace: Trace, path: str | os.PathLike) -> Path:
    """Validate ``trace`` and write it atomically to ``path`` (``.npz``)."""
    trace.validate()
    arrays = {"meta": np.array(json.dumps(trace.meta, sort_keys=True))}
    arrays["experts"] = trace.experts.astype(np.int16)
    if trace.weights is not None:
        arrays["weights"] = trace.weights.astype(np.float32)
    for name in ("next_pred", "alt_experts", "prefill"):
        if getattr(trace, name) is not None:
            arrays[name] = getattr(trace, name).astype(np.int16)
    if trace.sd is not None:
        arrays["sd_gamma"] = np.array(trace.sd.gamma)
        arrays["sd_experts"] = trace.sd.experts.astype(np.int16)
        arrays["sd_accepted"] = trace.sd.accepted.astype(np.int16)
        arrays["sd_n_verified"] = trace.sd.n_verified.astype(np.int16)
    return atomic_write_bytes(path, lambda f: np.savez_compressed(f, **arrays))


def load_trace(path: str | os.PathLike) -> Trace:
    """Load and validate a trace file; every problem raises :class:`TraceError` naming the field."""
    path = Path(path)
    if not path.exists():
        raise TraceError(path, "<file>", "no such file")
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise TraceError(path, "<file>", "is a single .npy array, not an .npz trace archive "
                                             "(write traces with traces.io.save_trace)")
        with z:
            data = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, TraceError):
            raise
        why = ("neither a zip archive nor a .npy array (random or foreign bytes; pickled data is never loaded)"
               if "allow_pickle" in str(exc) and "Object arrays" not in str(exc) else str(exc))
        raise TraceError(path, "<file>", f"not a readable trace archive (truncated or corrupt?): {why}") from None
    if "meta" not in data:
        raise TraceError(path, "meta", "missing metadata record")
    try:
        meta = json.loads(str(data["meta"]))
    except json.JSONDecodeError as exc:
        raise TraceError(path, "meta", f"not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise TraceError(path, "meta", "must be a JSON object")
    if "experts" not in data:
        raise TraceError(path, "experts", "missing routing array")
    sd = None
    if "sd_experts" in data:
        missing = [k for k in ("sd_gamma",) + _SD if k not in data]
        if missing:
            raise TraceError(path, missing[0], "SD record is incomplete")
        sd = SDRecord(int(data["sd_gamma"]), data["sd_experts"], data["sd_accepted"], data["sd_n_verified"])
    trace = Trace(meta=meta, sd=sd, path=str(path), **{k: data.get(k) for k in _ARRAYS})
    return trace.validate()


def list_traces(path: str | os.PathLike) -> list[Path]:
    """A trace file, or every ``*.npz`` in a workload-set folder (sorted)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.npz"))
        if not files:
            raise TraceError(path, "<folder>", "holds no .npz trace files")
        return files
    return [path]
