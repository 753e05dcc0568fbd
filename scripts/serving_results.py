"""The numbers and figure of docs/results.md "Prefill and time to first token" and "Concurrent requests".

    python scripts/serving_results.py [--out docs/figures] [--quick]

TTFT against prompt length (Qwen3-30B-A3B Q4_K_M, 17% of experts in VRAM as in the paper, llama.cpp's
placement) under llama.cpp's >= 32 rule, the cost-optimal rule and CPU-only prefill, on the paper's
machine and an RTX 3090 + DDR4 desktop; the crossover micro-batch on both; aggregate and
per-request tok/s for B = 1, 2, 4, 8 concurrent requests on the paper's machine. Prints markdown.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from tqdm import tqdm
from sim.run.spec import RunSpec

MACHINES = ("rtx4090_pcie4", "rtx3090_ddr4")
PROMPTS = (1024, 2048, 4096, 8192, 16384, 32768)
RULES = ("llamacpp", "optimal", "cpu")
BATCHES = (1, 2, 4, 8)
BATCH_POLICIES = ("llamacpp", "hybrimoe", "moespac")


def ttft_rows(prompts, machines) -> list[dict]:
    from sim.run.runner import run_one

    out = []
    for hw in machines:
        for p in tqdm(prompts, desc=f"prefill {hw}"):
            for rule in RULES:
                r = run_one(RunSpec.of(policy="llamacpp", hardware=hw, quant="q4_k_m", cache_ratio=0.17, prompt_tokens=p,
                            context=max(4096, p + 64), gen_tokens=64, prefill=True, prefill_rule=rule)).row
                out.append({"hardware": hw, "prompt": p, "rule": rule, **{k: r[k] for k in (
                    "ttft_s", "prefill_tok_s", "e2e_tok_s", "tps", "prefill_copy_share", "prefill_pcie_gb")}})
    return out


def crossovers(machines, copy: str = "pinned") -> dict:
    """Per machine, the crossover table with llama.cpp's runtime copying from ``copy`` host buffers."""
    from sim.machine import specs as config
    from sim.machine.specs import load_preset
    from sim.prefill.crossover import crossover_table

    m = config.model("qwen3_30b_a3b", "q4_k_m", None)
    runtime = {**load_preset("runtime", "llama_cpp"), "copy": copy}
    out = {}
    for hw in machines:
        spec = config.hardware(hw, runtime=runtime, default_runtime="llama_cpp")
        out[hw] = crossover_table(spec, m, "gsm8k", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048], 4096, 4, 0)
    return out


def batch_rows(batches, gen_tokens: int) -> list[dict]:
    from sim.run.runner import run_one

    out = []
    for pol in tqdm(BATCH_POLICIES, desc="batch"):
        for b in batches:
            r = run_one(RunSpec.of(policy=pol, batch=b, gen_tokens=gen_tokens, cache_ratio=0.17)).row
            out.append({"policy": pol, "batch": b, **{k: r[k] for k in (
                "tps", "tps_per_request", "tps_request_min", "hit_rate", "cpu_expert_share", "mean_accepted")}})
    return out


def batch_prefill_rows(batches, gen_tokens: int, prompt: int = 4096) -> list[dict]:
    """B concurrent requests with ``prompt``-token prompts prefilled one after another."""
    from sim.run.runner import run_one

    out = []
    for pol in tqdm(BATCH_POLICIES, desc="batch+prefill"):
        for b in batches:
            r = run_one(RunSpec.of(policy=pol, batch=b, gen_tokens=gen_tokens, cache_ratio=0.17, prefill=True,
                        prompt_tokens=prompt, context=prompt + gen_tokens)).row
            out.append({"policy": pol, "batch": b, **{k: r[k] for k in (
                "ttft_s", "ttft_max_s", "prefill_tok_s", "tps", "e2e_tok_s", "prefill_rule")}})
    return out


