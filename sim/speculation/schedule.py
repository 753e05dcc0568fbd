"""The decode steps of a speculative run whose acceptance is not the plain i.i.d. model.

:func:`sim.run.runner.run_one` asks here first; None means the plain, memoised schedule of
:func:`sim.run.workload.schedule` applies (autoregressive runs, i.i.d. acceptance, or a captured SD record
of the run's gamma, which always wins). Otherwise:

* a policy that chooses its draft length per step (``adaptive_gamma``) gets an
  :class:`traces.online.OnlineSchedule`, built step by step with the gamma the executor's core
  asks the policy for;
* a fixed gamma with a shaped acceptance (the draft preset's positional decay, or the run's
  ``acceptance_model``: burstiness, the ``--draft-p-min`` early stop) gets
  :func:`traces.online.model_schedule`.
"""
from __future__ import annotations

from sim.speculation.fair import acceptance_model as shaped_acceptance
from traces.acceptance import AcceptanceModel
from traces.online import OnlineSchedule, model_schedule


def speculative_schedule(trace, adaptive: bool, gamma: int, gen_tokens: int, acceptance: float, seed: int, draft,
                         model_params: dict | None):
    """The run's schedule when speculation needs its own (see the module docstring), else None;
    ``adaptive``: the policy chooses each step's gamma (``Policy.adaptive_gamma``)."""
    if gamma <= 0 or (trace.sd is not None and trace.sd.gamma == gamma):
        return None
    model = shaped_acceptance(acceptance, draft, model_params)
    if adaptive:
        return OnlineSchedule(trace, gen_tokens, model or AcceptanceModel(acceptance), seed, gamma)
    if model is not None:
        return model_schedule(trace, gamma, gen_tokens, model, seed)
    return None
