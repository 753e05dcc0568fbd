"""Calibrated synthetic routing traces (``meta.source = "synthetic"``).

The model (:mod:`traces.routing_model`), and why each part is there:

1. **Persistent per-layer popularity.** Real routers have favourite experts per layer, stable over a
   workload (normalized popularity entropy 0.62-0.81 on Qwen3-30B-A3B, 0.99 on Mixtral, lower for
   specialised text). Each layer gets a Zipf law over a random permutation of its experts; the
   exponent is solved so the long-run shares have the target entropy per layer. A Zipf tail (every
   expert gets used, as measured) is what leaves about 19% of lookups outside a 32-slot LRU cache;
   a log-normal head of the same entropy made LRU@32 far too high. The permutation is seeded by
   (model, domain): prompts of a workload share their popular experts.
2. **Sticky previous experts.** Next-token reuse |E_t ∩ E_t+1|/k is far above chance (42.7% vs
   6.25% on Qwen3) and depends on depth: low at the first and last layers (7.9%, 20.6%), high
   mid-stack (54-60%). Each expert of token t-1 is kept with a per-layer probability solved from
   the model class's measured per-layer reuse profile, scaled by the workload's overall overlap.
   Where the target is below what the popularity gives by chance (Qwen3 layer 0), the previous
   experts are instead avoided with some probability (consecutive tokens differ at the first layer).
3. **Segment-local working sets.** Popularity and reuse alone leave the LRU hit rate at 16 slots
   (65% measured) too low: real routing revisits a small set over tens of tokens. Fresh draws come
   from a mix of the popularity and a working set of about k experts drawn from it (weight per
   layer proportional to the layer's reuse target).
4. **Domain shifts.** At random tokens (the workload's ``shift_rate``, shared by all layers, as a
   topic change affects the whole stack) every layer draws a new working set, so the popular set
   changes within a sequence and caches must adapt.

Everything is drawn from seeded ``numpy.random`` generators: the same arguments give the same trace,
and ``meta.generator`` holds every parameter. Measured against the targets (4096 tokens, alpaca):
see ``tests/traces/test_calibration.py`` and ``benchmarks/bench_traces.py``.
"""
from __future__ import annotations

import copy
import functools
import json
import zlib
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

import traces
from traces.errors import TraceError
from traces.profiles import MODELS, assumed_class, model_class, routing_assumption
from traces.routing_model import Draw, N_PROBE, generate, popularity, segment_mix, solve_exponent, stickiness
from traces.schema import SCHEMA_VERSION, Trace

CONF_DIR = Path(traces.__file__).resolve().parents[1] / "conf"
BYTES_PER_ROUTE = 24     # per (token, layer, slot): int16 routing + alternative, their saved copies, int64 checks
MEMORY_SHARE = 0.5       # of the memory available now that one trace may take
PROGRESS_TOKENS = 20000  # longer traces show a progress bar
DEFAULT_WORKLOAD = "alpaca"
GENERATOR = "sticky-zipf-working-set/1"


def list_models() -> list[str]:
    """Names of the model classes the generator knows."""
    return sorted(MODELS)


def list_workloads() -> list[str]:
    """Names of the workload presets in ``conf/workload/``."""
    return sorted(p.stem for p in (CONF_DIR / "workload").glob("*.yaml"))


def workload_preset(name: str) -> dict:
    """The workload preset ``conf/workload/<name>.yaml`` as a plain dict."""
    path = CONF_DIR / "workload" / f"{name}.yaml"
    if not path.is_file():
        raise TraceError(path, "workload", f"unknown workload {name!r}; valid: {', '.join(list_workloads())}")
    preset = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    for key in ("acceptance", "overlap", "entropy", "shift_rate", "domain"):
        if key not in preset:
            raise TraceError(path, key, "missing from the workload preset")
    return preset


