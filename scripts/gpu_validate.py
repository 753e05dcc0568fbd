"""The measurements of ``scripts/gpu_validate.sh``, in one process (imports and CUDA start once).

``python scripts/gpu_validate.py OUT`` runs, in order of value, each step under a time budget
(``BUDGET_S``, default 420 s: a step that would start after it is skipped and says so):

1. ``machine.txt``: GPU, driver, torch/transformers, CPU.
2. ``links.csv``: host->device GB/s by copy size, pinned and pageable.
3. ``experts.csv``: one routed expert's time on the device and on the host CPU (as the CPU tier
   runs it) by tokens routed, at the expert shapes of Qwen3-30B-A3B (hidden 2048, moe_intermediate
   768) and DeepSeek-V2-Lite (hidden 2048, moe_intermediate 1408); shapes from the models'
   config.json, as in ``conf/model/qwen3_30b_a3b.yaml`` and ``conf/model/deepseek_v2_lite.yaml``.
4. ``hardware.yaml``: ``python -m real profile`` of this machine (the simulator's tables).
5. ``validate_r<ratio>/``: ``python -m real validate`` of the policies (moespac, llamacpp_sd,
   adaspec, hybrimoe) on a random-weight model of Qwen3-30B-A3B's shape (fewer layers), per cache
   ratio (0.17, 0.5), against the simulator with the measured tables; ``tps.csv`` (real vs
   simulated tok/s) and ``speedup.csv`` (moespac over llamacpp_sd, real vs simulated).
6. ``sync/``: the same in synchronous mode; the decision counts must be identical (``sync.csv``).
7. ``check.txt``: float32 run whose tokens must equal plain greedy decoding on this device.

``status.csv`` and ``summary.txt`` say what each step did. ``GPU_VALIDATE_DRY=1`` runs the same
steps on the CPU at tiny shapes (the test suite does, so the script cannot rot unnoticed).
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "scripts")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from gpu_validate_steps import (speedup_row, step_check, step_experts, step_links, step_machine,  # noqa: E402
                                step_profile, step_sync, step_validate, tps_rows, write_csv)

MIB = 1 << 20
EXPERT_SHAPES = (("qwen3_30b_a3b", 2048, 768), ("deepseek_v2_lite", 2048, 1408))


@dataclass
class Sizes:
    """What the steps run at (GPU sizes by default; :meth:`dry` for the CPU dry run)."""

    device: str = ""                      # "" = cuda when present
    dtype: str = "auto"
    model: list = field(default_factory=lambda: ["synthetic=qwen3_30b_a3b", "layers=4", "draft_layers=28"])
    tokens: int = 32
    prompts: int = 1
    gamma: int = 8
    ratios: tuple = (0.17, 0.5)
    policies: str = "moespac,llamacpp_sd,adaspec,hybrimoe"
    link_sizes: tuple = tuple(s * MIB // 16 for s in (1, 4, 16, 64, 256, 1024))   # 64 KiB .. 64 MiB
    expert_shapes: tuple = EXPERT_SHAPES
    expert_tokens: tuple = (1, 2, 4, 9, 16)
    reps: int = 10
    warmup: int = 8                       # tokens of the discarded warm-up decode per policy
    profile_args: list = field(default_factory=list)

    @classmethod
    def dry(cls) -> "Sizes":
        """Tiny shapes on the CPU: every step runs, in seconds."""
        return cls(device="cpu", dtype="float32", tokens=6, warmup=0, model=["synthetic=qwen3_30b_a3b", "layers=2",
                   "draft_layers=1", "hidden=64", "moe_intermediate=32", "vocab=512"],
                   link_sizes=(64 * 1024, MIB), expert_shapes=(("qwen3_30b_a3b", 64, 24), ("deepseek_v2_lite", 64, 44)),
                   expert_tokens=(1, 9), reps=2, profile_args=["fast=true", "max_tokens=4", "context=32"])


def plan(out: Path, z: Sizes, device, dtype) -> list:
    """``(name, thunk)`` of every step, most valuable first."""
    tps, speed, shared = [], [], {}   # shared["prepared"]: the validate model, built once

    def validate_at(ratio):
        def go():
            results = step_validate(out, z, ratio, shared=shared)
            tps.extend(tps_rows(ratio, results))
            row = speedup_row(ratio, results)
            speed.extend([row] if row else [])
            write_csv(out / "tps.csv", ["cache_ratio", "policy", "real_tps", "sim_tps", "diff_pct"], tps)
            write_csv(out / "speedup.csv", ["cache_ratio", "real_speedup", "sim_speedup", "diff_pct"], speed)
            return "; ".join(f"{r[1]} real {r[2]} sim {r[3]} tok/s" for r in tps if r[0] == ratio)
        return go
    return [("machine", lambda: step_machine(out, z, device)), ("links", lambda: step_links(out, z, device)),
            ("experts", lambda: step_experts(out, z, device, dtype)), ("profile", lambda: step_profile(out, z))] + \
        [(f"validate_r{r}", validate_at(r)) for r in z.ratios] + \
        [("sync", lambda: step_sync(out, z, shared)), ("check", lambda: release(shared) or step_check(out, z))]


def release(shared: dict) -> None:
    """Stop and drop the validate model (its memory goes back before the check builds another)."""
    prepared = shared.pop("prepared", None)
    if prepared is not None:
        prepared.close()


def main(argv: list[str]) -> int:
    """Run every step within the budget; exit status 1 if a step failed."""
    import torch

    from real.model_loading import resolve_device, resolve_dtype
    from real.model_loading import normalize_device
    out = Path(argv[0] if argv else os.environ.get("OUT", "out/gpu_validate"))
    out.mkdir(parents=True, exist_ok=True)
    z = Sizes.dry() if os.environ.get("GPU_VALIDATE_DRY") == "1" else Sizes()
    budget, t0 = float(os.environ.get("BUDGET_S", "420")), time.perf_counter()
    device = normalize_device(resolve_device(z.device))
    dtype = resolve_dtype(z.dtype if z.dtype != "auto" else ("float32" if device.type == "cpu" else "bfloat16"))
    status = []
    for name, thunk in plan(out, z, device, dtype):
        start = time.perf_counter()
        if start - t0 > budget:
            status.append([name, "skipped", 0.0, f"budget of {budget:.0f} s spent"])
        else:
            try:
                status.append([name, "ok", 0.0, thunk()])
            except Exception as exc:   # the next steps still run; the log has the traceback
                (out / f"{name}.error.txt").write_text(traceback.format_exc())
                status.append([name, "FAILED", 0.0, f"{type(exc).__name__}: {exc}"[:300]])
            if device.type == "cuda":
                torch.cuda.empty_cache()
        status[-1][2] = f"{time.perf_counter() - start:.1f}"
        print(f"== {name}: {status[-1][1]} ({status[-1][2]} s) {status[-1][3]}", flush=True)
        write_csv(out / "status.csv", ["step", "status", "seconds", "note"], status)   # a killed run keeps it
    summary = "\n".join(f"{s[0]:<16}{s[1]:<8}{s[2]:>7} s  {s[3]}" for s in status)
    (out / "summary.txt").write_text(summary + f"\ntotal {time.perf_counter() - t0:.1f} s\n")
    return 1 if any(s[1] == "FAILED" for s in status) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
