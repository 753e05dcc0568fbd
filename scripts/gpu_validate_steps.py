"""The steps of ``scripts/gpu_validate.py`` (each writes its files under OUT and returns a one-line
note; ``z`` is the driver's :class:`Sizes`). See the driver's docstring for what each measures."""
from __future__ import annotations

import csv
import os
import time
from pathlib import Path


def write_csv(path: Path, header: list, rows: list) -> None:
    """A small CSV, atomically."""
    import io

    from traces.io import atomic_write_bytes
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    atomic_write_bytes(path, lambda f: f.write(buf.getvalue().encode()))


def step_machine(out: Path, z, device) -> str:
    """GPU, versions, CPU."""
    import platform

    import torch
    import transformers
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "none (CPU dry run)"
    text = (f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\ngpu: {gpu}\ntorch {torch.__version__} cuda {torch.version.cuda} "
            f"transformers {transformers.__version__}\ncpu: {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} logical CPUs, torch threads {torch.get_num_threads()}\n")
    (out / "machine.txt").write_text(text)
    return gpu


def step_links(out: Path, z, device) -> str:
    """Host->device GB/s by size, pinned and pageable."""
    from real.offload import measure as M
    rows = []
    for size in z.link_sizes:
        pinned, pageable = (M.h2d(size, device, p, z.reps) for p in (True, False))
        rows.append([size, f"{size / pinned / 1e9:.3f}", f"{size / pageable / 1e9:.3f}"])
    write_csv(out / "links.csv", ["bytes", "pinned_gbs", "pageable_gbs"], rows)
    return f"largest copy: pinned {rows[-1][1]} GB/s, pageable {rows[-1][2]} GB/s"


def step_experts(out: Path, z, device, dtype) -> str:
    """Per-expert microseconds on the device and the CPU by tokens routed, per model shape."""
    import torch
    from torch.nn import functional as F

    from real.offload import measure as M
    from real.offload.expert_math import expert_forward
    rows, count = [], 8
    for name, hidden, inter in z.expert_shapes:
        gen = torch.Generator().manual_seed(0)
        host = [(torch.randn(2 * inter, hidden, generator=gen).to(dtype) * 0.02,
                 torch.randn(hidden, inter, generator=gen).to(dtype) * 0.02) for _ in range(count)]
        dev = [(g.to(device), d.to(device)) for g, d in host]
        for n in z.expert_tokens:
            times = []
            for where, pairs in ((device, dev), (torch.device("cpu"), host)):
                x = torch.randn(n, hidden, dtype=dtype, device=where)
                w = torch.rand(n, dtype=dtype, device=where)
                state = {"i": 0}

                def one(pairs=pairs, x=x, w=w, state=state):
                    state["i"] = (state["i"] + 1) % count
                    expert_forward(x, *pairs[state["i"]], F.silu, w)
                times.append(1e6 * M.timed(one, where, z.reps, inner=count))
            rows.append([name, hidden, inter, n, f"{times[0]:.2f}", f"{times[1]:.2f}"])
    write_csv(out / "experts.csv", ["shape", "hidden", "moe_intermediate", "tokens", "gpu_us", "cpu_us"], rows)
    return "; ".join(f"{r[0]} n={r[3]}: gpu {r[4]} us, cpu {r[5]} us" for r in rows if r[3] == z.expert_tokens[0])


def common(z) -> list:
    """Model and device keys shared by the run commands."""
    return [*z.model, f"gamma={z.gamma}"] + ([f"device={z.device}"] if z.device else []) + \
        ([f"dtype={z.dtype}"] if z.dtype != "auto" else [])


def step_profile(out: Path, z) -> str:
    """``python -m real profile`` -> hardware.yaml."""
    from real.offload.options import ProfileOptions, parse
    from real.offload.profile_yaml import profile
    hw = profile(parse(ProfileOptions, [*common(z), *z.profile_args, f"out={out / 'hardware.yaml'}",
                                        "name=gpu_validate"]))
    return f"pcie_h2d_gbs {hw['pcie_h2d_gbs']}, gpu_tflops {hw['gpu_tflops']}"


