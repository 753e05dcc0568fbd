"""A kTransformers optimize-rule file for a whole-layer expert placement: the routed experts of the
chosen layers computed on the GPU, the others on the CPU.

Format: kvcache-ai/ktransformers ``ktransformers/optimize/optimize_rules/Qwen3-30B-A3B.yaml`` (the
``mlp.experts`` rule: ``KTransformersExperts`` with ``generate_device: "cpu"``, ``generate_op:
"KExpertsCPU"``, ``out_device: "cuda"``, ``recursive: False``) and ``doc/en/FAQ.md`` / the multi-GPU
tutorial (experts moved to the GPU: ``generate_device: "cuda:0"``, ``generate_op: "KExpertsMarlin"``;
rules apply in order and only the first matching rule takes effect; experts on the GPU turn CUDA
graphs off). The two rules here match disjoint layer sets, so their order does not matter; they
replace the ``mlp.experts`` rule of the model's own rule file.
"""
from __future__ import annotations

from pathlib import Path

from sim.plan.regex import expert_modules
from traces.io import atomic_write_bytes

EXPERTS = "ktransformers.operators.experts.KTransformersExperts"


def _rule(blocks, device: str, op: str) -> list[str]:
    name = expert_modules(blocks).replace("\\", "\\\\")      # a double-quoted YAML string: \\ is one backslash
    return ["- match:", f'    name: "{name}"', "  replace:", f"    class: {EXPERTS}", "    kwargs:",
            '      prefill_device: "cuda"', '      prefill_op: "KExpertsTorch"', f'      generate_device: "{device}"',
            f'      generate_op: "{op}"', '      out_device: "cuda"', "  recursive: False"]


def rules_text(gpu_blocks, cpu_blocks, title: str) -> str:
    """The YAML rules: experts of ``gpu_blocks`` on the GPU (Marlin), of ``cpu_blocks`` on the CPU."""
    lines = [f"# kTransformers optimize rules for {title}",
             "# written by python -m sim plan; format: kvcache-ai/ktransformers optimize_rules/Qwen3-30B-A3B.yaml",
             "# and doc/en/FAQ.md (experts on the GPU). Put these in place of the mlp.experts rule of your",
             "# model's rule file. GPU experts need Marlin-compatible weights and run without CUDA graphs."]
    if gpu_blocks:
        lines += _rule(gpu_blocks, "cuda", "KExpertsMarlin")
    if cpu_blocks:
        lines += _rule(cpu_blocks, "cpu", "KExpertsCPU")
    return "\n".join(lines) + "\n"


def write_rules(path: Path, gpu_blocks, cpu_blocks, title: str) -> Path:
    """Write :func:`rules_text` to ``path`` atomically; returns the path."""
    data = rules_text(gpu_blocks, cpu_blocks, title).encode()
    atomic_write_bytes(path, lambda f: f.write(data))
    return path
