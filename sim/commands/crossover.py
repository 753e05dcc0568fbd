"""``python -m sim crossover``: the prefill micro-batch size at which copying beats CPU compute, for a
model, quantization and machine; a table over micro-batch sizes, the crossover, a figure and a CSV.

Inputs are checked before anything runs: a bad value stops with one line naming the key, the value
and the allowed range, exit status 2.
"""
from __future__ import annotations

import csv
import io
import sys

from omegaconf import DictConfig, OmegaConf

from sim.machine.specs import ConfigError

MAX_UBATCH = 65536


def check(cfg: DictConfig) -> dict:
    """The validated options (raises :class:`ConfigError` naming key, value and range)."""
    from sim.run.user_input import Rule
    from sim.run.user_input import check as rule_check

    ub = cfg.ubatches
    values = [ub] if isinstance(ub, int) else (OmegaConf.to_container(ub) if ub is not None else None)
    shown = ",".join(map(str, values)) if isinstance(values, list) else repr(ub)
    if not isinstance(values, list) or not values or any(
            isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_UBATCH for v in values):
        raise ConfigError(f"ubatches={shown}: must be a list of integers in 1..{MAX_UBATCH}")
    return {"ubatches": sorted(set(values)), "context": rule_check("context", cfg.context, Rule("int", 1, 1 << 20)),
            "samples": rule_check("samples", cfg.samples, Rule("int", 1, 64)),
            "seed": rule_check("seed", cfg.seed, Rule("int", 0))}


def crossover_command(cfg: DictConfig):
    """The Hydra task: price the sizes, print the table and the crossover, write the CSV and figure."""
    try:
        return _crossover(cfg)
    except (ConfigError, KeyError, ValueError) as exc:
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        sys.exit(2)


def _crossover(cfg: DictConfig):
    from sim.machine import specs as config
    from sim.commands.common import choice, output_dir, specs_of
    from sim.prefill.crossover import crossover_table
    from sim.prefill.decision import LLAMACPP_MIN_BATCH

    opts = check(cfg)
    specs = specs_of(cfg)
    hw = config.hardware(specs["hardware"], runtime=specs["runtime"], default_runtime="llama_cpp")
    m = config.model(specs["model"], cfg.quant, cfg.quant_dense)
    workload = choice("workload") or "gsm8k"
    sizes, samples = opts["ubatches"], opts["samples"]
    rows, cross = crossover_table(hw, m, workload, sizes, opts["context"], samples, opts["seed"])
    out = output_dir(cfg)
    title = f"{m.name} {m.expert_quant} on {hw.name} ({hw.runtime}), context {opts['context']}"
    lines = [f"prefill crossover: {title}; every routed expert in host memory, {workload} prompt routing (synthetic)",
             f"{'ubatch':>7} {'host experts':>12} {'copy ms':>8} {'CPU ms':>8}  {'winner':<6} "
             f"{'tok/s copy':>10} {'tok/s CPU':>10}   (per MoE layer)"]
    for r in rows:
        lines.append(f"{r.ubatch:>7} {r.touched:>12.1f} {r.copy_ms:>8.3f} {r.cpu_ms:>8.3f}  {r.winner:<6} "
                     f"{r.copy_tok_s:>10.1f} {r.cpu_tok_s:>10.1f}")
    if cross is None:
        lines.append(f"crossover: copying never beats the CPU up to {max(sizes)} tokens")
    else:
        lines.append(f"crossover: copy the touched experts from {cross} tokens per micro-batch "
                     f"(llama.cpp copies from {LLAMACPP_MIN_BATCH}; ik_llama.cpp from "
                     f"{LLAMACPP_MIN_BATCH * m.n_experts // m.top_k})")
    print("\n".join(lines))
    _write_csv(out / "crossover.csv", rows, {"model": m.name, "quant": m.expert_quant, "hardware": hw.name,
                                             "runtime": hw.runtime, "workload": workload, "context": opts["context"],
                                             "samples": samples, "seed": opts["seed"], "crossover": cross})
    figure(out / "crossover.png", rows, cross, title)
    print(f"figure: {out / 'crossover.png'}; table: {out / 'crossover.csv'}")
    return rows, cross


def _write_csv(path, rows, inputs: dict) -> None:
    from traces.atomic import atomic_write_bytes

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(list(inputs) + ["ubatch", "host_experts", "copy_ms", "cpu_ms", "winner", "copy_tok_s", "cpu_tok_s"])
    for r in rows:
        w.writerow(list(inputs.values()) + [r.ubatch, f"{r.touched:.4g}", f"{r.copy_ms:.6g}", f"{r.cpu_ms:.6g}",
                                            r.winner, f"{r.copy_tok_s:.6g}", f"{r.cpu_tok_s:.6g}"])
    data = buf.getvalue().encode()
    atomic_write_bytes(path, lambda f: f.write(data))


def figure(path, rows, cross, title: str) -> None:
    """Per-layer expert time of both choices against the micro-batch size, the crossover marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from traces.atomic import save_png

    x = [r.ubatch for r in rows]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.plot(x, [r.copy_ms for r in rows], "o-", label="copy touched experts + GPU")
    ax.plot(x, [r.cpu_ms for r in rows], "s-", label="compute on the CPU")
    if cross is not None:
        ax.axvline(cross, color="k", ls="--", lw=1)
        ax.text(cross, 0.95, f" crossover {cross}", transform=ax.get_xaxis_transform(), va="top", fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel="micro-batch (tokens)", ylabel="experts' time per MoE layer (ms)",
           title=title)
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    save_png(fig, path, dpi=110)
