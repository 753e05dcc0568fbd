"""A machine composed of datasheet parts (GPU, host, link) and a runtime profile.

``conf/gpu``, ``conf/host`` and ``conf/link`` hold datasheet facts only; ``conf/runtime`` holds what
an implementation achieves on them (fractions of bandwidth and FLOP/s, launch and join overheads,
copy path), per device kind. :func:`compose` turns the four into the flat
:class:`sim.machine.specs.HardwareSpec` the cost model reads, so the hot loop sees plain numbers.
"""
from __future__ import annotations

from dataclasses import dataclass, fields


from sim.machine.presets import ConfigError, build_spec, preset_file, read_yaml
from sim.paths import CONF_DIR
from sim.machine.numa import numa_read, placement_of, read_ceiling_gbs

GPU_VENDORS = ("nvidia", "amd")


@dataclass(frozen=True)
class GpuSpec:
    """GPU datasheet: VRAM (GiB), memory bandwidth (GB/s), dense FP16 tensor TFLOP/s, INT8 TOPS."""

    name: str
    gpu: str
    kind: str
    vram_gib: float
    mem_bw_gbs: float
    fp16_tflops: float
    int8_tops: float
    fp8: bool
    sms: int
    vendor: str = "nvidia"             # nvidia (CUDA) | amd (ROCm/HIP): which driver's context the GPU pays

    def __post_init__(self):
        if self.vendor not in GPU_VENDORS:
            raise ConfigError(f"gpu {self.name}: vendor={self.vendor!r}: must be one of {', '.join(GPU_VENDORS)}")


@dataclass(frozen=True)
class HostSpec:
    """Host datasheet: cores (all sockets), memory channels and MT/s per socket, theoretical GB/s per socket."""

    name: str
    cpu: str
    kind: str
    cores: int
    sockets: int
    mem_channels: int
    mem_mts: float
    mem_bw_gbs: float
    cross_socket_gbs: float
    isa: str
    fp32_tflops: float
    mem_latency_ns: float = 0.0        # idle DRAM load-to-use latency (0: unknown; no per-core limit from it)
    dram_sustained_frac: float = 0.8   # share of theoretical DRAM bandwidth all readers together sustain (STREAM)
    remote_latency_ns: float = 0.0     # idle latency of a load from another socket's DRAM (0: as local)
    ccds: int = 0                      # chiplet CPUs: core dies, each reading DRAM through its own link (0: monolithic)
    ccd_read_gbs: float = 0.0          # read GB/s of one CCD's fabric link (GMI: 32 B per fabric clock)
    single_thread_ghz: float = 0.0     # max single-core boost clock (datasheet): eager per-op host cost ∝ 1/it (0: unknown)


@dataclass(frozen=True)
class LinkSpec:
    """Host-to-device link: raw, effective pinned and pageable H2D GB/s, per-copy latency (us)."""

    name: str
    link: str
    raw_gbs: float
    h2d_gbs: float
    pageable_gbs: float
    latency_us: float


