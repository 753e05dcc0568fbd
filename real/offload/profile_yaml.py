"""``python -m real profile`` writes the hardware YAML: fitted roofline fields plus measured tables
(the measurements: :mod:`real.offload.profile`)."""
from __future__ import annotations

import platform

import torch

from real.offload import measure as M
from real.offload.profile import GIB, host_ram_gib, machine_names, measure_all, stamp


def _spec(meas: dict, opts, layer_kernels: int, hw_base: dict, mspec: dict, dspec: dict):
    """Fit ``gpu_kernel_us`` (k) and ``step_overhead_us`` (o), the roofline fields the tables do
    not cover, to the measured fixed (expert-free) times of one speculative step.

    The cost model charges a MoE layer ``roof_l + kernels * k``, a target forward's fixed part
    ``roof_s + o`` and a draft token ``roof_d + draft_layers * kernels_per_draft_layer * k +
    draft_overhead`` (the counts are the hardware spec's own fields; without an explicit
    ``draft_overhead_us`` the draft overhead is ``LEGACY_DRAFT_OVERHEAD_FRAC * o``). Least squares
    over the three measurements, each weighted by how often a step pays it (``L`` layers, one
    forward, ``gamma`` draft tokens), so the fitted step matches the measured one.
    """
    import numpy as np

    from sim.machine import specs as config
    from sim.machine.specs import LEGACY_DRAFT_OVERHEAD_FRAC
    from sim.machine.cost_model import CostModel
    n = opts.gamma + 1
    hw = dict(hw_base, gpu_kernel_us=1e-9, step_overhead_us=1e-9)
    cost = CostModel(config.hardware(hw), config.model(mspec), config.draft(dspec))
    per_layer = (meas["verify_s"] - meas["head_s"]) / meas["layers_total"]
    L, g = mspec["n_layers"], max(1, opts.gamma)
    rows = [[L * layer_kernels, 0.0], [0.0, 1.0]]
    rhs = [L * (per_layer - cost.layer_fixed_s(n, opts.context)), meas["head_s"] - cost.step_fixed_s(n)]
    if meas["draft_s"] is not None:
        share = LEGACY_DRAFT_OVERHEAD_FRAC if hw_base.get("draft_overhead_us") is None else 0.0
        rows.append([g * dspec["n_layers"] * cost.hw.kernels_per_draft_layer, g * share])
        rhs.append(g * (meas["draft_s"] - cost.draft_token_s(opts.context)))
    (k, o), *_ = np.linalg.lstsq(np.asarray(rows), np.asarray(rhs), rcond=None)
    hw["gpu_kernel_us"] = max(0.1, 1e6 * float(k))
    hw["step_overhead_us"] = max(1.0, 1e6 * float(o))
    return hw, per_layer


