"""Capture real routing traces from Hugging Face MoE models: ``python -m traces capture k=v ...``.

For each prompt the target decodes greedily with speculative decoding (``gamma`` drafts a step,
lossless) or plainly (``ar=true``) while hooks on every MoE gate record the routing (see
:func:`real.router_hooks.capture_trace` for what each array holds). One trace file per prompt
(``prompt_00000.npz`` ...) is written atomically; finished files are skipped on a rerun, so an
interrupted capture resumes where it stopped. Every bad input is reported before any weights load.
torch and transformers are imported lazily (they are the ``real`` extra).
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from traces.errors import TraceError
from traces.io import load_trace, save_trace
from traces.schema import SCHEMA_VERSION
from traces.settings_diff import differing_keys

RUN_KEYS = ("model", "draft", "gamma", "precision", "max_new_tokens", "prompt_id")  # must match to resume


@dataclass
class CaptureConfig:
    """Options of ``traces capture`` (``key=value`` on the command line)."""

    target: str = ""
    prompts: str = ""
    out: str = ""
    draft: str | None = None
    gamma: int = 8
    max_new_tokens: int = 512
    ar: bool = False
    dtype: str = "auto"  # float32 | bfloat16 | float16 | auto (float32 on cpu, else bfloat16)
    device: str = ""  # cpu | cuda | cuda:N | auto (device_map="auto"); default cuda if present
    seed: int = 0
    tokenizer: str | None = None  # default: the target's own
    chat: bool = True  # wrap text prompts in the tokenizer's chat template when it has one
    eos: bool = True  # stop a prompt after the end-of-sequence token
    prompt_len: int = 16  # length of random prompts (prompts=tiny:N)
    limit: int | None = None  # capture only the first N prompts
    split: str = "test"  # dataset split when prompts names a Hugging Face dataset
    field: str = "question"  # dataset column holding the prompt text
    progress: bool = True

    @classmethod
    def from_args(cls, args: dict) -> "CaptureConfig":
        """Build from ``key=value`` strings (or typed values); bad keys or values raise ``TraceError``."""
        kinds = {f.name: f.type for f in fields(cls)}
        cfg = cls()
        for key, value in args.items():
            if key not in kinds:
                raise TraceError("capture", key, f"unknown option; known: {', '.join(kinds)}")
            setattr(cfg, key, _convert(key, value, kinds[key]))
        for key in ("target", "prompts", "out"):
            if not getattr(cfg, key):
                raise TraceError("capture", key, "required, e.g. target=tiny:qwen3_moe prompts=tiny:4 out=DIR")
        if not cfg.ar and not cfg.draft:
            raise TraceError("capture", "draft", "required for speculative decoding (or set ar=true)")
        return cfg


def _convert(key: str, value, kind: str):
    if not isinstance(value, str):
        return value
    low = value.strip().lower()
    if "None" in kind and low in ("", "none", "null"):
        return None
    if kind.startswith("str"):
        return value
    if kind == "bool":
        if low not in ("true", "false", "1", "0", "yes", "no"):
            raise TraceError("capture", key, f"expected true or false, got {value!r}")
        return low in ("true", "1", "yes")
    try:
        return int(value)
    except ValueError:
        raise TraceError("capture", key, f"expected an integer, got {value!r}") from None


def main(args: dict) -> dict:
    """Run a capture; return ``{"out", "written", "skipped", "mean_accepted"}``."""
    cfg = CaptureConfig.from_args(args)
    if not cfg.ar and not 1 <= cfg.gamma <= 64:
        raise TraceError("capture", "gamma", f"{cfg.gamma} is outside 1..64 (ar=true decodes without a draft)")
    if cfg.max_new_tokens < 1:
        raise TraceError("capture", "max_new_tokens", f"must be >= 1, got {cfg.max_new_tokens}")
    from real.model_loading import CaptureModels
    models = CaptureModels(cfg.target, None if cfg.ar else cfg.draft, cfg.tokenizer, cfg.dtype,
                           cfg.device, cfg.seed, cfg.chat)  # checks everything, loads no weights
    prompts = load_prompts(cfg, models.vocab, models.encode)
    out = check_out_dir(cfg.out)
    meta = _run_meta(cfg, models)
    paths = [out / f"prompt_{i:05d}.npz" for i in range(len(prompts))]
    todo = [i for i, path in enumerate(paths) if not _finished(path, dict(meta, prompt_id=prompts[i][0]))]
    stats = _capture_all(cfg, models, meta, [(i, prompts[i], paths[i]) for i in todo], len(paths))
    return {"out": str(out), "written": len(todo), "skipped": len(paths) - len(todo),
            "mean_accepted": stats["accepted"] / max(stats["steps"], 1)}


def _run_meta(cfg: CaptureConfig, models) -> dict:
    import platform
    import torch
    import transformers
    device = models.device
    on_gpu = device != "cpu" and torch.cuda.is_available()
    hardware = torch.cuda.get_device_name(device if device != "auto" else 0) if on_gpu else platform.machine()
    spec = Path(cfg.prompts).expanduser()
    workload = spec.stem if spec.is_file() else cfg.prompts
    return {"schema_version": SCHEMA_VERSION, "source": "captured", "model": cfg.target, "workload": workload,
            "draft": None if cfg.ar else cfg.draft, "gamma": 0 if cfg.ar else cfg.gamma,
            "precision": models.precision, "max_new_tokens": cfg.max_new_tokens, "device": device,
            "hardware": hardware, "torch": torch.__version__, "transformers": transformers.__version__,
            "engine": "real.speculative greedy draft-then-verify (transformers DynamicCache)",
            "routing": "row t = routing of generated token t as the input of a target forward",
            "next_pred": "next MoE layer's gate applied to this layer's gate input (post-attention norm)",
            **models.shape}


def _model_spec(model, name: str) -> dict | None:
    """The simulator's spec of the captured target, derived from its config (``sim run trace=FILE``
    replays it without a preset); None for a family the derivation does not know."""
    from sim.machine.hf_config import UnsupportedConfig, derive
    try:
        return derive(model.config.get_text_config().to_dict(), name=Path(str(name)).name or str(name),
                      source=f"captured config of {name}")
    except UnsupportedConfig:
        return None


def _capture_all(cfg: CaptureConfig, models, meta: dict, jobs: list, total: int) -> dict:
    from tqdm import tqdm
    from real.router_hooks import RouterRecorder, capture_trace
    from real.model_loading import moe_summary
    from real.speculative import SpeculativeDecoder
    stats = {"steps": 0, "accepted": 0}
    if not jobs:
        return stats
    models.load()
    meta = dict(meta, **moe_summary(models.target), model_spec=_model_spec(models.target, cfg.target))
    eos = models.eos() if cfg.eos else None
    bar = tqdm(total=total, initial=total - len(jobs), unit="prompt", desc="capture", disable=not cfg.progress)
    with RouterRecorder(models.target) as recorder, bar:
        for i, (pid, ids), path in jobs:
            decoder = SpeculativeDecoder(models.target, models.draft, meta["gamma"], eos_token_id=eos)
            trace, _ = capture_trace(recorder, decoder, ids, cfg.max_new_tokens,
                                     dict(meta, prompt_id=pid, prompt_index=i))
            save_trace(trace, path)
            stats["steps"] += trace.meta["n_steps"]
            stats["accepted"] += int(trace.sd.accepted.sum()) if trace.sd is not None else 0
            bar.set_postfix(mean_accepted=f"{stats['accepted'] / max(stats['steps'], 1):.2f}", refresh=False)
            bar.update(1)
    return stats


def _finished(path: Path, run_meta: dict) -> bool:
    """Whether ``path`` is a finished trace of this same run (it is redone if unreadable)."""
    if not path.exists():
        return False
    try:
        meta = load_trace(path).meta
    except TraceError:
        return False  # unreadable (damaged by something else): capture it again
    diff = differing_keys({k: meta.get(k) for k in RUN_KEYS}, {k: run_meta[k] for k in RUN_KEYS})
    if diff:
        raise TraceError(path, f"meta.{diff[0].split()[0]}", f"left by another capture ({'; '.join(diff[:5])}); "
                                                             "use another out dir")
    return True


def check_out_dir(out: str) -> Path:
    """Create ``out`` if needed and prove it is writable (``TraceError`` otherwise)."""
    path = Path(out).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise TraceError(out, "out", f"cannot write trace files here: {exc}") from None
    return path


def load_prompts(cfg: CaptureConfig, vocab: int, encode) -> list[tuple[str, list[int]]]:
    """``(prompt id, token ids)`` per prompt, from ``tiny:N``, a JSONL file or a dataset name."""
    spec, cut = cfg.prompts, slice(None, cfg.limit)
    if spec.startswith("tiny:"):
        prompts = _random_prompts(spec, vocab, cfg.prompt_len, cfg.seed)[cut]
    else:
        path = Path(spec).expanduser()
        texts = _read_jsonl(path, cfg.field) if path.is_file() else _read_dataset(cfg)
        prompts = [(pid, encode(text)) for pid, text in texts[cut]]
    if not prompts:
        raise TraceError(spec, "prompts", "holds no prompts")
    return prompts


def _random_prompts(spec: str, vocab: int, length: int, seed: int) -> list[tuple[str, list[int]]]:
    try:
        n = int(spec[len("tiny:"):])
    except ValueError:
        n = -1
    if n < 1 or length < 1:
        raise TraceError(spec, "prompts", "tiny:N needs N >= 1 (and prompt_len >= 1)")
    rngs = (np.random.default_rng([seed, i]) for i in range(n))
    return [(f"tiny-{i}", rng.integers(0, vocab, size=length).tolist()) for i, rng in enumerate(rngs)]


def _read_jsonl(path: Path, field: str = "question") -> list[tuple[str, str]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(path, f"line {n}", f"not valid JSON: {exc}") from None
        text = obj.get("prompt", obj.get("text", obj.get(field))) if isinstance(obj, dict) else None
        if not isinstance(text, str) or not text:
            raise TraceError(path, f"line {n}", f'needs a non-empty "prompt", "text" or "{field}" string')
        rows.append((str(obj.get("id", len(rows))), text))
    return rows


def _read_dataset(cfg: CaptureConfig) -> list[tuple[str, str]]:
    try:
        import datasets
    except ImportError:
        raise TraceError(cfg.prompts, "prompts", "no such prompts file (and the `datasets` package is not "
                                                 "installed to read it as a Hugging Face dataset)") from None
    name, _, config = cfg.prompts.partition(":")
    try:
        data = datasets.load_dataset(name, config or None, split=cfg.split)
    except Exception as exc:  # datasets raises many types for "not found / offline"
        raise TraceError(cfg.prompts, "prompts", f"neither a file nor a loadable dataset: {exc}") from None
    if cfg.field not in data.column_names:
        raise TraceError(cfg.prompts, "field", f"no column {cfg.field!r}; columns: {data.column_names}")
    return [(str(i), str(row[cfg.field])) for i, row in enumerate(data)]