@dataclass(frozen=True)
class RuntimeSpec:
    """What an implementation adds to the datasheet (see conf/runtime/custom_cuda.yaml per field)."""

    name: str
    description: str
    gpu_mem_eff: float
    gpu_flops_eff: float
    gpu_kernel_us: float
    cpu_mem_eff: float
    cpu_flops_eff: float
    cpu_expert_us: float
    layer_sync_us: float
    step_overhead_us: float
    draft_overhead_us: float
    kernels_per_layer: int
    kernels_per_shared_expert: int
    kernels_per_draft_layer: int
    reserved_gib: float
    workspace_gib: float
    draft_workspace_gib: float
    copy: str
    copies_per_expert: int
    numa_aware: bool
    gpu_quant_eff: dict
    cpu_quant_eff: dict
    by_kind: dict
    cpu_core_gbs: float = 0.0       # DRAM GB/s one core's kernel thread draws (0: no per-core limit)
    cpu_core_lines: float = 0.0     # cache lines in flight per core (Little's law with the host's latency; 0: unused)
    cpu_op_us: float = 0.0          # per CPU op of a layer computed whole on the CPU (thread-pool barrier)
    cpu_ops_per_layer: int = 0      # such ops per layer (norms, qkv, rope, attention, o, router, topk, ...)
    cpu_kv_eff: float = 1.0         # fraction of cpu_mem_eff CPU attention reaches over the KV cache
    gpu_attn_eff: float = 0.5       # fraction of the GPU's tensor FLOP/s its attention kernel reaches on the score/value products
    sample_us: float = 0.0          # per verified position: logits over the vocabulary, sampling
    gpu_graph_kernel_us: float = 0.0   # per GPU kernel when the forward runs as one CUDA graph (0: no graphs)
    gpu_ops_per_expert: int = 1     # eager ops (kernel launches) per GPU expert call: 1 = one fused launch
    gpu_quant_ops: dict | None = None   # format -> extra eager ops per GPU linear (HQQ's meta dequantize)
    stream_dense: bool = False      # a layer offloaded whole (vLLM UVA) also reads its dense weights over PCIe
    shared_overlap: bool = False    # one-token forwards run the shared experts on the GPU while the CPU experts run
    cpu_dequant_ops: dict | None = None    # expert/dense format -> FLOP-equivalent vector ops per weight per token
    cpu_isa_ops_scale: dict | None = None  # host ISA -> multiplier on cpu_dequant_ops (no VNNI on AVX2, ...)
    eager_ref_ghz: float = 0.0     # single_thread_ghz of the host gpu_kernel_us was fitted on (0: per-op cost not host-bound)
    numa_placement: str = ""       # replicate | interleave | first_touch (sim/machine/numa.py; "": from numa_aware)
    calibrate: dict | None = None   # parameter -> [low, high]: what `python -m sim calibrate` may fit

    def for_kinds(self, *kinds: str) -> "RuntimeSpec":
        """This profile with its ``by_kind`` overrides for the given device kinds applied (in order)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for kind in kinds:
            data.update(self.by_kind.get(kind) or {})
        return RuntimeSpec(**data)


def load_yaml(group: str, name: str) -> dict:
    """``conf/<group>/<name>.yaml`` as a dict, with a same-group ``defaults`` list merged first."""
    data = read_yaml(preset_file(group, name))
    merged: dict = {}
    for entry in data.pop("defaults", []) or []:
        if isinstance(entry, str) and entry != "_self_":
            merged.update(load_yaml(group, entry))
    merged.update(data)
    return merged


def composition(name: str) -> dict | None:
    """A named machine (``conf/hardware/<name>.yaml``) as ``{name, gpu, host, link, **overrides}``;
    ``None`` when the file is a flat machine (a ``real profile`` output)."""
    raw = read_yaml(CONF_DIR / "hardware" / f"{name}.yaml")
    if "defaults" not in raw:
        return None
    parts = {}
    for entry in raw["defaults"]:
        if isinstance(entry, dict):
            (key, value), = entry.items()
            if key.lstrip("/") in ("gpu", "host", "link"):
                parts[key.lstrip("/")] = value
    node = {k: v for k, v in (raw.get("hardware") or {}).items() if v is not None}
    return {**node, **parts}


def _part(cls, group: str, value, source: str):
    data = load_yaml(group, value) if isinstance(value, str) else dict(value)
    return build_spec(cls, data, f"{source}.{group}" if not isinstance(value, str) else f"conf/{group}/{value}.yaml")


def _label(group: str, spec, preset_name: str | None) -> str:
    """The part's name, with the fields that differ from its preset (``rtx4090[vram_gib=8]``)."""
    if not preset_name:
        return spec.name
    try:
        ref = load_yaml(group, spec.name)
    except ValueError:
        return spec.name
    diff = [f"{k}={getattr(spec, k)}" for k in ref if hasattr(spec, k) and getattr(spec, k) != ref[k]]
    return f"{spec.name}[{','.join(diff)}]" if diff else spec.name


def thread_bandwidth(socket_gbs: float, threads: int, core_gbs: float, eff: float) -> float:
    """The DRAM GB/s to state as the CPU's, so that the cost model's ``bandwidth x eff`` is the
    rate a kernel on ``threads`` cores achieves: ``min(socket_gbs x eff, threads x core_gbs)``.
    Each core sustains only what its outstanding cache misses carry (Little's law), so 16 cores of
    a 12-channel EPYC do not get all channels; ``core_gbs <= 0`` means no per-core limit."""
    if core_gbs <= 0:
        return socket_gbs
    return min(socket_gbs, threads * core_gbs / eff)


def core_bandwidth(rt: RuntimeSpec, host: HostSpec, latency_ns: float | None = None) -> float:
    """GB/s one core's thread draws: by Little's law ``cpu_core_lines x 64 B / latency`` when the
    runtime states the lines its kernel keeps in flight and the host its latency (so a high-latency
    server core draws less than a desktop core), else the runtime's ``cpu_core_gbs``. ``latency_ns``
    is the slowest thread's load latency (a remote node's, sim/machine/numa.py); default the host's
    local ``mem_latency_ns``."""
    lat = host.mem_latency_ns if latency_ns is None else latency_ns
    if rt.cpu_core_lines > 0 and host.mem_latency_ns > 0 and lat > 0:
        return rt.cpu_core_lines * 64.0 / lat
    return rt.cpu_core_gbs


def _threads(value, src: str) -> int | None:
    """``hardware.cpu_threads``: null (all cores) or an integer >= 1, else a one-line error."""
    from sim.machine.values import Rule, UserInputError, check_value as check

    try:
        return check("cpu_threads", value, Rule("int", 1, nullable=True))
    except UserInputError as exc:
        raise ConfigError(f"{src}: field {exc}") from None