def _model(name: str, shape: tuple | None = None):
    """The calibrated class ``name``, or, given ``shape`` = (layers, experts, top_k, dense layers,
    shared experts) that no calibrated class has, an assumed one (:func:`traces.profiles.assumed_class`)."""
    if name in MODELS and (shape is None or tuple(shape[:3]) == (MODELS[name].n_layers, MODELS[name].n_experts,
                                                                  MODELS[name].top_k)):
        return model_class(name)
    if shape is None:
        raise TraceError("synthesize", "model", f"unknown model class {name!r}; valid: {', '.join(list_models())} "
                         "(or pass shape=(layers, experts, top_k[, dense_layers, shared]) for an assumed profile)")
    L, E, k = (_check_int(n, v, 1) for n, v in zip(("n_layers", "n_experts", "top_k"), shape[:3]))
    if k >= E:
        raise TraceError("synthesize", "top_k", f"must be below n_experts {E}, got {k}")
    dense = tuple(shape[3]) if len(shape) > 3 else ()
    return assumed_class(name, L, E, k, dense, int(shape[4]) if len(shape) > 4 else 0)


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise TraceError("synthesize", name, f"must be an integer >= {low}, got {value!r}")
    return int(value)


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable`` of /proc/meminfo, else physical memory)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def max_tokens(model: str, shape: tuple | None = None) -> int:
    """The longest trace of ``model`` that fits in :data:`MEMORY_SHARE` of the memory available now."""
    mc = _model(model, shape)
    return int(MEMORY_SHARE * available_memory() // (BYTES_PER_ROUTE * mc.n_layers * mc.top_k))


def _check_size(model: str, tokens: int, shape: tuple | None = None) -> None:
    limit = max_tokens(model, shape)
    if tokens > limit:
        mc = _model(model, shape)
        need = tokens * BYTES_PER_ROUTE * mc.n_layers * mc.top_k / 2**30
        raise TraceError("synthesize", "tokens", f"{tokens} tokens of {model} need about {need:.1f} GiB; at most "
                                                 f"{limit} fit in half of the {available_memory() / 2**30:.1f} GiB "
                                                 "available now")


def _layout(pop_seed: int, n_layers: int, n_experts: int) -> tuple[np.ndarray, np.ndarray]:
    """The popularity permutation [L, E] and the probe working-set noise, from the popularity seed."""
    rng = np.random.default_rng(pop_seed)
    perm = np.argsort(rng.random((n_layers, n_experts)), axis=1)
    return perm, rng.gumbel(size=(N_PROBE, n_layers, n_experts))


def generator_params(model: str, workload: str, tokens: int, seed: int = 0, shape: tuple | None = None) -> dict:
    """Every parameter of the generator for this (model, workload), as JSON-ready values."""
    mc, wl = _model(model, shape), workload_preset(workload)
    tokens, seed = _check_int("tokens", tokens, 1), _check_int("seed", seed, 0)
    try:
        solved = _solved_params(model, json.dumps(wl, sort_keys=True), shape)
    except TypeError:             # an unhashable shape: solve it afresh
        solved = _solve_params(mc, wl, model)
    return {"generator": GENERATOR, "seed": seed, "tokens": tokens, **copy.deepcopy(solved)}


@functools.lru_cache(maxsize=64)
def _solved_params(model: str, preset_json: str, shape: tuple | None) -> dict:
    """:func:`_solve_params` memoised (a sweep builds traces of one (model, workload) many times)."""
    return _solve_params(_model(model, shape), json.loads(preset_json), model)


def _solve_params(mc, wl: dict, model: str) -> dict:
    """The generator's parameters that depend on the model class and workload only (not on the
    trace length or seed): the popularity layout, the solved Zipf exponents, working set, stickiness."""
    k, w = mc.top_k, max(mc.top_k + 1, int(round(mc.ws_mult * mc.top_k)))
    pop_seed = zlib.crc32(f"{model}/{wl['domain']}".encode())
    perm, noise = _layout(pop_seed, mc.n_layers, mc.n_experts)
    reuse = np.clip(mc.reuse_profile() * wl["overlap"] / mc.domain_overlap, 0.0, 0.95)
    flat = (1 - mc.entropy_profile()) * (1 - wl["entropy"]) / (1 - mc.domain_entropy)
    entropy = np.clip(1 - flat, 0.05, 0.9999)
    a = np.clip(mc.ws_weight * reuse / mc.reuse_profile().mean(), 0.0, 0.95)
    exponent = solve_exponent(entropy, perm, k, w, a, mc.ws_beta, noise)
    q = segment_mix(popularity(exponent, perm), noise, w, a, mc.ws_beta)
    stick = stickiness(reuse, q, k, mc.chance_gain)
    return {"domain": wl["domain"],
            "shift_rate": float(wl["shift_rate"]), "popularity_seed": pop_seed,
            "zipf_exponent": np.round(exponent, 5).tolist(),
            "working_set": w, "working_set_beta": mc.ws_beta, "working_set_weight": np.round(a, 4).tolist(),
            "stickiness": np.round(stick, 5).tolist(), "chance_gain": mc.chance_gain,
            "target_reuse": np.round(reuse, 4).tolist(), "target_entropy": np.round(entropy, 4).tolist()}


def synthesize(model: str, workload: str = DEFAULT_WORKLOAD, tokens: int = 4096, seed: int = 0,
               shape: tuple | None = None) -> Trace:
    """A synthetic trace of ``tokens`` decode tokens for a model class and workload preset; any
    other routing shape (``shape``) gets an assumed profile, marked in ``meta.routing_assumed``.

    The per-token draws use ``default_rng([seed, crc32(workload)])``, so two workloads of the same
    domain share popular experts but not their token sequences."""
    mc, wl = _model(model, shape), workload_preset(workload)
    _check_size(model, _check_int("tokens", tokens, 1), shape)
    gp = generator_params(model, workload, tokens, seed, shape)
    perm, _ = _layout(gp["popularity_seed"], mc.n_layers, mc.n_experts)
    pop = popularity(np.array(gp["zipf_exponent"]), perm)
    rng = np.random.default_rng([gp["seed"], zlib.crc32(workload.encode())])
    alt_rng = np.random.default_rng([gp["seed"], zlib.crc32(workload.encode()), 1])
    from tqdm import tqdm
    with tqdm(total=gp["tokens"], unit="tok", desc=f"synth {model}/{workload}",
              disable=gp["tokens"] < PROGRESS_TOKENS) as bar:
        draw = Draw(mc.top_k, gp["tokens"], gp["working_set"], np.array(gp["working_set_weight"]), mc.ws_beta,
                    gp["shift_rate"])
        experts, n_seg, alt = generate(pop, np.array(gp["stickiness"]), draw, rng, alt_rng, progress=bar.update)
    meta = {"schema_version": SCHEMA_VERSION, "model": model, "hf_name": mc.hf_name,
            "n_layers": mc.n_layers, "n_experts": mc.n_experts, "top_k": mc.top_k,
            "dense_layers": list(mc.dense_layers), "shared_experts": mc.shared_experts,
            "source": "synthetic", "workload": workload, "acceptance": float(wl["acceptance"]),
            "prompt_id": f"synthetic/{workload}/seed{gp['seed']}", "segments": n_seg, "generator": gp}
    assumed = routing_assumption(mc)
    if assumed is not None:
        meta["routing_assumed"] = assumed
    return Trace(meta=meta, experts=experts, alt_experts=alt).validate()
