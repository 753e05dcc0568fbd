"""What the planner prints and writes: the ranking, the command line to paste, the VRAM by part,
how sure it is, the tok/s-against-N figure and a CSV of every placement with its inputs.

Command syntax: llama.cpp ``common/arg.cpp`` (``--n-cpu-moe N`` pushes ``blk\\.<i>\\.ffn_(up|down|
gate|gate_up)_(ch|)exps`` = CPU for the first N blocks; ``-ot <tensor regex>=<buffer type>``, first
matching pattern wins); SGLang's kt-kernel server arguments (``--kt-num-gpu-experts`` per layer,
``--kt-expert-placement-strategy frequency``). llama.cpp numbers blocks from the first layer, dense
ones included, so MoE layer l is ``blk.(l + dense layers)``. Sources: docs/sources.md.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from sim.machine.memory_plan import GIB
from sim.paths import CONF_DIR
from sim.plan.enumerate import Candidate
from sim.plan.evaluate import vram_used
from traces.atomic import save_png
from traces.io import atomic_write_bytes

REPO = CONF_DIR.parent
KT_METHOD = {"int4": "AMXINT4", "int8": "AMXINT8", "bf16": "BF16", "f16": "BF16", "fp8": "FP8", "mxfp4": "MXFP4"}


def ot_pattern(cpu_blocks) -> str:
    """The ``-ot`` argument keeping the routed experts of ``cpu_blocks`` on the CPU."""
    from sim.plan.flags import ot_arg

    return f'-ot "{ot_arg(cpu_blocks)}"'


def command(c: Candidate, n_layers: int, n_dense: int, context: int, quant: str, sim_args: str) -> str:
    """The command line that runs placement ``c``."""
    llama = "llama-server -m MODEL.gguf -ngl 99"
    sd = f" -md DRAFT.gguf -ngld 99 --draft-max {c.gamma}" if c.engine == "llama_cpp_sd" else ""
    if c.knob == "n_cpu_moe":
        n = c.value + n_dense if c.value else 0
        return f"{llama} --n-cpu-moe {n}{sd} -c {context}"
    if c.knob == "ngl":
        return f"llama-server -m MODEL.gguf -ngl {c.value}{sd} -c {context}"
    if c.knob == "ot":
        cpu = [l + n_dense for l in range(n_layers) if l not in c.gpu_layers]
        return f"{llama} {ot_pattern(cpu)}{sd} -c {context}"
    if c.knob == "kt_num_gpu_experts":
        method = KT_METHOD.get(quant, "LLAMAFILE")
        return (f"python -m sglang.launch_server --model-path MODEL --kt-weight-path CPU_WEIGHTS --kt-method {method} "
                f"--kt-num-gpu-experts {c.value} --kt-expert-placement-strategy frequency "
                f"--init-expert-location ACTIVATION_PROFILE --context-length {context}")
    ratio = c.extra.get("cache_ratio", 0.0)
    return f"(simulator policy, no engine flag) python -m sim run policy={c.policy} {sim_args} cache_ratio={ratio:.4f}"


def describe(c: Candidate, n_layers: int) -> str:
    """A short name of the placement."""
    if c.knob == "n_cpu_moe":
        return f"{c.engine} --n-cpu-moe {c.value} ({n_layers - c.value}/{n_layers} layers' experts on GPU)"
    if c.knob == "ngl":
        return f"{c.engine} -ngl {c.value} ({n_layers - c.value}/{n_layers} layers whole on CPU)"
    if c.knob == "ot":
        return f"{c.engine} -ot: experts of {c.value} chosen layers on GPU"
    if c.knob == "kt_num_gpu_experts":
        return f"ktransformers --kt-num-gpu-experts {c.value} (per layer)"
    return f"{c.policy} ({c.value} expert slots, hit rate {c.extra.get('hit_rate', float('nan')):.0%})"


def vram_breakdown(p) -> list[tuple[str, float]]:
    """A memory plan's VRAM by part, bytes, in the order the printout and the CSV use."""
    return [("weights", p.non_expert), ("experts", p.n_slots * p.expert_bytes), ("KV", p.kv),
            ("reserved+workspace", p.workspace + p.reserved), ("draft", p.draft)]


def vram_parts(c: Candidate) -> str:
    """VRAM by part, GiB."""
    p = c.plan
    body = " + ".join(f"{name} {b / GIB:.2f}" for name, b in vram_breakdown(p) if b > 0)
    return f"{vram_used(p) / GIB:.2f} of {p.vram / GIB:.1f} GiB ({body})"