def figure(path: Path, ttft: list[dict], cross: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from traces.atomic import save_png

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, hw in enumerate(cross):
        for rule, ls in zip(RULES, ("-", "--", ":")):
            pts = [r for r in ttft if r["hardware"] == hw and r["rule"] == rule]
            a.plot([r["prompt"] for r in pts], [r["ttft_s"] for r in pts], ls, marker="o", ms=3, color=f"C{i}",
                   label=f"{hw}, {rule}")
        rows, c = cross[hw]
        b.plot([r.ubatch for r in rows], [r.copy_ms for r in rows], "o-", color=f"C{i}", label=f"{hw}: copy + GPU")
        b.plot([r.ubatch for r in rows], [r.cpu_ms for r in rows], "s:", color=f"C{i}", label=f"{hw}: CPU")
        if c is not None:
            b.axvline(c, color=f"C{i}", lw=1, ls="--")
            b.text(c, 0.97 - 0.06 * i, f" {c}", color=f"C{i}", transform=b.get_xaxis_transform(), va="top", fontsize=8)
    a.set(xscale="log", yscale="log", xlabel="prompt tokens", ylabel="time to first token (s)",
          title="Qwen3-30B-A3B Q4_K_M, llama.cpp placement, 17% in VRAM")
    b.set(xscale="log", yscale="log", xlabel="micro-batch (tokens)", ylabel="experts' time per MoE layer (ms)",
          title="copy vs CPU, every expert in host memory")
    for ax in (a, b):
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
    save_png(fig, path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/figures")
    ap.add_argument("--quick", action="store_true", help="two prompt lengths, B = 1, 2, 64 tokens")
    args = ap.parse_args()
    prompts = PROMPTS[:2] if args.quick else PROMPTS
    ttft = ttft_rows(prompts, MACHINES)
    cross = crossovers(MACHINES)
    pageable = crossovers(MACHINES, "pageable")
    batch = batch_rows(BATCHES[:2] if args.quick else BATCHES, 64 if args.quick else 256)
    batch_pre = batch_prefill_rows(BATCHES[:2] if args.quick else BATCHES, 64 if args.quick else 256)
    figure(Path(args.out) / "prefill_ttft.png", ttft, cross)
    print("| machine | prompt | TTFT llama.cpp rule (s) | TTFT optimal (s) | TTFT CPU only (s) | prefill tok/s (llama.cpp rule) | e2e tok/s (llama.cpp rule, 64 generated) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for hw in MACHINES:
        for p in prompts:
            r = {x["rule"]: x for x in ttft if x["hardware"] == hw and x["prompt"] == p}
            print(f"| {hw} | {p} | {r['llamacpp']['ttft_s']:.2f} | {r['optimal']['ttft_s']:.2f} | {r['cpu']['ttft_s']:.2f} "
                  f"| {r['llamacpp']['prefill_tok_s']:.0f} | {r['llamacpp']['e2e_tok_s']:.2f} |")
    print()
    print("| machine | " + " | ".join(f"ub {r.ubatch}" for r in next(iter(cross.values()))[0]) + " | crossover |")
    print("|---|" + "---:|" * (len(next(iter(cross.values()))[0]) + 1))
    for name, table in (("pinned", cross), ("pageable", pageable)):
        for hw, (rows, c) in table.items():
            print(f"| {hw}, {name} copies: copy/CPU ms | " + " | ".join(f"{r.copy_ms:.1f}/{r.cpu_ms:.1f}" for r in rows)
                  + f" | {c} |")
    print()
    print("| policy | B | aggregate tok/s | per-request tok/s (mean) | slowest request | hit rate | CPU share | mean accepted |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in batch:
        print(f"| {r['policy']} | {r['batch']} | {r['tps']:.2f} | {r['tps_per_request']:.2f} | {r['tps_request_min']:.2f} "
              f"| {r['hit_rate']:.3f} | {r['cpu_expert_share']:.3f} | {r['mean_accepted']:.2f} |")
    print()
    print("| policy | B | prefill rule | mean TTFT (s) | last TTFT (s) | prefill tok/s | decode tok/s (aggregate) | e2e tok/s (aggregate) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in batch_pre:
        print(f"| {r['policy']} | {r['batch']} | {r['prefill_rule']} | {r['ttft_s']:.2f} | {r['ttft_max_s']:.2f} "
              f"| {r['prefill_tok_s']:.0f} | {r['tps']:.2f} | {r['e2e_tok_s']:.2f} |")


if __name__ == "__main__":
    main()

