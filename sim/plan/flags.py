"""The exact llama.cpp flags of a placement, each explained in one line, and the ``llama-bench`` call
that measures the best candidates at once.

Flag names and meanings: llama.cpp ``common/arg.cpp`` (``-ngl``, ``--n-cpu-moe``, ``-ot``, ``-c``,
``-ub``, ``-t``, ``-ctk``/``-ctv``, ``-fa on|off|auto``, ``-md``/``-ngld``/``--draft-max``) and
``tools/llama-bench/README.md`` (``-ncmoe``, ``-ot`` with ``,`` between tests and ``;`` between the
patterns of one test; list values run one test each). ``--n-cpu-moe N`` keeps the routed experts of
blocks ``0..N-1`` on the CPU; blocks are numbered from the first layer, dense ones included.
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.plan.regex import expert_tensors
from sim.machine.vram.options import CACHE_TYPE_BYTES, MemoryOptions

STATIC = ("n_cpu_moe", "ot")     # placements of whole layers' experts with every layer on the GPU (-ngl 99)


@dataclass(frozen=True)
class EngineArgs:
    """What the flags of every placement of one plan share."""

    n_layers: int          # MoE layers
    n_dense: int           # dense blocks before them
    context: int
    threads: int
    cpu: str
    mem: MemoryOptions = MemoryOptions()   # the -ub, -ctk/-ctv and -fa the memory plan charged


@dataclass(frozen=True)
class Flag:
    """One command-line flag, its value and what it does here."""

    flag: str
    value: str
    why: str


def cpu_blocks(c, a: EngineArgs) -> list[int]:
    """The GGUF blocks whose routed experts placement ``c`` keeps in host RAM."""
    if c.knob == "n_cpu_moe":
        return [a.n_dense + l for l in range(c.value)]
    if c.knob == "ot":
        return [a.n_dense + l for l in range(a.n_layers) if l not in c.gpu_layers]
    raise ValueError(f"cpu_blocks: {c.knob} is not a whole-layer expert placement")


def ot_arg(blocks) -> str:
    """``-ot``'s value keeping the routed experts of ``blocks`` on the CPU."""
    return expert_tensors(blocks) + "=CPU"


def ngl_all(a: EngineArgs) -> int:
    """An ``-ngl`` that offloads every block and the output layer (99, or more for deeper models)."""
    return max(99, a.n_layers + a.n_dense + 1)


def n_cpu_moe_arg(c, a: EngineArgs) -> int:
    """``--n-cpu-moe``'s value for ``c`` (dense blocks count: MoE layer l is block l + dense)."""
    return c.value + a.n_dense if c.value else 0


def placement_flags(c, a: EngineArgs) -> list[Flag]:
    """The flags that place ``c``'s experts (``--n-cpu-moe`` and its ``-ot`` twin, or ``-ot`` alone)."""
    blocks = cpu_blocks(c, a)
    gpu = a.n_layers - len(blocks)
    ot = Flag("-ot", f'"{ot_arg(blocks)}"' if blocks else '""',
              f"tensor override: the expert tensors (blk.N.ffn_{{up,gate,down}}_exps.weight) of {len(blocks)} "
              f"blocks stay in host RAM; the experts of the other {gpu} MoE layers go to the GPU")
    if c.knob == "ot":
        return [Flag(ot.flag, ot.value, ot.why + " (a layer set --n-cpu-moe cannot express: it always keeps "
                     "the first N blocks' experts on the CPU)")]
    n = n_cpu_moe_arg(c, a)
    return [Flag("--n-cpu-moe", str(n), f"the routed experts of blocks 0..{n - 1} stay in host RAM and run on the CPU"
                 + (f" ({a.n_dense} dense blocks counted)" if a.n_dense and n else "")),
            Flag(ot.flag, ot.value, "the same placement written as a tensor override (use one of the two)")]


