"""Plain dataclasses for hardware, model and draft specs (converted from Hydra/YAML at the boundary).

The hot loop never touches OmegaConf (its attribute access is ~600x slower than a dataclass).
Every spec is checked when built: a wrong or missing field raises :class:`ConfigError` naming the
file (or group) and the field with its allowed range.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from omegaconf import OmegaConf

from sim.paths import CONF_DIR  # noqa: F401  (re-exported)

from sim.machine.presets import PRECISION_BYTES, ConfigError, build_spec, preset_file, read_yaml  # noqa: F401  (re-exported)
from sim.machine.quant import bytes_per_weight

LEGACY_DRAFT_OVERHEAD_FRAC = 0.5  # a flat machine without draft_overhead_us: half the target's (custom_cuda's ratio)


@dataclass(frozen=True)
class HardwareSpec:
    """One resolved machine: GPU, PCIe link, CPU and the runtime's efficiencies; rates in GB/s and
    TFLOP/s, overheads in microseconds. Built by :func:`hardware` from a gpu x host x link
    composition and a runtime profile (:mod:`sim.machine.compose`), or flat (``real profile`` output).
    """

    name: str
    gpu: str
    vram_gib: float
    gpu_mem_bw_gbs: float
    gpu_mem_eff: float
    gpu_tflops: float
    gpu_flops_eff: float
    gpu_kernel_us: float
    pcie_h2d_gbs: float
    pcie_latency_us: float
    cpu: str
    cpu_mem_bw_gbs: float
    cpu_mem_eff: float
    cpu_tflops: float
    cpu_flops_eff: float
    cpu_threads: int
    cpu_expert_us: float
    layer_sync_us: float
    step_overhead_us: float
    reserved_gib: float
    workspace_gib: float = 4.4  # engine compute buffers + allocator slack (see conf/hardware)
    tables: dict | None = None  # measured cost tables written by `python -m real profile`
    runtime: str = "custom_cuda"            # the runtime profile these efficiencies come from
    draft_workspace_gib: float = 0.0        # extra workspace when a draft model runs
    draft_overhead_us: float | None = None  # per draft forward; None: LEGACY_DRAFT_OVERHEAD_FRAC x step
    kernels_per_layer: int = 8              # conf/runtime/custom_cuda.yaml documents these four
    kernels_per_shared_expert: int = 3
    kernels_per_draft_layer: int = 8
    copies_per_expert: int = 1
    gpu_quant_eff: dict | None = None       # expert format -> multiplier on gpu_mem_eff
    cpu_quant_eff: dict | None = None       # expert format -> multiplier on cpu_mem_eff
    parts: dict | None = None               # the gpu/host/link presets it was composed of
    cpu_op_us: float = 0.0                  # conf/runtime/custom_cuda.yaml documents these four
    cpu_ops_per_layer: int = 0
    cpu_kv_eff: float = 1.0
    gpu_attn_eff: float = 0.5               # fraction of gpu_tflops the attention kernel reaches on its score/value FLOPs
    sample_us: float = 0.0
    gpu_graph_kernel_us: float = 0.0        # per kernel inside a CUDA graph (0: the runtime uses none)
    gpu_ops_per_expert: int = 1             # GPU kernel launches (eager ops) per GPU expert call
    gpu_quant_ops: dict | None = None       # format -> extra eager ops per GPU linear of that format
    stream_dense: bool = False              # a streamed (UVA) layer's dense weights cross the link too
    shared_overlap: bool = False            # one-token forwards: shared experts on the GPU beside the CPU experts
    cpu_isa: str = ""                       # the host's widest ISA (avx2 | avx512 | amx)
    cpu_dequant_ops: dict | None = None     # format -> FLOP-equivalent CPU ops per weight per token (2 if absent)
    cpu_isa_ops_scale: dict | None = None   # ISA -> multiplier on cpu_dequant_ops
    host_dram_gbs: float = 0.0              # sustained host DRAM GB/s shared by CPU kernels and DMA (0: not modelled)
    host_single_thread_ghz: float = 0.0     # the host's max single-core boost clock (0: unknown, per-op cost unscaled)
    eager_ref_ghz: float = 0.0              # the clock gpu_kernel_us is stated at (0: not host-bound, unscaled)
    cuda_sms: int = 0                       # SMs of an NVIDIA GPU, for its CUDA context (0: unknown or not CUDA)

    def __post_init__(self):
        if self.draft_overhead_us is None:
            object.__setattr__(self, "draft_overhead_us", LEGACY_DRAFT_OVERHEAD_FRAC * self.step_overhead_us)


@dataclass(frozen=True)
class ModelSpec:
    """A MoE target model: routing shape and byte sizes."""

    name: str
    n_layers: int
    n_dense_layers: int
    n_experts: int
    top_k: int
    n_shared_experts: int
    hidden: int
    moe_intermediate: int
    expert_params: int
    non_expert_params: float
    attn_params_per_layer: int
    lm_head_params: int
    kv_bytes_per_token: int                 # KV bytes per context token of the full-attention layers
    precision: str = "f16"                  # legacy: the format of every weight when quant is unset
    quant: str | None = None                # routed experts' format (sim.machine.quant)
    quant_dense: str | None = None          # every other weight's format (default: quant)
    shared_intermediate: int = 0            # FFN width of one shared expert (0: moe_intermediate)
    dense_intermediate: int = 0             # FFN width of a dense (non-MoE) layer
    embed_params: int = 0                   # token embedding (0 when tied into lm_head or unknown)
    kv_swa_bytes_per_token: int = 0         # KV bytes per token of the sliding-window layers
    sliding_window: int = 0                 # their window (tokens)
    attention: str = "gqa"                  # gqa | mla (how kv_bytes_per_token was derived)
    attn_flops_per_token: int = 0           # score + value FLOPs per query and context token, full-attention layers summed (sim/machine/attention.py; 0: not charged)
    attn_swa_flops_per_token: int = 0       # the same, sliding-window layers summed (each capped at sliding_window)
    source: str = ""                        # where the architecture numbers come from
    # model=gguf:PATH (sim/machine/gguf_model.py): the file's own byte sizes; 0/"" (presets, hf:) = from the formats
    file_expert_bytes: int = 0              # one routed expert (mean over layers) instead of expert_params x quant
    file_non_expert_bytes: float = 0.0      # every other weight, token embedding and output head included
    file_embed_bytes: int = 0               # token_embd (part of file_non_expert_bytes; llama.cpp keeps it in host memory)
    file_head_bytes: int = 0                # output head (part of file_non_expert_bytes; 0: tied to token_embd)
    file_expert_types: str = ""             # the routed experts' ggml types by share of bytes ("q4_k 67% + q6_k 33%")
    OMIT_AT_DEFAULT: ClassVar[tuple] = ("file_expert_bytes", "file_non_expert_bytes", "file_embed_bytes",
                                        "file_head_bytes", "file_expert_types")   # left out of records when unset

    @property
    def expert_quant(self) -> str:
        return self.quant or self.precision

    @property
    def dense_quant(self) -> str:
        return self.quant_dense or self.quant or self.precision

    @property
    def bytes_per_param(self) -> float:
        """Bytes per weight of everything except the routed experts (a GGUF file's mean when known)."""
        if self.file_non_expert_bytes:
            return self.file_non_expert_bytes / self.non_expert_params
        return PRECISION_BYTES[self.dense_quant]

    @property
    def expert_bytes(self) -> int:
        """Bytes of one routed expert: the file's when known, else its weights in ``expert_quant``."""
        if self.file_expert_bytes:
            return int(self.file_expert_bytes)
        return int(self.expert_params * bytes_per_weight(self.expert_quant))

    @property
    def shared_params(self) -> int:
        """Weights of all shared experts of one layer."""
        return self.n_shared_experts * 3 * self.hidden * (self.shared_intermediate or self.moe_intermediate)

    @property
    def total_params(self) -> float:
        return self.n_layers * self.n_experts * self.expert_params + self.non_expert_params

    @property
    def active_params(self) -> float:
        """Weights one token reads: everything but the routed experts it did not choose."""
        return self.n_layers * self.top_k * self.expert_params + self.non_expert_params

    def kv_bytes(self, context: int) -> int:
        """Target KV-cache bytes for ``context`` tokens (sliding-window layers keep at most their window)."""
        return context * self.kv_bytes_per_token + min(context, self.sliding_window) * self.kv_swa_bytes_per_token


@dataclass(frozen=True)
class DraftSpec:
    """A dense draft model for speculative decoding (``name: none`` for none)."""

    zero_allowed: ClassVar[bool] = True   # ``none`` has zero params and layers: no positivity check

    name: str
    params: float
    bytes_per_param: float
    n_layers: int
    kv_bytes_per_token: int
    kind: str = "model"                 # model | head (EAGLE/MTP: reads the target's hidden state) | ngram
    host_us_per_token: float = 0.0      # host time per drafted token (n-gram lookup, sampling)
    acceptance: dict | None = None      # per-workload first-position acceptance (None: the workload's)
    acceptance_decay: float = 1.0       # conditional acceptance falls by this factor per position
    source: str = ""

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_param


def load_preset(group: str, name: str) -> dict:
    """The YAML preset ``conf/<group>/<name>.yaml`` as a dict; unknown names list the valid ones."""
    path = preset_file(group, name)
    if group == "hardware":
        from sim.machine.compose import composition

        comp = composition(name)
        if comp is not None:
            return comp
    return read_yaml(path)


def hardware(name_or_cfg, runtime=None, default_runtime: str = "custom_cuda") -> HardwareSpec:
    """A :class:`HardwareSpec` from a preset name or a mapping: a composition ``{name, gpu, host,
    link, <flat field overrides>}`` (parts by name or as mappings) resolved with ``runtime`` (a name,
    a mapping, or None for ``default_runtime``), or a flat machine (every field, e.g. a profile)."""
    from sim.machine.compose import compose, runtime_spec

    data, source = name_or_cfg, "hardware"
    if isinstance(name_or_cfg, str):
        data, source = load_preset("hardware", name_or_cfg), f"conf/hardware/{name_or_cfg}.yaml"
    elif not isinstance(data, dict):
        data = OmegaConf.to_container(data, resolve=True)
    if "host" in data:
        data = compose(data, runtime_spec(data.get("runtime", runtime), default_runtime))
    return build_spec(HardwareSpec, data, source)


def model(name_or_cfg, quant: str | None = None, quant_dense: str | None = None) -> ModelSpec:
    """A :class:`ModelSpec` from a preset name, ``hf:PATH`` (a config.json or its folder), ``gguf:PATH``
    (a GGUF file, :mod:`sim.machine.gguf_model`), or a mapping (``hf_path`` / ``gguf_path`` in it
    derives from that file, other keys override); ``quant`` sets the routed experts' format and
    ``quant_dense`` the rest (default: ``quant``, or the model's own non-expert format when ``quant``
    is the model's own expert format)."""
    gguf, given = False, {}             # a GGUF file's byte sizes hold for the formats not overridden
    if isinstance(name_or_cfg, str) and name_or_cfg.startswith("hf:"):
        data, source = _hf(name_or_cfg[3:]), name_or_cfg
    elif isinstance(name_or_cfg, str) and name_or_cfg.startswith("gguf:"):
        data, source, gguf = _gguf(name_or_cfg[5:]), name_or_cfg, True
    elif isinstance(name_or_cfg, str):
        data, source = load_preset("model", name_or_cfg), f"conf/model/{name_or_cfg}.yaml"
    else:
        data = name_or_cfg if isinstance(name_or_cfg, dict) else OmegaConf.to_container(name_or_cfg, resolve=True)
        data, source = dict(data), "model"
        given = {k: v for k, v in data.items() if v is not None and k not in ("hf_path", "gguf_path")}
        if data.get("hf_path"):
            data = {**_hf(data["hf_path"]), **given}
        elif data.get("gguf_path"):
            data, gguf = {**_gguf(data["gguf_path"]), **given}, True
        elif "gguf_path" in data:
            raise ConfigError("model=gguf: give the file, model=gguf:PATH (a .gguf file or a split model's first shard)")
        data.pop("hf_path", None)
        data.pop("gguf_path", None)
    if quant is not None:      # the checkpoint's own format keeps its own non-expert format (gpt-oss: BF16)
        native = data.get("quant_dense") if data.get("quant") == quant else None
        data = {**data, "quant": quant, "quant_dense": quant_dense or native or quant}
    elif quant_dense is not None:
        data = {**data, "quant_dense": quant_dense}
    if gguf:
        from sim.machine.gguf_model import keep_file_sizes

        data = keep_file_sizes(data, {k for k in ("quant", "quant_dense") if k in given}
                               | ({"quant", "quant_dense"} if quant is not None else set())
                               | ({"quant_dense"} if quant_dense is not None else set()))
    return build_spec(ModelSpec, data, source)


def _hf(path: str) -> dict:
    from sim.machine.hf_config import UnsupportedConfig, from_path

    try:
        return from_path(path)
    except UnsupportedConfig as exc:
        raise ConfigError(str(exc)) from None


def _gguf(path: str) -> dict:
    from sim.machine.gguf_file import GgufError
    from sim.machine.gguf_model import from_path

    try:
        return from_path(path)
    except GgufError as exc:
        raise ConfigError(str(exc)) from None


def draft(name_or_cfg) -> DraftSpec:
    """A :class:`DraftSpec` from a preset name or a config mapping."""
    if isinstance(name_or_cfg, str):
        return build_spec(DraftSpec, load_preset("draft", name_or_cfg), f"conf/draft/{name_or_cfg}.yaml")
    return build_spec(DraftSpec, name_or_cfg, "draft")
