"""Checks of what a user types, at the command-line boundary, before any work starts.

One table (:data:`RULES`) declares the type and the allowed range of every top-level number and name
of every command (``sim run|sweep|breakeven``, ``traces synth|stats``, ``real run``) and of the policy
parameters that have a range; :func:`check` applies a rule and returns the normalised value or raises
:class:`UserInputError` with a one-line message naming the key, the value and the allowed range.
Keys that do not exist are refused with the nearest valid ones (:func:`refuse_unknown`). Policy
parameters without a rule are type-checked against their preset's value (:func:`check_policy_params`).
New keys join by adding a row to the table.
"""
from __future__ import annotations

import difflib

from sim.prefill.decision import RULES as PREFILL_RULES
from sim.machine.values import Rule, UserInputError, check_value, show as _show  # noqa: F401  (re-exported)
from sim.machine.vram.options import CACHE_TYPE_BYTES


INT0, INT1 = Rule("int", 0), Rule("int", 1)
RULES: dict[str, Rule] = {
    # sim run | sweep (and real run, which shares most of them)
    "cache_ratio": Rule("number", 0, 1),
    "gamma": INT0,
    "gen_tokens": INT1,
    "prompt_tokens": INT0,
    "context": INT1,
    "seed": INT0,
    "acceptance": Rule("number", 0, 1, nullable=True),
    "n_jobs": Rule("int", nonzero=True),
    "resume": Rule("bool"),
    "append": Rule("bool"),
    "timeline": Rule("bool"),
    "trace": Rule("str", nullable=True),
    "experiment": Rule("str"),
    "out": Rule("str"),
    "quant": Rule("str", nullable=True),
    "quant_dense": Rule("str", nullable=True),
    "slots_per_layer": Rule("int", 0, nullable=True),
    "vram_budget_gib": Rule("number", 0, low_open=True, nullable=True),
    "prefill": Rule("bool"),
    "ubatch": Rule("int", 1, 65536),
    "cache_type_k": Rule("choice", choices=tuple(CACHE_TYPE_BYTES)),
    "cache_type_v": Rule("choice", choices=tuple(CACHE_TYPE_BYTES)),
    "flash_attn": Rule("bool"),
    "op_offload": Rule("bool"),        # false: llama.cpp --no-op-offload
    "unified_memory": Rule("bool"),    # GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 (llama.cpp-family runtimes)
    "prefill_rule": Rule("choice", choices=PREFILL_RULES),
    "prefill_threshold": INT1,
    "batch": Rule("int", 1, 64),
    "stagger": INT0,
    "threads": Rule("int", 1, 4096, nullable=True),   # llama.cpp -t N (sim run|sweep|plan); null: every core
    # sim breakeven (each element of a list)
    "equal_vram": Rule("bool"),
    "map": Rule("bool"),
    "gamma_min": Rule("int", 1, 12),    # gamma 0 is autoregressive: no speculation to weigh
    "gamma_max": Rule("int", 1, 12),
    "acceptances": Rule("number", 0, 1),
    "ratios": Rule("number", 0, 10),
    "ar_policies": Rule("str"),
    "sd_policies": Rule("str"),
    # drafter preset fields (conf/draft) with a range
    "draft.acceptance_decay": Rule("number", 0, 1, low_open=True),
    # the acceptance model (sim run|sweep acceptance_model.KEY; null = the default)
    "acceptance_model.decay": Rule("number", 0, 1, low_open=True, nullable=True),
    "acceptance_model.spread": Rule("number", 0, 1, nullable=True),
    "acceptance_model.burst": Rule("number", 0, 1, nullable=True),
    "acceptance_model.p_min": Rule("number", 0, 1, nullable=True),
    "acceptance_model.kappa": Rule("number", 0, low_open=True, nullable=True),
    "draft.host_us_per_token": Rule("number", 0),
    # real run
    "max_new_tokens": INT1,
    "prompt_len": INT1,
    "cpu_workers": INT1,
    "warmup": INT0,
    "fail_every": INT0,
    "delay_ms": Rule("number", 0),
    # traces synth | stats
    "tokens": INT1,
    "json": Rule("bool"),
    "slots": INT0,            # each element of the list
    # policy parameters with a range (the others are type-checked against their preset)
    "policy.K": INT1,
    "policy.tau": INT1,
    "policy.up": INT1,
    "policy.down": INT1,
    "policy.stat_decay": Rule("number", 0, 1, low_open=True),
    "policy.gpu_layers": Rule("choice", low=0, choices=("first", "last")),   # which end, or -ngl N
}


