"""One offloaded target serving prompts one by one, each with a fresh policy, cache and counters.

:meth:`OffloadSession.run_prompt` decodes a prompt with speculative decoding (or autoregressively
for non-speculative policies) while the router hooks record the trace, and returns the real run's
result row, its counters and the trace (with its SD record and everything a simulated replay
needs in ``meta``). Policies that need the future (the oracle) or an offline profile first get a
pre-pass: the same decode with every expert computed from host weights and no policy, whose trace
gives the future verify counts and the per-expert popularity (on the CPU this pre-pass routes
exactly like the run itself, so the oracle knows the real future).
"""
from __future__ import annotations

import platform
import time

import numpy as np

from sim.run.spec import RunSpec
from real.offload.context import draft_spec, model_spec, policy_context
from real.offload.decoder import OffloadedDecoder
from real.router_hooks import RouterRecorder, capture_trace
from real.speculative import SpeculativeDecoder
from sim.policies import make_policy
from sim.protocol import routing_counts, table_context
from traces.schema import SCHEMA_VERSION, Trace
from traces.windows import build_schedule


class OffloadSession:
    """The offloaded ``models`` (see :mod:`real.offload.models`) with run options ``opts``."""

    def __init__(self, models, executor, opts, hardware: dict):
        self.m, self.ex, self.opts, self.hardware = models, executor, opts, hardware
        self.model_spec = model_spec(models.target, executor.host, models.target_name, models.n_shared)
        self.draft_spec = draft_spec(models.draft, models.draft_name)

    def _meta(self, policy_name: str, gamma: int, prompt_id: str, index: int, n_prompt: int,
              max_new: int) -> dict:
        import torch
        import transformers
        ms, dev = self.model_spec, self.m.device
        machine = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.machine()
        return {"schema_version": SCHEMA_VERSION, "source": "captured", "model": ms["name"],
                "workload": self.opts.prompts, "draft": self.draft_spec["name"] if gamma else None,
                "gamma": gamma, "precision": self.m.precision, "max_new_tokens": max_new,
                "device": str(dev), "hardware": machine, "torch": torch.__version__,
                "transformers": transformers.__version__, "engine": "real.offload (slot_offload experts)",
                "n_layers": ms["n_layers"], "n_experts": ms["n_experts"], "top_k": ms["top_k"],
                "n_shared_experts": ms["n_shared_experts"], "n_dense_layers": ms["n_dense_layers"],
                "prompt_id": prompt_id, "prompt_index": index, "prompt_tokens": n_prompt,
                "policy": policy_name, "cache_ratio": self.opts.cache_ratio, "sync": self.opts.sync,
                "ctx_gen_tokens": max_new - 1, "table_context": table_context(n_prompt, max_new - 1),
                "context": self.opts.context,
                "seed": self.opts.seed, "model_spec": ms, "draft_spec": self.draft_spec,
                "hardware_spec": self.hardware}

    def _prepass(self, ids: list, gamma: int, meta: dict) -> Trace:
        """Decode with every expert from host weights and no policy; returns its trace."""
        decoder = SpeculativeDecoder(self.m.target, self.m.draft if gamma else None, gamma, self._eos())
        with RouterRecorder(self.m.target, predict_next=False) as rec:
            trace, _ = capture_trace(rec, decoder, ids, meta["max_new_tokens"], dict(meta))
        return trace

    def _eos(self):
        return self.m.eos if self.opts.eos else None

    def warm_up(self, ids: list) -> None:
        """A short discarded decode (first-call costs: allocator, kernels, lazy imports)."""
        if self.opts.warmup > 0:
            self.run_prompt("warmup", ids, -1, max_new=min(self.opts.warmup, self.opts.max_new_tokens))

    def run_prompt(self, prompt_id: str, ids: list, index: int, max_new: int | None = None):
        """Decode one prompt; returns ``(row, counters, trace, tokens)``."""
        opts, wall = self.opts, time.perf_counter()
        max_new = max_new or opts.max_new_tokens
        policy = make_policy(opts.policy, **dict(opts.policy_args))
        gamma = policy.run_gamma(opts.gamma)
        meta = self._meta(opts.policy, gamma, prompt_id, index, len(ids), max_new)
        profile = future = None
        if policy.needs_future or policy.needs_profile:
            pre = self._prepass(ids, gamma, meta)
            profile = routing_counts(pre.experts, pre.n_layers, pre.n_experts)
            future = build_schedule(pre, gamma, pre.n_tokens - 1).counts
        spec = RunSpec.of(policy=opts.policy, policy_args=dict(opts.policy_args), hardware=self.hardware,
                          model=self.model_spec, draft=self.draft_spec, cache_ratio=opts.cache_ratio, gamma=gamma,
                          table_tokens=table_context(len(ids), max_new - 1), context=opts.context, seed=opts.seed)
        ctx = policy_context(policy, spec, profile, future)
        self.ex.begin(policy, ctx, sync=opts.sync)
        self.ex.prefill = None
        if opts.prefill:
            from real.offload.prefill import build
            self.ex.prefill = build(policy, opts, self.hardware, self.model_spec, self.draft_spec, len(ids))
        decoder = OffloadedDecoder(self.m.target, self.m.draft if gamma else None, gamma, self.ex, self._eos())
        # the trace records the next-layer prediction, so a simulated replay reads the same signal
        with RouterRecorder(self.m.target, predict_next=True) as rec:
            trace, tokens = capture_trace(rec, decoder, ids, max_new, meta)
        c = self.ex.finish()
        c.draft_s = decoder.timer.draft_s
        policy_s = float(np.sum(self.ex.policy_s))
        counts = {k: v for k, v in vars(c).items() if k != "layer_s"}
        trace.meta["real"] = {"counters": counts, "ttft_s": decoder.timer.ttft_s,
                              "draft_s": decoder.timer.draft_s, "policy_s": policy_s,
                              "failed_transfers": self.ex.failed}
        row = self._row(policy, ctx, gamma, c, trace, decoder, policy_s, time.perf_counter() - wall)
        return row, c, trace, tokens

    def _row(self, policy, ctx, gamma, c, trace, decoder, policy_s, wall) -> dict:
        from sim.machine.specs import hardware as hw_spec
        steps = max(1, c.steps)
        row = {"experiment": self.opts.experiment, "policy": self.opts.policy, "model": self.model_spec["name"],
               "draft": self.draft_spec["name"] if gamma else "none", "hardware": hw_spec(self.hardware).name,
               "workload": self.opts.prompts, "cache_ratio": float(self.opts.cache_ratio), "gamma": gamma,
               "gen_tokens": int(c.tokens), "seed": int(self.opts.seed), "ttft_s": decoder.timer.ttft_s,
               "mean_accepted": trace.meta["mean_accepted"] if gamma else 0.0, "n_slots": ctx.n_slots,
               "source": "real", "trace": "", "prompt_id": trace.meta["prompt_id"],
               "device": str(self.m.device), "sync": bool(self.opts.sync)}
        row.update(c.row())
        row.update(self.ex.policy.metrics())
        row.update(policy_ms_per_step=1e3 * policy_s / steps, policy_share=policy_s / max(c.decode_s, 1e-12),
                   failed_transfers=self.ex.failed, sim_wall_s=wall)
        from real.offload.prefill import columns
        row.update(columns(self.ex.prefill))
        return row
