"""Bench files written from simulated runs of a machine with known rates, in every format
:mod:`sim.fidelity.bench_input` reads: the round-trip check of the machine calibration and its
benchmark (``benchmarks/bench_calibrate_machine.py``) calibrate on them and compare the fitted
rates with the hidden ones.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

FORMATS = ("json", "jsonl", "csv", "md", "timing")
MD_COLUMNS = (("model", "model_type"), ("size", "model_size"), ("params", "model_n_params"), ("backend", "backends"),
              ("ngl", "n_gpu_layers"), ("n_cpu_moe", "n_cpu_moe"), ("threads", "n_threads"),
              ("ot", "tensor_buft_overrides"))


def bench_row(model: str, model_type: str, machine: dict, test: dict, threads: int) -> dict:
    """A llama-bench result object (``avg_ts`` still 0) for one test setting of ``model``."""
    from sim.machine import specs as config

    m = config.model(model)
    row = {"build_commit": "synthetic", "build_number": 0, "cpu_info": machine["cpu"], "gpu_info": machine["gpu"],
           "backends": "CUDA", "model_filename": f"{model}.gguf", "model_type": model_type,
           "model_size": int(m.total_params * 0.6), "model_n_params": int(m.total_params), "n_batch": 2048,
           "n_ubatch": 512, "n_threads": threads, "type_k": "f16", "type_v": "f16", "n_gpu_layers": 99,
           "n_cpu_moe": 0, "tensor_buft_overrides": "none", "flash_attn": 0, "n_prompt": 0, "n_gen": 0,
           "n_depth": 0, "avg_ts": 0.0, "stddev_ts": 0.0}
    row.update(test)
    return row


def measured(rows: list[dict], model: str, base: dict, values: dict, gen_cap: int) -> list[dict]:
    """The rows with ``avg_ts`` simulated on the machine ``base`` with the hidden ``values``."""
    from sim.machine import specs as config
    from sim.fidelity.bench_rows import quant_of, to_run
    from sim.fidelity.machine_fit import simulate

    n_layers = config.model(model).n_layers
    out = []
    for i, r in enumerate(rows, 1):
        run = to_run({**r, "_row": i, "avg_ts": 1.0}, model, quant_of(r["model_type"]), n_layers, "synthetic", gen_cap)
        out.append({**r, "avg_ts": round(simulate(run, base, values), 4)})
    return out


def render(rows: list[dict], fmt: str) -> str:
    """The rows as llama-bench ``-o json|jsonl|csv|md`` or llama-cli timing lines (``timing``)."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "jsonl":
        return "\n".join(json.dumps(r) for r in rows) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows)
        return buf.getvalue()
    if fmt == "md":
        return _markdown(rows)
    return _timing(rows)


def _markdown(rows: list[dict]) -> str:
    head = [c for c, _ in MD_COLUMNS] + ["test", "t/s"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---:" for _ in head) + " |"]
    for r in rows:
        test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        cells = [str(r[f]) for _, f in MD_COLUMNS[:1]] + [f"{r['model_size'] / 2 ** 30:.2f} GiB",
                                                          f"{r['model_n_params'] / 1e9:.2f} B"]
        cells += [str(r[f]) for _, f in MD_COLUMNS[3:]] + [test, f"{r['avg_ts']:.2f} ± 0.00"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _timing(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        ot = "" if r["tensor_buft_overrides"] == "none" else f" -ot '{r['tensor_buft_overrides']}'"
        lines.append(f"$ llama-cli -m {r['model_filename']} -ngl {r['n_gpu_layers']} --n-cpu-moe {r['n_cpu_moe']} "
                     f"-t {r['n_threads']}{ot}")
        n, rate = (r["n_prompt"], r["avg_ts"]) if r["n_prompt"] else (r["n_gen"], r["avg_ts"])
        what = "prompt eval time" if r["n_prompt"] else "       eval time"
        lines.append(f"llama_perf_context_print: {what} = {1000 * n / rate:10.2f} ms / {n:5d} "
                     f"{'tokens' if r['n_prompt'] else 'runs'}   ({1000 / rate:8.2f} ms per token, {rate:8.2f} "
                     "tokens per second)")
    return "\n".join(lines) + "\n"


def write_bench(rows: list[dict], path: str | Path, fmt: str) -> Path:
    """Write the rows to ``path`` in ``fmt`` (one of :data:`FORMATS`)."""
    path = Path(path)
    path.write_text(render(rows, fmt))
    return path