def check(key: str, value, rule: Rule | None = None):
    """``value`` of ``key`` checked against its rule (``RULES[key]`` unless given), normalised
    (integral floats to int); :class:`UserInputError` otherwise."""
    return check_value(key, value, rule or RULES[key])


def check_all(values: dict, keys=None) -> dict:
    """Every key of ``values`` that has a rule (or only ``keys``), checked; returns the normalised dict.
    A run-specification key without a row in :data:`RULES` is checked against its field's type
    (:func:`spec_rule`), so a new knob is type-checked without a row here."""
    out = dict(values)
    for key in keys if keys is not None else values:
        if key not in values:
            continue
        rule = RULES.get(key) or spec_rule(key)
        if rule is not None:
            out[key] = check(key, values[key], rule)
    return out


def spec_rule(key: str) -> Rule | None:
    """The rule a :class:`sim.run.spec.RunSpec` field's annotation implies (bool, int, float, str;
    nullable when its default is None), or None for other types and other keys."""
    from dataclasses import fields

    from sim.run.spec import GROUP_OF, GROUPS

    group = GROUP_OF.get(key)
    if group is None:
        return None
    f = next(f for f in fields(GROUPS[group]) if f.name == key)
    kind = {"bool": "bool", "int": "int", "float": "number", "str": "str"}.get(
        str(f.type).replace(" | None", ""))
    return Rule(kind, nullable=f.default is None) if kind else None


def threads_override(values: dict) -> dict:
    """``{"cpu_threads": N}`` for a top-level ``threads=N`` (the engine's CPU threads, llama.cpp
    ``-t N``; checked against its rule), ``{}`` when absent or null (every core: the default machine).
    The machine applies it (sim/machine/compose.py ``compose``): CPU compute scales with
    ``min(N, cores) / cores``; DRAM bandwidth is ``min(socket x eff, N x per-core GB/s)``, the
    per-core rate by Little's law (lines in flight x 64 B / load latency) where the runtime states
    it, so bandwidth saturates after a few threads per memory channel."""
    n = check("threads", values.get("threads"))
    return {} if n is None else {"cpu_threads": n}


def check_acceptance_model(values) -> dict:
    """The ``acceptance_model`` mapping checked field by field (unknown fields refused); the set
    (non-null) fields only, so that the default is ``{}`` and leaves a run's identity unchanged."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise UserInputError(f"acceptance_model={_show(values)}: must be a mapping of "
                             "decay, spread, burst, p_min, kappa")
    fields = [k.split(".", 1)[1] for k in RULES if k.startswith("acceptance_model.")]
    refuse_unknown(values, fields, "acceptance_model")
    checked = {k: check(f"acceptance_model.{k}", v) for k, v in values.items()}
    return {k: float(v) for k, v in checked.items() if v is not None}


def nearest(key: str, valid) -> list[str]:
    """The valid keys closest to a misspelt ``key`` (at most three)."""
    return difflib.get_close_matches(key, list(valid), n=3, cutoff=0.5)


def refuse_unknown(keys, valid, where: str) -> None:
    """:class:`UserInputError` for the first of ``keys`` not in ``valid``, naming the nearest valid keys."""
    valid = sorted(valid)
    for key in keys:
        if key not in valid:
            close = nearest(key, valid)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UserInputError(f"{where}: unknown key {key!r}{hint} (valid: {', '.join(valid)})")


def check_policy_params(name: str, params: dict) -> dict:
    """The parameters of policy preset ``name`` checked: unknown ones refused with the nearest names,
    ranges from :data:`RULES`, others of the preset value's type (an int where a float is expected
    is accepted). Returns the checked parameters."""
    from sim.policies.registry import policy_preset, preset_params

    preset = preset_params(name)
    module, cls = policy_preset(name)["_target_"].rsplit(".", 1)
    import importlib

    valid = set(preset) | getattr(importlib.import_module(module), cls).parameter_names()
    refuse_unknown(params, valid, f"policy {name}")
    out = {}
    for key, value in params.items():
        full = f"policy.{key}"
        if full in RULES:
            out[key] = check(full, value)
            continue
        default = preset.get(key)
        kind = {bool: "bool", int: "number", float: "number", str: "str"}.get(type(default))
        out[key] = check(full, value, Rule(kind)) if kind and value is not None and default is not None \
            else value
    return out
