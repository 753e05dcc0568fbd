"""Options of ``python -m real run|validate|profile`` and their ``key=value`` parsing.

Arguments are parsed with ``OmegaConf.from_dotlist`` and merged into a structured config of the
command's dataclass, so unknown keys and wrong types are reported with the key's name and the
valid keys; the hot loop then reads plain dataclass attributes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


class OptionError(ValueError):
    """A bad ``key=value`` argument (the message names the key and what is valid)."""


@dataclass
class ModelOptions:
    """Which target and draft to run: ``target=`` / ``draft=`` names or a synthetic pair."""

    target: str | None = None            # tiny:qwen3_moe | tiny:deepseek_v2 | local checkpoint | HF id
    draft: str | None = None             # tiny:dense | checkpoint; default: synthetic draft / none
    synthetic: str | None = None         # qwen3_30b_a3b: random weights of the real shape
    layers: int | None = None            # synthetic: MoE layers (default 48)
    draft_layers: int | None = None      # synthetic: draft layers (default 28)
    hidden: int | None = None            # synthetic: shrink hidden size (CPU tests)
    moe_intermediate: int | None = None  # synthetic: shrink expert intermediate size
    vocab: int | None = None             # synthetic: shrink the vocabulary
    residual_gain: float = 1.0           # synthetic: residual-branch scale (acceptance control)
    device: str = ""                     # cpu | cuda | cuda:N; default cuda when present
    dtype: str = "auto"                  # float32 | bfloat16 | float16 | auto (f32 on cpu, else bf16)
    seed: int = 0
    tokenizer: str | None = None
    chat: bool = True


@dataclass
class RunOptions(ModelOptions):
    """``python -m real run``: offloaded speculative decoding driven by one policy."""

    policy: str = "moespac"
    policy_args: dict[str, Any] = field(default_factory=dict)   # policy_args.K=V overrides the preset
    cache_ratio: float = 0.17
    prompts: str = "tiny:2"              # tiny:N random prompts | JSONL file | HF dataset
    prompt_len: int = 16                 # length of tiny:N prompts
    limit: int | None = None
    split: str = "test"
    prompt_field: str = "question"       # dataset column holding the prompt text
    gamma: int = 8
    max_new_tokens: int = 64
    sync: bool = False                   # blocking prefetch at the protocol points (deterministic)
    check: bool = False                  # also decode plain greedy; exit 1 if any token differs
    eos: bool = True
    hardware: str = "rtx4090_pcie4"      # preset name or a YAML from `python -m real profile`
    context: int = 4096                  # KV reservation of the memory plan (as the simulator's)
    cpu_workers: int = 1
    fail_every: int = 0                  # fault injection: every N-th transfer fails
    delay_ms: float = 0.0                # fault injection: every transfer is delayed
    warmup: int = 8                      # tokens of a discarded warm-up decode (0: none)
    prefill: bool = False                # the prompt's forward follows a copy-or-CPU rule (sim.prefill)
    prefill_rule: str = "auto"           # auto | llamacpp | ik_llama | ktransformers | optimal | cpu | gpu
    prefill_threshold: int = 1024        # prefill_rule=ktransformers: tokens from which a layer copies
    experiment: str = "real"
    out: str | None = None
    quiet: bool = False


@dataclass
class ValidateOptions(RunOptions):
    """``python -m real validate``: real and simulated runs of the same traces, diff table."""

    policies: str = "moespac,llamacpp_sd"   # (= validate.DEFAULT_POLICIES) with run=: the run's own
    run: str | None = None               # an existing `real run` output folder to replay instead
    out: str | None = "out/validate"
    sim_hardware: str | None = None      # the simulator's hardware (default: the real run's)


@dataclass
class ProfileOptions(ModelOptions):
    """``python -m real profile``: measure this machine, write a hardware YAML."""

    synthetic: str | None = "qwen3_30b_a3b"
    layers: int | None = 2
    draft_layers: int | None = None
    out: str = "out/profile/hardware.yaml"   # conf/hardware/<name>.yaml makes it a preset
    name: str | None = None
    fast: bool = False                   # few sizes and repetitions (tests)
    max_tokens: int = 16                 # expert tables for n = 0..max_tokens
    gamma: int = 8
    context: int = 256
    cpu_workers: int = 1                 # as the run's CPU tier


def parse(cls, args: list[str]):
    """``cls`` filled from ``key=value`` strings; :class:`OptionError` names the bad key."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    bad = [a for a in args if "=" not in a]
    if bad:
        raise OptionError(f"expected key=value, got {bad[0]!r}; valid keys: {valid_keys(cls)}")
    flags = {f.name for f in fields(cls) if f.type in (bool, "bool")}
    for key, _, value in (a.partition("=") for a in args):   # YAML would read yes/on/off as booleans
        if key in flags and value.lower() not in ("true", "false"):
            raise OptionError(f"bad option {key!r}: {key}={value!r}: must be true or false")
    try:
        base = OmegaConf.structured(cls)
        OmegaConf.set_struct(base, True)
        if "policy_args" in base:
            OmegaConf.set_struct(base.policy_args, False)
        merged = OmegaConf.merge(base, OmegaConf.from_dotlist(args))
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        msg = str(exc).splitlines()[0]
        raise OptionError(f"bad option {key!r}: {msg}; valid keys: {valid_keys(cls)}") from None


def valid_keys(cls) -> str:
    """The option names of ``cls``, comma-separated (for error messages and --help)."""
    return ", ".join(f.name for f in fields(cls))
