"""What a user feels beyond decode speed, for :func:`sim.run.runner.run_one`: prefill before the decode
(:mod:`sim.prefill`) and B concurrent requests (:mod:`sim.run.batching`), and their result columns.

Defaults (``prefill=False``, ``batch=1``) leave a run exactly as before: the decode starts from each
policy's startup residency, ``ttft_s`` is NaN, and the identity gains no key (:func:`identity_skipped`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from sim.run.spec import ServingOptions


PREFILL_KNOBS = tuple(k for k in dataclasses.asdict(ServingOptions()) if k not in ("batch", "stagger", "ubatch"))


def identity_skipped(opts: ServingOptions) -> tuple[str, ...]:
    """The options left out of a run's identity whatever their value: the prefill's own knobs
    without ``prefill=true`` (not ``ubatch``: it sizes llama.cpp's compute buffer, so the memory plan,
    with or without a prefill) (:func:`sim.run.resolve.identity_of` adds the others where they differ
    from their defaults, so a default run keeps its ``run_id``)."""
    return () if opts.prefill else PREFILL_KNOBS


def check(opts: ServingOptions, trace_given: bool, policy: str = "", adaptive_gamma: bool = False,
          prompt_tokens: int = 1) -> None:
    """Refuse combinations not modelled (one line each), when a run is resolved: a sweep stops at a
    bad point before any run."""
    from sim.prefill.decision import RULES
    from sim.run.user_input import UserInputError

    if opts.prefill_rule not in RULES:
        raise UserInputError(f"prefill_rule={opts.prefill_rule}: must be one of {', '.join(RULES)}")
    if opts.batch > 1 and trace_given:
        raise UserInputError(f"batch={opts.batch}: concurrent requests need independent traces; "
                             "with trace=FILE use batch=1 (synthetic workloads draw one trace per request)")
    if opts.stagger and opts.batch == 1:
        raise UserInputError(f"stagger={opts.stagger}: arrivals need concurrent requests; give batch=2..64")
    if opts.batch > 1 and adaptive_gamma:
        raise UserInputError(f"batch={opts.batch}: policy {policy} chooses each step's draft length, "
                             "which batched decoding does not model yet; use batch=1")
    if opts.prefill and prompt_tokens <= 0:
        raise UserInputError(f"prompt_tokens={prompt_tokens}: prefill=true needs a prompt of at least 1 token")
    if opts.stagger and opts.prefill:
        raise UserInputError(f"stagger={opts.stagger} with prefill=true: a late request's prefill would "
                             "interleave with the others' decode, which is not modelled; use stagger=0")


def batch_schedule(key: tuple, g: int, gen_tokens: int, acc: float, seed: int, opts: ServingOptions):
    """The merged schedule of ``batch`` requests (request i: the synthetic trace and acceptance draws
    of seed ``seed + i``, joining at step ``i * stagger``; request 0 is the single-request run's)."""
    from sim.run.batching import merge_schedules
    from sim.run.workload import schedule, synthetic_trace

    scheds = []
    for i in range(opts.batch):
        k = (key[0], key[1], key[2], seed + i, key[4])
        scheds.append(schedule(synthetic_trace(*k), k, g, gen_tokens, acc, seed + i))
    return merge_schedules(scheds, opts.stagger), float(np.mean([s.mean_accepted for s in scheds]))


def widen(cost, sched):
    """The cost model with expert tables covering the batch's largest per-expert token count."""
    need = int(sched.counts.max(initial=0))
    return cost if need <= cost.n_max else dataclasses.replace(cost, n_max=need)


def run_prefill(spec, r, cost):
    """Simulate the prompt's prefill of run ``spec`` (resolved as ``r``, its policy already reset)
    from the policy's startup residency."""
    from sim.prefill.costs import PrefillCosts
    from sim.prefill.decision import make_rule
    from sim.prefill.phase import simulate_prefill
    from sim.prefill.routing import prompt_routing
    from sim.run.workload import routing_shape

    opts, m, policy, seed = spec.serving, r.model, r.policy, spec.run.seed
    prompt_tokens, shape = spec.workload.prompt_tokens, routing_shape(r.model)

    resident = np.zeros((m.n_layers, m.n_experts), dtype=bool)
    for layer, expert in policy.initial_residency():
        resident[int(layer), int(expert)] = True
    rule = make_rule(opts.prefill_rule, spec.policy.policy, m.n_experts, m.top_k, opts.prefill_threshold,
                     op_offload=spec.memory.op_offload)
    costs = PrefillCosts.build(cost, opts.ubatch)
    runs = [simulate_prefill(costs, rule, prompt_routing(m.name, r.workload, prompt_tokens, seed + i, shape), resident)
            for i in range(opts.batch)]
    return runs[0] if len(runs) == 1 else one_after_another(runs)


def one_after_another(runs: list):
    """B prompts prefilled one after another (each in its own micro-batches, all from the startup
    residency), the decode starting when the last is done: request i's first token comes at the end
    of prompt i (``request_ttft_s``); ``ttft_s`` is the whole prefill; the last copies of each layer win."""
    from sim.prefill.phase import PrefillResult

    out = PrefillResult(rule=runs[0].rule)
    for r in runs:
        out.ttft_s += r.ttft_s
        out.request_ttft_s.append(out.ttft_s)
        out.tokens += r.tokens
        out.ubatch_s += r.ubatch_s
        out.copied_layers += r.copied_layers
        out.last_copied.update(r.last_copied)
        for k in ("copies", "gpu_execs", "cpu_execs", "host_touched", "pcie_bytes", "pcie_busy_s", "gpu_busy_s",
                  "cpu_busy_s"):
            setattr(out, k, getattr(out, k) + getattr(r, k))
    return out


def columns(opts: ServingOptions, pre, batch, counters) -> dict:
    """The row's prefill and batching columns (NaN where not simulated)."""
    nan = float("nan")
    decode = counters.decode_s
    per_req = batch.request_tps(counters.step_s) if batch is not None else np.array([counters.tokens / decode])
    row = {"batch": opts.batch, "stagger": opts.stagger, "tps_per_request": float(per_req.mean()), "tps_request_min": float(per_req.min()),
           "ubatch": opts.ubatch if pre is not None else 0, "prefill_rule": pre.rule if pre is not None else "",
           "prefill_tok_s": pre.tok_s if pre is not None else nan,
           "e2e_tok_s": counters.tokens / (pre.ttft_s + decode) if pre is not None else nan,
           "ttft_max_s": nan,
           "prefill_copy_share": pre.copy_share if pre is not None else nan,
           "prefill_pcie_gb": pre.pcie_bytes / 1e9 if pre is not None else nan}
    if pre is not None:
        waits = pre.request_ttft_s or [pre.ttft_s]
        row.update(ttft_s=float(np.mean(waits)), ttft_max_s=float(max(waits)))
    return row

