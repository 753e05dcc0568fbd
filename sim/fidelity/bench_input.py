"""Read a machine's own measurements: llama-bench output and llama.cpp timing lines.

Formats (detected from the text; each row becomes a dict with llama-bench's JSON field names):

- ``llama-bench -o json`` (an array of objects), ``-o jsonl`` (one object a line) and ``-o csv``
  (a header row, then one row per test): fields as llama.cpp ``tools/llama-bench/llama-bench.cpp``
  ``test::get_fields()`` writes them, e.g. ``cpu_info, gpu_info, backends, model_type, model_size,
  model_n_params, n_batch, n_ubatch, n_threads, type_k, type_v, n_gpu_layers, n_cpu_moe,
  flash_attn, tensor_buft_overrides, n_prompt, n_gen, n_depth, avg_ts, stddev_ts``
  (github.com/ggml-org/llama.cpp, tools/llama-bench/README.md "Output formats"; ``n_cpu_moe``
  since llama.cpp PR #15952).
- ``-o md``, also as copied from a terminal: a ``| model | size | params | backend | ngl | ... |
  test | t/s |`` table whose display names map back to fields (``ngl``, ``threads``, ``fa``,
  ``ot``, ``n_cpu_moe``, ...: ``markdown_printer::get_field_display_name``); ``test`` is ``pp512``,
  ``tg128``, ``pp512+tg128``, ``pp512 @ d4096`` (older builds: ``pp 512``); ``t/s`` is
  ``mean ± sd``.
- llama-server / llama-cli timing lines, ``prompt eval time = X ms / N tokens (Y ms per token, Z
  tokens per second)`` (a pp row) and ``eval time = X ms / N runs|tokens (...)`` (a tg row), with
  the configuration taken from the last command line above them (``-ngl``, ``--n-cpu-moe``,
  ``-t``, ``-ot``, ``-ctk``/``-ctv``, ``-ub``, ``-fa``, ``-m``) or ``# key=value`` comment lines; an
  eval row after a prompt eval row decodes at that prompt's depth (``n_depth``).

Every row carries ``_row`` (1-based, in file order) for error messages.
"""
from __future__ import annotations

import csv
import io
import json
import re
import shlex
from pathlib import Path

from sim.machine.specs import ConfigError

MD_NAMES = {"model": "model_type", "size": "model_size", "params": "model_n_params", "backend": "backends",
            "ngl": "n_gpu_layers", "threads": "n_threads", "fa": "flash_attn", "ot": "tensor_buft_overrides",
            "sm": "split_mode", "nkvo": "no_kv_offload", "mmap": "use_mmap", "embd": "embeddings",
            "ts": "tensor_split", "nopo": "no_op_offload", "dev": "devices", "t/s": "t/s", "test": "test"}
FLAGS = {"-ngl": "n_gpu_layers", "--n-gpu-layers": "n_gpu_layers", "--gpu-layers": "n_gpu_layers",
         "--n-cpu-moe": "n_cpu_moe", "-ncmoe": "n_cpu_moe", "-t": "n_threads", "--threads": "n_threads",
         "-ot": "tensor_buft_overrides", "--override-tensor": "tensor_buft_overrides",
         "-ctk": "type_k", "--cache-type-k": "type_k", "-ctv": "type_v", "--cache-type-v": "type_v",
         "-ub": "n_ubatch", "--ubatch-size": "n_ubatch", "-b": "n_batch", "--batch-size": "n_batch",
         "-fa": "flash_attn", "--flash-attn": "flash_attn", "-m": "model_filename", "--model": "model_filename"}
TIMING = re.compile(r"(prompt eval|eval) time\s*=\s*([\d.]+) ms\s*/\s*(\d+) (?:tokens|runs)\s*\(\s*([\d.]+) ms per "
                    r"token,\s*([\d.]+) tokens per second\)")
