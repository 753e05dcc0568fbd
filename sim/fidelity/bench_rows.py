"""llama-bench rows -> simulated llama.cpp runs: the model, the placement, the test.

Each row read by :mod:`sim.fidelity.bench_input` is checked (one machine, one MoE model, a test
that ran) and mapped to the ``run_one`` arguments of the ``llamacpp`` policy:

- ``n_gpu_layers`` (``-ngl``; -1 or more than the layers: all) -> ``policy.gpu_layers`` when
  whole layers stay on the CPU; ``n_cpu_moe`` and ``tensor_buft_overrides`` (``-ot`` patterns such
  as ``blk\\.(1[2-9]|2[0-9])\\.ffn_.*_exps=CPU`` or ``exps=CPU``, matched against the tensor names
  ``blk.N.ffn_{up,gate,down}_exps.weight``) -> ``policy.n_cpu_moe`` (the number of layers whose
  experts stay on the CPU; a set that is not the first N layers is simulated as its size, noted);
- ``n_threads`` -> the machine's ``cpu_threads``; ``n_ubatch`` -> the prefill micro-batch;
- tg rows (``n_gen > 0``, ``n_prompt == 0``) are decode speed at KV depth ``n_depth``; pp rows
  (``n_prompt > 0``, ``n_gen == 0``, no depth) are prefill speed (``prefill=true``); other rows are
  skipped with a note;
- ``type_k`` / ``type_v`` (KV cache type) and ``flash_attn`` are recorded, not simulated.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pathlib import Path

from sim.machine.specs import ConfigError

MACHINE_FIELDS = ("cpu_info", "gpu_info", "backends")
MOE_ARCHS = ("qwen3moe", "qwen2moe", "deepseek2", "deepseek", "gpt-oss", "olmoe", "phimoe", "glm4moe", "mixtral",
             "dbrx", "grok", "granitemoe", "llama4", "bailingmoe", "ernie4_5-moe", "hunyuan-moe", "arctic")
ARCH_HINT = {"qwen3moe": "qwen3", "qwen2moe": "qwen", "deepseek2": "deepseek", "gpt-oss": "gpt_oss",
             "olmoe": "olmoe", "phimoe": "phi3", "glm4moe": "glm4", "llama": "mixtral"}
# GGUF file types as llama.cpp llama_model_ftype_name prints them -> sim/machine/quant.py formats
FTYPES = (("MXFP4", "mxfp4"), ("IQ4_XS", "iq4_xs"), ("Q2_K", "q2_k"), ("Q3_K", "q3_k_m"), ("Q4_K", "q4_k_m"),
          ("Q5_K", "q5_k_m"), ("Q6_K", "q6_k"), ("Q8_0", "q8_0"), ("Q4_0", "q4_0"), ("BF16", "bf16"), ("F16", "f16"),
          ("F32", "f32"))
EXPERT_TENSORS = ("ffn_up_exps", "ffn_gate_exps", "ffn_down_exps", "ffn_gate_up_exps")   # gate_up: fused


@dataclass(frozen=True)
class BenchRow:
    """One measured row and the simulated run that models it."""

    row: int
    kind: str                 # "tg": decode tok/s; "pp": prefill tok/s
    measured_tok_s: float
    run: dict                 # run_one keyword arguments, without hardware and runtime
    threads: int | None       # llama.cpp -t (None: the host's cores)
    config: dict              # the row's llama.cpp settings as read
    notes: tuple = field(default_factory=tuple)


def _where(path, row: dict) -> str:
    return f"bench={path}: row {row['_row']}"


def check_machine(rows: list[dict], path) -> None:
    """Every row from one machine: ``cpu_info``, ``gpu_info``, ``backends`` agree where present."""
    for key in MACHINE_FIELDS:
        seen = [(r["_row"], str(r[key])) for r in rows if r.get(key) not in (None, "")]
        for n, v in seen[1:]:
            if v != seen[0][1]:
                raise ConfigError(f"bench={path}: row {n}: field {key} {v!r} differs from row {seen[0][0]}'s "
                                  f"{seen[0][1]!r}: rows from two machines; calibrate one machine at a time")


def quant_of(model_type: str) -> str | None:
    """The expert format named by a llama.cpp model type (``qwen3moe 30B.A3B Q4_K - Medium`` -> q4_k_m)."""
    for tag, name in FTYPES:
        if re.search(rf"(^|\s){tag}(\s|$|_)", model_type):
            return name
    return None


def quant_of_file(filename: str) -> str | None:
    """The expert format in a GGUF file name (``Qwen3-30B-A3B-Q4_K_M.gguf`` -> q4_k_m)."""
    m = re.search(r"(?i)(?:^|[-_./])(i?q\d_[0-9a-z]+(?:_[a-z]+)?|mxfp4|bf16|f16)(?=[-_.]|$)", Path(filename).name)
    if not m:
        return None
    tag = m.group(1).upper()
    return quant_of(tag.replace("_K_", "_K ").split(" ")[0] if "_K" in tag else tag)


def is_moe(model_type: str) -> bool:
    """A mixture-of-experts model by its llama.cpp type string (arch name, ``30B.A3B`` or ``8x7B``)."""
    arch = model_type.split(" ")[0].lower()
    return arch in MOE_ARCHS or bool(re.search(r"\d+x\d+|\.A\d|\bMoE\b", model_type))


def model_of(rows: list[dict], path, model: str | None) -> tuple[str, str | None]:
    """The model preset the rows ran (``model=`` checked against every row) and its expert format."""
    from sim.machine import specs as config

    types = [(r["_row"], str(r.get("model_type", "")), r.get("model_n_params")) for r in rows]
    if model is None and not types[0][1]:
        raise ConfigError(f"bench={path}: row 1: missing field model_type; pass model=PRESET")
    for n, t, _ in types:
        if t and not is_moe(t):
            raise ConfigError(f"bench={path}: row {n}: field model_type {t!r} is a dense model: calibration "
                              "needs an MoE model (experts placed on the CPU or GPU)")
        if t and types[0][1] and t != types[0][1]:
            raise ConfigError(f"bench={path}: row {n}: field model_type {t!r} differs from row 1's "
                              f"{types[0][1]!r}: one model per bench file")
    name = model or preset_for(types[0][1], _float(types[0][2]), path)
    want = config.model(name).total_params
    for n, t, p in types:
        if _float(p) and abs(_float(p) / want - 1) > 0.03:
            raise ConfigError(f"bench={path}: row {n}: field model_n_params {_float(p) / 1e9:.2f} B ({t or '?'}) "
                              f"is not model={name} ({want / 1e9:.2f} B)")
    return name, quant_of(types[0][1]) or quant_of_file(str(rows[0].get("model_filename", "")))


def preset_for(model_type: str, n_params: float | None, path) -> str:
    """The conf/model preset with the row's parameter count (within 2 %; the arch name breaks ties)."""
    from sim.machine import specs as config
    from sim.paths import CONF_DIR

    if not n_params:
        raise ConfigError(f"bench={path}: row 1: no model_n_params to find the model by; pass model=PRESET")
    names = [p.stem for p in sorted((CONF_DIR / "model").glob("*.yaml")) if p.stem not in ("hf", "gguf")]   # file-backed slots
    near = [n for n in names if abs(config.model(n).total_params / n_params - 1) < 0.02]
    hint = ARCH_HINT.get(model_type.split(" ")[0].lower(), "")
    near = [n for n in near if n.startswith(hint)] or near
    if len(near) != 1:
        raise ConfigError(f"bench={path}: row 1: field model_type {model_type!r} ({n_params / 1e9:.2f} B params) "
                          f"matches {'no' if not near else 'several'} conf/model preset(s) {near}; pass model=PRESET")
    return near[0]