def build_yaml(meas: dict, opts) -> tuple[dict, str]:
    """``(hardware dict, YAML text with a comment header)`` from :func:`measure_all`'s output."""
    import transformers
    from omegaconf import OmegaConf

    from real.offload.context import draft_spec, model_spec
    from sim.machine import specs as config
    from sim.machine.cost_model import CostModel
    device, models = meas["device"], meas["models"]
    gpu, cpu = machine_names(device)
    lat_us, gbs = M.fit_link(meas["sizes"], meas["h2d_pinned_s"])
    name = opts.name or ("measured_" + (gpu.split(":")[0].replace(" ", "_").lower() if device.type == "cuda"
                                        else platform.node() or "cpu"))
    mspec = model_spec(models.target, meas["host"], models.target_name, models.n_shared)
    dspec = draft_spec(models.draft, models.draft_name or "none")
    vram = torch.cuda.get_device_properties(device).total_memory / GIB if device.type == "cuda" else host_ram_gib()
    cpu_tab = meas["cpu_expert_us"]
    base = {"name": name, "gpu": gpu, "vram_gib": round(vram, 2),
            "gpu_mem_bw_gbs": meas["gpu_bw_gbs"], "gpu_mem_eff": min(1.0, meas["gpu_gemv_gbs"] / meas["gpu_bw_gbs"]),
            "gpu_tflops": meas["gpu_tflops"], "gpu_flops_eff": 1.0, "gpu_kernel_us": 1.0,
            "pcie_h2d_gbs": gbs, "pcie_latency_us": lat_us, "cpu": cpu,
            "cpu_mem_bw_gbs": meas["cpu_bw_gbs"], "cpu_mem_eff": min(1.0, meas["cpu_gemv_gbs"] / meas["cpu_bw_gbs"]),
            "cpu_tflops": meas["cpu_tflops"], "cpu_flops_eff": 1.0, "cpu_threads": torch.get_num_threads(),
            "cpu_expert_us": max(0.1, 2 * cpu_tab[1] - cpu_tab[2]) if len(cpu_tab) > 2 else 1.0,
            "layer_sync_us": 1e6 * meas["sync_s"], "step_overhead_us": 1.0, "reserved_gib": 1.0}
    spec = config.hardware(base)
    kernels = spec.kernels_per_layer + (spec.kernels_per_shared_expert if models.n_shared else 0)
    hw, per_layer = _spec(meas, opts, kernels, base, mspec, dspec)
    draft_model = CostModel(config.hardware(hw), config.model(mspec), config.draft(dspec)).draft_token_s(opts.context)
    hw = {k: (round(float(v), 4) if isinstance(v, float) else v) for k, v in hw.items()}
    hw["tables"] = {
        "gpu_expert_us": [round(v, 3) for v in meas["gpu_expert_us"]],
        "cpu_expert_us": [round(v, 3) for v in cpu_tab],
        "transfer_us": round(1e6 * meas["transfer_s"], 3),
        "measured": {
            "date": stamp(), "machine": platform.node(), "gpu": gpu, "cpu": cpu, "device": str(device),
            "torch": torch.__version__, "transformers": transformers.__version__, "dtype": meas["dtype"],
            "model": mspec["name"], "draft": dspec["name"], "expert_bytes": meas["expert_bytes"],
            "fast": bool(opts.fast), "h2d_bytes": meas["sizes"],
            "h2d_pinned_gbs": [round(s / t / 1e9, 3) for s, t in zip(meas["sizes"], meas["h2d_pinned_s"])],
            "h2d_pageable_gbs": [round(s / t / 1e9, 3) for s, t in zip(meas["sizes"], meas["h2d_pageable_s"])],
            "verify_forward_us_without_experts": round(1e6 * meas["verify_s"], 2),
            "layer_us_without_experts": round(1e6 * per_layer, 2), "head_us": round(1e6 * meas["head_s"], 2),
            "draft_token_us": None if meas["draft_s"] is None else round(1e6 * meas["draft_s"], 2),
            "draft_token_us_cost_model": round(1e6 * draft_model, 2) if meas["draft_s"] is not None else None,
            "gpu_gemv_gbs": round(meas["gpu_gemv_gbs"], 3), "cpu_gemv_gbs": round(meas["cpu_gemv_gbs"], 3),
        },
    }
    hw = _plain(hw)
    config.hardware(hw)   # every field valid, or fail here naming it
    header = (f"# Measured by `python -m real profile` on {stamp()}, machine {platform.node()}, torch "
              f"{torch.__version__}, device {device}.\n# GPU: {gpu}\n# Expert shape of {mspec['name']}, "
              f"{meas['dtype']}; tables override the cost model's roofline; gpu_kernel_us and "
              "step_overhead_us are fitted to the measured expert-free step.\n")
    if device.type != "cuda":
        header += "# No CUDA device: every GPU field (and the 'transfers') was measured on the CPU.\n"
    return hw, header + OmegaConf.to_yaml(OmegaConf.create(hw))


def _plain(obj):
    """Builtin types only (YAML-safe): numpy scalars and str subclasses such as torch's version."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if isinstance(obj, str):
        return str(obj)
    return obj.item() if hasattr(obj, "item") else float(obj)


def profile(opts) -> dict:
    """Measure, write ``opts.out`` (atomically) and return the hardware dict."""
    from pathlib import Path

    from traces.atomic import check_writable
    from traces.io import atomic_write_bytes
    check_writable(opts.out, "out")   # before measuring
    hw, text = build_yaml(measure_all(opts), opts)
    atomic_write_bytes(Path(opts.out), lambda f: f.write(text.encode()))
    return hw
