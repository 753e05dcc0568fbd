"""Speculative decoding whose target runs with offloaded experts, timed per step.

:class:`OffloadedDecoder` is :class:`real.speculative.SpeculativeDecoder` with the executor
attached at its phases: step start (``on_step_start``: the draft phase begins), the verify
forward (the only forward in which the policy decides; prefill and the final forward run
bypass), and step end (wall time, tokens). Any observer set on it (e.g. the router-recording
collector of :func:`real.router_hooks.capture_trace`) still sees every phase: the ``observer``
property fans out to the executor's observer first and then to the one set.
"""
from __future__ import annotations

import time

from real.speculative import DecodeObserver, SpeculativeDecoder, Step


class _Fanout(DecodeObserver):
    def __init__(self, *observers):
        self.observers = observers

    def on_prefill(self, prompt_len, first_token):
        for o in self.observers:
            o.on_prefill(prompt_len, first_token)

    def on_step_start(self, index):
        for o in self.observers:
            o.on_step_start(index)

    def on_verify_start(self, index, window):
        for o in self.observers:
            o.on_verify_start(index, window)

    def on_step(self, step):
        for o in self.observers:
            o.on_step(step)

    def on_final(self, token):
        for o in self.observers:
            o.on_final(token)


class _ExecutorObserver(DecodeObserver):
    """Turns decoder phases into executor protocol points and step timings."""

    def __init__(self, executor):
        self.ex = executor
        self.verify_next = False
        self.t_start = self.t_step = self.ttft_s = 0.0
        self.draft_s = 0.0

    def on_prefill(self, prompt_len, first_token):
        self.ttft_s = time.perf_counter() - self.t_start
        self.ex.prefilling = False
        self.ex.land_prefill()

    def on_step_start(self, index):
        self.t_step = time.perf_counter()
        self.ex.step_start(index)

    def on_verify_start(self, index, window):
        self.draft_s += time.perf_counter() - self.t_step
        self.verify_next = True

    def on_step(self, step: Step):
        self.ex.step_end(time.perf_counter() - self.t_step, len(step.tokens), step.n_verified, step.accepted)


class OffloadedDecoder(SpeculativeDecoder):
    """Greedy SD (``gamma`` drafts a step; 0 = autoregressive) of an offloaded target."""

    def __init__(self, target, draft, gamma: int, executor, eos_token_id=None,
                 observer: DecodeObserver | None = None, final_forward: bool = False):
        self.executor = executor
        self.timer = _ExecutorObserver(executor)
        super().__init__(target, draft, gamma, eos_token_id, observer, final_forward)

    @property
    def observer(self) -> DecodeObserver:
        """The executor's observer followed by the one set (e.g. a routing collector)."""
        return _Fanout(self.timer, self._user_observer)

    @observer.setter
    def observer(self, value: DecodeObserver) -> None:
        self._user_observer = value

    def generate(self, input_ids, max_new_tokens: int):
        """As :meth:`SpeculativeDecoder.generate`; the executor's counters hold the decode."""
        self.timer.t_start = time.perf_counter()
        self.executor.prefilling = True
        try:
            return super().generate(input_ids, max_new_tokens)
        finally:
            self.executor.prefilling = False

    def next_gamma(self, index: int) -> int:
        """The step's draft length: the policy's when it chooses one (``adaptive_gamma``), else gamma."""
        return self.executor.choose_gamma(index, self.gamma)

    def run_target(self, ids, last_only: bool = False):
        """The verify forward runs with the policy; the others (prefill, final) bypass it."""
        verify, self.timer.verify_next = self.timer.verify_next, False
        if not verify and self.executor.decoding:
            self.executor.pause()   # decoding is over: what is in flight lands, nothing new starts
        self.executor.active = verify
        try:
            return super().run_target(ids, last_only)
        finally:
            self.executor.active = False
