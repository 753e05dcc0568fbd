"""Helpers of the trace tests: raw archive writer, small random traces, the real traces."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from traces.schema import SCHEMA_VERSION, Trace

REAL_TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "real-traces"


def meta(n_layers=3, n_experts=8, top_k=2, **extra) -> dict:
    """Valid trace metadata for a small synthetic shape."""
    return {"schema_version": SCHEMA_VERSION, "model": "tiny", "n_layers": n_layers,
            "n_experts": n_experts, "top_k": top_k, "source": "synthetic", **extra}


def random_routing(rng, tokens, n_layers, n_experts, top_k) -> np.ndarray:
    """int16 [T, L, k] with k distinct ids per row, drawn uniformly."""
    keys = rng.random((tokens, n_layers, n_experts))
    return np.argsort(keys, axis=-1)[..., :top_k].astype(np.int16)


def small_trace(seed=0, tokens=12, n_layers=3, n_experts=8, top_k=2) -> Trace:
    """A valid random trace."""
    rng = np.random.default_rng(seed)
    return Trace(meta=meta(n_layers, n_experts, top_k),
                 experts=random_routing(rng, tokens, n_layers, n_experts, top_k))


def write_raw(path: Path, meta_obj, **arrays) -> Path:
    """An ``.npz`` trace archive written without validation (to test the loader's checks)."""
    if meta_obj is not None:
        arrays["meta"] = np.array(meta_obj if isinstance(meta_obj, str) else json.dumps(meta_obj))
    np.savez(path, **arrays)
    return path


def real_dir(name: str) -> Path:
    """``shared/real-traces/<name>`` beside the checkout, or skip the test."""
    path = REAL_TRACES / name
    if not path.is_dir():
        pytest.skip(f"real traces not available: {path.resolve()} is absent (the shared folder "
                    f"beside the checkout holds them)")
    return path
