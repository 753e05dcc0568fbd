"""Fair-comparison rules between speculative and autoregressive runs.

* Acceptance of a run: the command line's, else the draft preset's per-workload value (drafters
  differ: an n-gram lookup accepts far less on chat than a 4B model), else the workload preset's.
* Acceptance model: positional decay from the draft preset (``acceptance_decay``), burstiness and
  the ``--draft-p-min`` early stop from ``acceptance_model`` (:mod:`traces.acceptance`).
* Equal VRAM: an autoregressive policy holds no draft, so with ``equal_vram`` the draft's weights
  and KV cache (at the run's context) become expert slots, up to what the VRAM holds. The row says
  which comparison it is (``equal_vram``).
"""
from __future__ import annotations

from sim.machine.specs import DraftSpec, HardwareSpec, ModelSpec
from sim.machine.memory_plan import plan_memory
from traces.acceptance import AcceptanceModel


def run_acceptance(workload: str, draft: DraftSpec, given: float | None) -> float:
    """The first-position acceptance of a run (see the module docstring for the order)."""
    if given is not None:
        return float(given)
    if draft.acceptance and workload in draft.acceptance:
        return float(draft.acceptance[workload])
    from traces.synth import workload_preset

    return float(workload_preset(workload)["acceptance"])


def acceptance_model(alpha: float, draft: DraftSpec, params: dict | None) -> AcceptanceModel | None:
    """The run's :class:`AcceptanceModel`, or None for the plain i.i.d. model (no decay, no options)."""
    params = dict(params or {})
    params.setdefault("decay", draft.acceptance_decay)
    if not any(params.get(k, 0.0) for k in ("spread", "burst", "p_min")) and params["decay"] == 1.0:
        return None
    return AcceptanceModel(alpha=alpha, **params)


def equal_vram_slots(hw: HardwareSpec, m: ModelSpec, draft: DraftSpec, cache_ratio: float, context: int) -> int:
    """Slots of an AR run that also gets the VRAM the draft would use (weights + KV at ``context``)."""
    base = plan_memory(hw, m, draft, cache_ratio, context).n_slots
    free = plan_memory(hw, m, DraftSpec("none", 0.0, 0.0, 0, 0), cache_ratio, context)
    extra = int((draft.weight_bytes + context * draft.kv_bytes_per_token) // m.expert_bytes)
    return min(base + extra, free.max_slots)