def runtime_error_row(path, runtime: str, n_points: int | None = None) -> tuple[str, str] | None:
    """(points, median % error) of ``runtime`` in the first "by runtime:" table of ``path``
    (``NAME  n  median%  within%`` rows, as validate prints them) whose row counts ``n_points``
    (any count when None: an older table of a smaller training set is never quoted), or None."""
    if not path.exists():
        return None
    for part in path.read_text().split("by runtime:")[1:]:
        table = part.split("\n\n", 1)[0]
        m = re.search(rf"^{re.escape(runtime)}\s+(\d+)\s+(\d+(?:\.\d+)?)%", table, flags=re.M)
        if m and (n_points is None or int(m.group(1)) == n_points):
            return m.group(1), m.group(2)
    return None


def write_csv(path: Path, cands: list[Candidate], inputs: dict) -> None:
    """Every evaluated placement, one row each, with every input that produced it."""
    buf = io.StringIO()
    cols = list(inputs) + ["engine", "policy", "knob", "value", "gpu_layers", "runtime", "gamma", "tps", "fits",
                           "vram_used_gib", "vram_gib", "weights_gib", "experts_gib", "kv_gib", "workspace_gib",
                           "draft_gib"]
    w = csv.writer(buf)
    w.writerow(cols)
    for c in cands:
        p = c.plan
        w.writerow(list(inputs.values()) + [c.engine, c.policy, c.knob, c.value, " ".join(map(str, c.gpu_layers)),
                   c.runtime, c.gamma, f"{c.tps:.6g}", c.fits, f"{vram_used(p) / GIB:.4f}", f"{p.vram / GIB:.4f}"]
                  + [f"{b / GIB:.4f}" for _, b in vram_breakdown(p)])
    data = buf.getvalue().encode()
    atomic_write_bytes(path, lambda f: f.write(data))


def figure(path: Path, cands: list[Candidate], title: str, measured: tuple | None = None) -> None:
    """tok/s against ``--n-cpu-moe N`` (and kTransformers' K) with the VRAM limit drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kt = [c for c in cands if c.knob == "kt_num_gpu_experts"]
    fig, axes = plt.subplots(1, 2 if kt else 1, figsize=(11 if kt else 6.5, 4.2), squeeze=False)
    ax = axes[0][0]
    for engine, color in (("llama_cpp", "C0"), ("llama_cpp_sd", "C1")):
        curve = [c for c in cands if c.engine == engine and c.knob == "n_cpu_moe"]
        if not curve:
            continue
        ok = [c for c in curve if c.fits]
        ax.plot([c.value for c in curve], [c.tps for c in curve], color=color, alpha=0.35, lw=1)
        ax.plot([c.value for c in ok], [c.tps for c in ok], "o", color=color, ms=4, label=f"{engine} (fits)")
        ngl = [c for c in cands if c.engine == engine and c.knob == "ngl"]
        if ngl:
            n_layers = max(c.value for c in ngl)
            ax.plot([n_layers - c.value for c in ngl if c.fits], [c.tps for c in ngl if c.fits], "x", color=color,
                    ms=4, label=f"{engine} -ngl L-N (fits)")
        if ok:
            limit = min(c.value for c in ok)
            ax.axvline(limit - 0.5, color=color, ls="--", lw=1)
            ax.text(limit - 0.5, 0.2, f"VRAM limit ({ok[0].plan.vram / GIB:.1f} GiB): N >= {limit}", rotation=90,
                    va="center", ha="right", fontsize=8, color=color, transform=ax.get_xaxis_transform())
    for i, c in enumerate(c for c in cands if c.engine == "dynamic"):
        ax.axhline(c.tps, color=f"C{i + 3}", ls=":", lw=1, label=f"{c.policy} ({c.value} slots)")
    if measured:
        ax.plot([measured[0]], [measured[1]], "k*", ms=10, label=f"measured N={measured[0]}: {measured[1]} tok/s")
    ax.set(xlabel="MoE layers on the CPU N (--n-cpu-moe N: experts only; -ngl L-N: whole layers)", ylabel="predicted tok/s (decode)", title=title)
    ax.legend(fontsize=7)
    if kt:
        ax2 = axes[0][1]
        ax2.plot([c.value for c in kt], [c.tps for c in kt], "o-", color="C2", ms=3)
        ax2.axvline(max(c.value for c in kt) + 0.5, color="C2", ls="--", lw=1)
        ax2.set(xlabel="--kt-num-gpu-experts K (per layer; dashed: VRAM limit)", ylabel="predicted tok/s",
                title="kTransformers, frequency placement")
    save_png(fig, path, dpi=110)