def step_validate(out: Path, z, ratio: float, sync: bool = False, shared: dict | None = None) -> list:
    """``python -m real validate`` of the policies at one cache ratio (one prompt set, timed); the
    models are prepared once and kept in ``shared`` for the next calls."""
    from dataclasses import replace

    from real.offload.options import ValidateOptions, parse
    from real.offload.run import prepare
    from real.offload.validate import validate
    name = "sync" if sync else f"validate_r{ratio}"
    args = [*common(z), f"hardware={out / 'hardware.yaml'}", f"policies={z.policies}", f"cache_ratio={ratio}",
            f"max_new_tokens={z.tokens}", f"prompts=tiny:{z.prompts}", f"out={out / name}", "quiet=true",
            f"warmup={0 if sync else z.warmup}"] + (["sync=true"] if sync else [])
    opts = parse(ValidateOptions, args)
    shared = {} if shared is None else shared
    if "prepared" not in shared:
        shared["prepared"] = prepare(replace(opts, policy=opts.policies.split(",")[0], check=False))
    return validate(opts, shared["prepared"])


def tps_rows(ratio: float, results: list) -> list:
    """``[ratio, policy, real tok/s, sim tok/s, diff %]`` per policy."""
    rows = []
    for v in results:
        real, sim = v.real.row()["tps"], v.sim.row()["tps"]
        rows.append([ratio, v.policy, f"{real:.3f}", f"{sim:.3f}", f"{100 * (sim - real) / real:.1f}" if real else "nan"])
    return rows


def speedup_row(ratio: float, results: list, fast: str = "moespac", base: str = "llamacpp_sd") -> list | None:
    """``[ratio, real speedup, sim speedup, diff %]`` of ``fast`` over ``base`` (None without both)."""
    by = {v.policy: v for v in results}
    if fast not in by or base not in by:
        return None
    real = by[fast].real.row()["tps"] / max(by[base].real.row()["tps"], 1e-12)
    sim = by[fast].sim.row()["tps"] / max(by[base].sim.row()["tps"], 1e-12)
    return [ratio, f"{real:.3f}", f"{sim:.3f}", f"{100 * (sim - real) / real:.1f}"]


def step_sync(out: Path, z, shared: dict | None = None) -> str:
    """Synchronous mode at the first ratio: decision counts real vs simulated."""
    from real.offload.replay import count_differences
    results = step_validate(out, z, z.ratios[0], sync=True, shared=shared)
    rows = [[v.policy, "identical" if not count_differences(v.real, v.sim) else
             f"DIFFER {count_differences(v.real, v.sim)}"] for v in results]
    write_csv(out / "sync.csv", ["policy", "decision_counts"], rows)
    bad = [r[0] for r in rows if r[1] != "identical"]
    if bad:
        raise AssertionError(f"decision counts differ in sync mode for {', '.join(bad)} (sync.csv)")
    return f"identical for {len(rows)} policies"


def step_check(out: Path, z) -> str:
    """float32, two MoE layers: the offloaded tokens equal plain greedy decoding on this device."""
    from real.offload.options import RunOptions, parse
    from real.offload.run import run
    model = [a if not a.startswith("layers=") else "layers=2" for a in z.model]
    args = [*model, f"gamma={z.gamma}", "dtype=float32", "policy=moespac", f"cache_ratio={z.ratios[0]}",
            f"max_new_tokens={min(z.tokens, 24)}", "prompts=tiny:1", "check=true", "quiet=true",
            f"hardware={out / 'hardware.yaml'}"] + ([f"device={z.device}"] if z.device else [])
    report = run(parse(RunOptions, args))
    verdict = "identical to plain greedy" if not report.mismatches else f"MISMATCH {report.mismatches}"
    (out / "check.txt").write_text(verdict + "\n")
    if report.mismatches:
        raise AssertionError(verdict)
    return verdict