def compose(comp: dict, runtime: RuntimeSpec) -> dict:
    """The flat machine fields of a composition ``{name, gpu, host, link, **flat overrides}``."""
    src = f"hardware {comp.get('name', '?')}"
    g, h, l = (_part(GpuSpec, "gpu", comp["gpu"], src), _part(HostSpec, "host", comp["host"], src),
               _part(LinkSpec, "link", comp["link"], src))
    rt = runtime.for_kinds(h.kind, g.kind)
    threads = min(_threads(comp.get("cpu_threads"), src) or h.cores, h.cores)   # the engine's CPU threads (-t N)
    read = numa_read(h, placement_of(rt.numa_aware, rt.numa_placement))
    dram_gbs = read.dram_gbs           # the theoretical DRAM GB/s of the nodes holding the weights
    cpu_bw = min(thread_bandwidth(dram_gbs, threads, core_bandwidth(rt, h, read.latency_ns), rt.cpu_mem_eff),
                 read_ceiling_gbs(read, h, threads) / rt.cpu_mem_eff)
    labels = [_label(grp, s, s.name) for grp, s in (("gpu", g), ("host", h), ("link", l))]
    name = comp.get("name") or "+".join(labels)
    ref = composition(name) if (CONF_DIR / "hardware" / f"{name}.yaml").exists() else None
    if ref is not None and ([ref.get(k) for k in ("gpu", "host", "link")] != [g.name, h.name, l.name]
                            or any("[" in x for x in labels)):
        name = "+".join(labels)   # a part was replaced or changed: the name says which
    flat = dict(
        name=name, gpu=g.gpu, vram_gib=g.vram_gib, gpu_mem_bw_gbs=g.mem_bw_gbs, gpu_mem_eff=rt.gpu_mem_eff,
        gpu_tflops=g.fp16_tflops, gpu_flops_eff=rt.gpu_flops_eff, gpu_kernel_us=rt.gpu_kernel_us,
        pcie_h2d_gbs=l.h2d_gbs if rt.copy == "pinned" else l.pageable_gbs, pcie_latency_us=l.latency_us,
        cpu=h.cpu, cpu_mem_bw_gbs=cpu_bw,
        cpu_mem_eff=rt.cpu_mem_eff,
        cpu_tflops=h.fp32_tflops if threads == h.cores else h.fp32_tflops * threads / h.cores, cpu_flops_eff=rt.cpu_flops_eff, cpu_threads=threads,
        cpu_expert_us=rt.cpu_expert_us, layer_sync_us=rt.layer_sync_us, step_overhead_us=rt.step_overhead_us,
        reserved_gib=rt.reserved_gib, workspace_gib=rt.workspace_gib, draft_workspace_gib=rt.draft_workspace_gib,
        runtime=rt.name,
        draft_overhead_us=rt.draft_overhead_us, kernels_per_layer=rt.kernels_per_layer,
        kernels_per_shared_expert=rt.kernels_per_shared_expert, kernels_per_draft_layer=rt.kernels_per_draft_layer,
        copies_per_expert=rt.copies_per_expert, gpu_quant_eff=dict(rt.gpu_quant_eff),
        cpu_quant_eff=dict(rt.cpu_quant_eff), parts={"gpu": g.name, "host": h.name, "link": l.name},
        cpu_op_us=rt.cpu_op_us, cpu_ops_per_layer=rt.cpu_ops_per_layer, cpu_kv_eff=rt.cpu_kv_eff,
        gpu_attn_eff=rt.gpu_attn_eff,
        sample_us=rt.sample_us, gpu_graph_kernel_us=rt.gpu_graph_kernel_us, cpu_isa=h.isa,
        gpu_ops_per_expert=rt.gpu_ops_per_expert, gpu_quant_ops=dict(rt.gpu_quant_ops or {}),
        stream_dense=rt.stream_dense, shared_overlap=rt.shared_overlap,
        cpu_dequant_ops=dict(rt.cpu_dequant_ops or {}), cpu_isa_ops_scale=dict(rt.cpu_isa_ops_scale or {}),
        host_dram_gbs=dram_gbs * h.dram_sustained_frac,
        host_single_thread_ghz=h.single_thread_ghz, eager_ref_ghz=rt.eager_ref_ghz,
        cuda_sms=g.sms if g.vendor == "nvidia" else 0)
    flat.update({k: v for k, v in comp.items() if k not in ("name", "gpu", "host", "link", "runtime", "cpu_threads")
                 and v is not None})
    return flat


def runtime_spec(value, default: str = "custom_cuda") -> RuntimeSpec:
    """A runtime from a name, or a mapping: ``name: policy`` (or no name) patches ``default`` with its
    non-null fields; any other mapping is a complete profile (or patches the profile it names)."""
    if value is None or isinstance(value, str):
        name = default if value in (None, "policy") else value
        return build_spec(RuntimeSpec, load_yaml("runtime", name), f"conf/runtime/{name}.yaml")
    patch = {k: v for k, v in dict(value).items() if v is not None and k != "defaults"}
    base_name = patch.get("name") if patch.get("name") not in (None, "policy") else default
    data = load_yaml("runtime", base_name)
    data.update(patch, name=base_name)
    return build_spec(RuntimeSpec, data, f"runtime {base_name}")
