"""A transparent wrapper that measures the time spent inside a policy's protocol hooks.

The executor calls the policy only through this wrapper, so the per-step policy overhead it
reports (``policy_ms_per_step``) is the host time the decisions cost, on every thread (hooks are
called under the executor's lock, one at a time). Attributes other than the hooks (``name``,
``speculative``, ``overlap``, ``metrics`` ...) are the wrapped policy's own.
"""
from __future__ import annotations

import time

HOOKS = ("reset", "initial_residency", "choose_gamma", "on_step_start", "on_layer_start", "place",
         "on_layer_end", "on_step_end", "next_transfer", "victim", "victims", "on_transfer_done",
         "on_transfers_done")


class TimedPolicy:
    """Delegates to ``policy``; ``seconds`` and ``calls`` accumulate over the hooks."""

    def __init__(self, policy):
        self.__dict__["inner"] = policy
        self.__dict__["seconds"] = 0.0
        self.__dict__["calls"] = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __setattr__(self, name, value):
        setattr(self.inner, name, value)

    def take(self) -> float:
        """Seconds accumulated since the last call (and reset)."""
        s = self.__dict__["seconds"]
        self.__dict__["seconds"] = 0.0
        return s


def _timed(name: str):
    def hook(self, *args):
        t0 = time.perf_counter()
        try:
            return getattr(self.inner, name)(*args)
        finally:
            self.__dict__["seconds"] += time.perf_counter() - t0
            self.__dict__["calls"] += 1
    hook.__name__ = name
    hook.__doc__ = f"The wrapped policy's ``{name}``, timed."
    return hook


for _name in HOOKS:
    setattr(TimedPolicy, _name, _timed(_name))