TEST = re.compile(r"^(?:pp\s*(\d+))?\+?(?:tg\s*(\d+))?\s*(?:@\s*d\s*(\d+))?$")
SIZE_UNITS = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}
COUNT_UNITS = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def read_bench(path: str | Path) -> list[dict]:
    """The rows of one bench file, in file order (any of the formats above)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"bench={path}: no such file")
    text = path.read_text(errors="replace")
    if not text.strip():
        raise ConfigError(f"bench={path}: the file is empty (no result rows)")
    rows = _parse(text, path)
    if not rows:
        raise ConfigError(f"bench={path}: no result rows (expected llama-bench -o json|jsonl|csv|md output "
                          "or llama.cpp 'eval time = ...' lines)")
    for i, r in enumerate(rows, 1):
        r["_row"] = i
    return rows


def _parse(text: str, path: Path) -> list[dict]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        return _json_array(text, path)
    if stripped.startswith("{"):
        return [_json_line(line, path, i) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if TIMING.search(text):
        return timing_rows(text)
    if any(line.strip().startswith("|") for line in text.splitlines()):
        return markdown_rows(text, path)
    first = stripped.splitlines()[0]
    if "avg_ts" in first and "," in first:
        return [dict(r) for r in csv.DictReader(io.StringIO(stripped))]
    raise ConfigError(f"bench={path}: not llama-bench output (-o json, jsonl, csv or md) nor llama.cpp timing lines")


def _json_array(text: str, path: Path) -> list[dict]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"bench={path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not all(isinstance(r, dict) for r in data):
        raise ConfigError(f"bench={path}: a JSON array of llama-bench result objects is expected")
    return data


def _json_line(line: str, path: Path, n: int) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"bench={path}: line {n} is not a JSON object ({exc.msg})") from None
    if not isinstance(row, dict):
        raise ConfigError(f"bench={path}: line {n} is not a JSON object")
    return row


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def markdown_rows(text: str, path: Path) -> list[dict]:
    """Rows of a llama-bench markdown table (display names mapped back to field names)."""
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("|")]
    header = [MD_NAMES.get(c, c) for c in _cells(lines[0])]
    for need in ("test", "t/s"):
        if need not in header:
            raise ConfigError(f"bench={path}: the markdown table has no '{need}' column (header: {_cells(lines[0])})")
    rows = []
    for line in lines[1:]:
        cells = _cells(line)
        if all(set(c) <= set("-: ") for c in cells):
            continue
        row = dict(zip(header, cells))
        row.update(_test_shape(row.pop("test", "")), **_rate(row.pop("t/s", "")))
        for key, units in (("model_size", SIZE_UNITS), ("model_n_params", COUNT_UNITS)):
            if key in row:
                row[key] = _with_unit(row[key], units)
        rows.append(row)
    return rows


def _test_shape(test: str) -> dict:
    """``pp512``, ``tg128``, ``pp512+tg128``, ``pp512 @ d4096``, ``pp 512`` -> n_prompt/n_gen/n_depth."""
    m = TEST.match(test.split(" e[")[0].strip())
    if not m or not (m.group(1) or m.group(2)):
        return {"test": test}
    return {"n_prompt": int(m.group(1) or 0), "n_gen": int(m.group(2) or 0), "n_depth": int(m.group(3) or 0)}


def _rate(cell: str) -> dict:
    """``123.45 ± 0.55`` (or a terminal's mangled ``±``) -> avg_ts, stddev_ts."""
    nums = re.findall(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", cell)
    out = {"avg_ts": float(nums[0])} if nums else {}
    if len(nums) > 1:
        out["stddev_ts"] = float(nums[1])
    return out


def _with_unit(cell: str, units: dict) -> float | str:
    m = re.match(r"\s*([\d.]+)\s*([A-Za-z]*)", str(cell))
    if not m or m.group(2) not in units:
        return cell
    return float(m.group(1)) * units[m.group(2)]


def timing_rows(text: str) -> list[dict]:
    """Rows from llama-server / llama-cli timing lines, each with the configuration in force
    (the last command line's flags, then ``# key=value`` comments) where it was printed."""
    conf: dict = {}
    rows, prompt_n = [], 0
    for line in text.splitlines():
        m = TIMING.search(line)
        if m:
            n, rate = int(m.group(3)), float(m.group(5))
            prompt = m.group(1) == "prompt eval"
            depth = 0 if prompt else int(conf.get("n_depth", prompt_n))   # decode starts after the prompt
            rows.append({**conf, "n_prompt": n if prompt else 0, "n_gen": 0 if prompt else n,
                         "n_depth": depth, "avg_ts": rate})
            prompt_n = n if prompt else prompt_n
        elif line.lstrip().startswith("#"):
            words = line.lstrip("# \t").split()
            if words and all("=" in w for w in words):      # a '# key=value ...' line; other comments are prose
                conf.update(dict(w.split("=", 1) for w in words))
        elif re.search(r"(^|\s)(-ngl|--n-gpu-layers|--n-cpu-moe|-m|--model)\s", line):
            conf.update(command_flags(line))
            prompt_n = 0
    return rows


def command_flags(line: str) -> dict:
    """The bench fields set by a llama-cli / llama-server command line (flags in :data:`FLAGS`)."""
    try:
        words = [w.strip("'\"") for w in shlex.split(line, posix=False)]   # posix=False keeps -ot's backslashes
    except ValueError:
        words = line.split()
    out: dict = {}
    for i, w in enumerate(words):
        key, eq, val = w.partition("=")
        if key not in FLAGS:
            continue
        if not eq:
            val = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else "1"
        if FLAGS[key] == "tensor_buft_overrides" and "tensor_buft_overrides" in out:
            val = out["tensor_buft_overrides"] + ";" + val
        out[FLAGS[key]] = val
    return out