def common_flags(c, a: EngineArgs) -> list[Flag]:
    """``-ngl``, ``-c``, ``-ub``, ``-t``, ``-ctk``/``-ctv``, ``-fa`` (and the draft's flags)."""
    out = [Flag("-ngl", str(ngl_all(a)), "every block's attention, norms, router and KV (and the output layer) on the GPU; "
                "only the expert tensors named here stay in host RAM")]
    out += [Flag("-c", str(a.context), "context length: the KV cache the memory plan reserved in VRAM"),
            Flag("-ub", str(a.mem.ubatch), "physical micro-batch of prompt processing (its compute buffer is part of "
                 "the workspace the plan charged; llama.cpp's default)"),
            Flag("-t", str(a.threads), f"CPU threads computing the CPU experts: the plan priced {a.threads} "
                 f"on {a.cpu} (threads=N changes it)"),
            Flag("-ctk", a.mem.cache_type_k, f"K cache element type (the plan charged {a.mem.cache_type_k}: "
                 f"{CACHE_TYPE_BYTES[a.mem.cache_type_k]:g} bytes per element)"),
            Flag("-ctv", a.mem.cache_type_v, "V cache element type (a quantized V cache needs -fa on)"),
            Flag("-fa", "on" if a.mem.flash_attn else "off",
                 "flash attention: less attention workspace (older builds take a bare -fa)")]
    if not a.mem.op_offload:
        out.append(Flag("--no-op-offload", "", "prompt micro-batches compute the host experts on the CPU: no copy of a "
                        "layer's experts in the compute buffer (the plan charged none; slower prompt processing)"))
    if c.engine == "llama_cpp_sd":
        out += [Flag("-md", "DRAFT.gguf", "speculative decoding: the draft model's GGUF file"),
                Flag("-ngld", "99", "every layer of the draft on the GPU (the plan charged its weights and KV)"),
                Flag("--draft-max", str(c.gamma), f"up to {c.gamma} drafted tokens per verify step (gamma)")]
    return out


def server_line(c, a: EngineArgs, use_ot: bool = False) -> str:
    """The ``llama-server`` command of ``c`` with every flag (``use_ot``: ``-ot`` instead of ``--n-cpu-moe``)."""
    place = placement_flags(c, a)
    chosen = [f for f in place if (f.flag == "-ot") == (use_ot or c.knob == "ot")]
    flags = common_flags(c, a)
    parts = [flags[0]] + chosen + flags[1:]
    return "llama-server -m MODEL.gguf " + " ".join(f"{f.flag} {f.value}" for f in parts)


def explain(c, a: EngineArgs) -> list[str]:
    """One line per flag of ``c``: ``flag value: why``."""
    return [f"{f.flag} {f.value}: {f.why}" for f in common_flags(c, a)[:1] + placement_flags(c, a)
            + common_flags(c, a)[1:]]


def bench_line(cands: list, a: EngineArgs, prompt_tokens: int, gen_tokens: int) -> str:
    """One ``llama-bench`` call measuring every placement of ``cands`` (llama.cpp, no draft: llama-bench
    does not draft): ``-ncmoe a,b,c`` when all are ``--n-cpu-moe``, else one ``-ot`` group each."""
    if all(c.knob == "n_cpu_moe" for c in cands):
        place = "-ncmoe " + ",".join(str(n_cpu_moe_arg(c, a)) for c in cands)
    else:
        place = '-ot "' + ",".join(ot_arg(b) if (b := cpu_blocks(c, a)) else "" for c in cands) + '"'
    depth = f" -d {prompt_tokens}" if prompt_tokens else ""
    return (f"llama-bench -m MODEL.gguf -ngl {ngl_all(a)} {place} -t {a.threads} -fa {int(a.mem.flash_attn)} "
            f"-ctk {a.mem.cache_type_k} -ctv {a.mem.cache_type_v} -ub {a.mem.ubatch}{'' if a.mem.op_offload else ' -nopo 1'} -p 0 -n {gen_tokens}{depth} -r 3")
