"""VRAM as each engine places it: llama.cpp (:mod:`sim.machine.vram.llamacpp`) and kTransformers
(:mod:`sim.machine.vram.ktransformers`), term by term, for :func:`sim.machine.memory_plan.plan_memory`.

Other runtimes keep the generic plan of :mod:`sim.machine.memory_plan` (weights at their formats, the
runtime's ``workspace_gib`` and ``reserved_gib``).
"""
from __future__ import annotations

from sim.machine.vram.options import MemoryOptions
from sim.machine.vram.terms import VramTerms

LLAMA_CPP_RUNTIMES = ("llama_cpp", "ik_llama")     # runtimes that place VRAM as llama.cpp does
ENGINE_RUNTIMES = LLAMA_CPP_RUNTIMES + ("ktransformers",)


def engine_terms(hw, model, draft, context: int, cpu_layers: int, opts: MemoryOptions | None = None,
                 n_slots: int | None = None):
    """The :class:`VramTerms` of ``hw.runtime``'s engine, or None for a runtime without a placement model."""
    opts = opts or MemoryOptions()
    if hw.runtime in LLAMA_CPP_RUNTIMES:
        from sim.machine.vram.llamacpp import llamacpp_terms
        return llamacpp_terms(hw, model, draft, context, cpu_layers, opts, n_slots)
    if hw.runtime == "ktransformers":
        from sim.machine.vram.ktransformers import ktransformers_terms
        return ktransformers_terms(hw, model, draft, context, opts)
    return None


__all__ = ["ENGINE_RUNTIMES", "LLAMA_CPP_RUNTIMES", "MemoryOptions", "VramTerms", "engine_terms"]