def _float(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _int(row: dict, key: str, default: int, path) -> int:
    v = row.get(key)
    if v in (None, ""):
        return default
    try:
        return int(float(v))
    except ValueError:
        raise ConfigError(f"{_where(path, row)}: field {key} {v!r} is not an integer") from None


def cpu_expert_layers(overrides: str, n_layers: int) -> set[int]:
    """Layers with an expert tensor that ``-ot`` patterns (``pattern=BUFT`` separated by ``;`` or
    ``,``) put on the CPU. As llama.cpp's loader (``llama-model-loader.cpp``: the first pattern that
    matches a tensor's name decides its buffer, then ``break``), the first matching pattern wins."""
    if not overrides or overrides.strip().lower() in ("none", "0"):
        return set()
    rules = []
    for item in re.split(r"[;,](?=[^;,]*=)", overrides):
        pattern, _, buft = item.strip().rpartition("=")
        try:
            rules.append((re.compile(pattern), buft.strip().upper().startswith("CPU")))
        except re.error as exc:
            raise ConfigError(f"-ot pattern {pattern!r} is not a regular expression ({exc})") from None

    def on_cpu(name: str) -> bool:
        return next((cpu for rx, cpu in rules if rx.search(name)), False)

    return {i for i in range(n_layers) if any(on_cpu(f"blk.{i}.{t}.weight") for t in EXPERT_TENSORS)}


def placement(row: dict, n_layers: int, path) -> tuple[dict | None, tuple]:
    """``policy`` arguments of a row (None with a note when the setting is not simulated)."""
    ngl = _int(row, "n_gpu_layers", n_layers + 1, path)
    cpu = set(range(min(_int(row, "n_cpu_moe", 0, path), n_layers)))
    try:
        cpu |= cpu_expert_layers(str(row.get("tensor_buft_overrides") or ""), n_layers)
    except ConfigError as exc:
        raise ConfigError(f"{_where(path, row)}: field tensor_buft_overrides: {exc}") from None
    if 0 <= ngl <= n_layers:
        if cpu - set(range(n_layers - ngl)):
            return None, (f"row {row['_row']}: -ngl {ngl} with experts of GPU layers on the CPU is not simulated; skipped",)
        return {"gpu_layers": ngl}, ()
    notes = () if cpu == set(range(len(cpu))) else (
        f"row {row['_row']}: experts of layers {sorted(cpu)} on the CPU simulated as --n-cpu-moe {len(cpu)}",)
    return {"n_cpu_moe": len(cpu)}, notes


def to_run(row: dict, model: str, quant: str | None, n_layers: int, path, gen_cap: int) -> BenchRow | str:
    """The :class:`BenchRow` of one checked row, or the note saying why it is skipped."""
    for key in ("n_prompt", "n_gen", "avg_ts"):
        if key not in row:
            raise ConfigError(f"{_where(path, row)}: missing field {key}")
    rate = _float(row.get("avg_ts"))
    if not rate or rate <= 0:
        raise ConfigError(f"{_where(path, row)}: field avg_ts is {row.get('avg_ts')!r}: the test did not run "
                          "(a rate > 0 is needed)")
    n_prompt, n_gen, depth = (_int(row, k, 0, path) for k in ("n_prompt", "n_gen", "n_depth"))
    policy, notes = placement(row, n_layers, path)
    if policy is None:
        return notes[0]
    conf = {k: row[k] for k in ("n_gpu_layers", "n_cpu_moe", "tensor_buft_overrides", "n_threads", "type_k",
                                "type_v", "flash_attn", "n_ubatch", "n_prompt", "n_gen", "n_depth") if k in row}
    notes += tuple(f"row {row['_row']}: {k} {row[k]} recorded, not simulated" for k in ("type_k", "type_v")
                   if str(row.get(k, "f16")) not in ("f16", ""))
    run = {"policy": "llamacpp", "model": model, "quant": quant, "gamma": 0, "policy_args": policy,
           "context": max(n_depth_ctx(n_prompt, n_gen, depth), 256)}
    if n_gen > 0 and n_prompt == 0:
        run.update(gen_tokens=min(n_gen, gen_cap), prompt_tokens=depth)
        kind = "tg"
    elif n_prompt > 0 and n_gen == 0 and depth == 0:
        run.update(gen_tokens=1, prompt_tokens=n_prompt, prefill=True, ubatch=_int(row, "n_ubatch", 512, path))
        kind = "pp"
    else:
        return f"row {row['_row']}: test pp{n_prompt}+tg{n_gen}@d{depth} is neither a tg nor a depth-0 pp test; skipped"
    threads = _int(row, "n_threads", 0, path) or None
    return BenchRow(row["_row"], kind, rate, run, threads, conf, notes)


def n_depth_ctx(n_prompt: int, n_gen: int, depth: int) -> int:
    """The context llama-bench allocates for a test: ``n_prompt + n_gen + n_depth``."""
    return n_prompt + n_gen + depth


def bench_runs(rows: list[dict], path, model: str | None = None, gen_cap: int = 8, quant: str | None = None,
               tests: str = "all") -> tuple:
    """``(model, quant, runs, notes)`` for the rows of one bench file (``quant`` replaces the format
    read from the rows; None in both: the model preset's; ``tests``: all, tg or pp rows); bad rows raise
    :class:`ConfigError` naming the row and the field."""
    from sim.machine import specs as config

    if tests not in ("all", "tg", "pp"):
        raise ConfigError(f"calibrate: tests={tests!r}: allowed all, tg (decode rows only), pp (prefill rows only)")
    check_machine(rows, path)
    name, found = model_of(rows, path, model)
    quant = quant or found
    n_layers = config.model(name).n_layers
    runs, notes = [], []
    for r in rows:
        out = to_run(r, name, quant, n_layers, path, gen_cap)
        if isinstance(out, str):
            notes.append(out)
        elif tests in ("all", out.kind):
            runs.append(out)
            notes.extend(out.notes)
        else:
            notes.append(f"row {out.row}: a {out.kind} row, left out (tests={tests})")
    if not runs:
        raise ConfigError(f"bench={path}: no row is a tg or pp test the simulator can run ({'; '.join(notes)})")
    return name, quant, runs, notes
