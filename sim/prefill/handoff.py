"""The cache a prefill leaves to the decode: its copies landed through the policy's own eviction.

A policy that keeps an expert cache (it overrides :meth:`sim.policies.base.Policy.victim`) starts
the decode from its startup residency plus what the prefill copied: per layer, in layer order, the
host experts of the last micro-batch that copied that layer, fewest tokens first (so the most used
land last), each reserved through :meth:`sim.protocol.ProtocolCore.reserve` (the policy names the
victim when no slot is free; a refused slot leaves the expert in host memory) and landed at once.
Static placements (llama.cpp, kTransformers, vLLM) keep their startup residency: their engines copy
prefill weights into a scratch buffer, not into the placement. The decode's tallies start after
the handoff (the landings are prefill work, counted in its own columns).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from sim.protocol.metrics import Counters
from sim.policies.base import Policy
from sim.protocol import Copy, ProtocolCore
from sim.protocol.plan import DEMAND


def keeps_cache(policy: Policy) -> bool:
    """True for a policy that manages an expert cache (it chooses victims)."""
    return policy.evicts()


def land_prefill_copies(core: ProtocolCore, last_copied: dict) -> int:
    """Land the prefill's last copies of every layer in ``core``'s cache; returns how many landed."""
    if not keeps_cache(core.policy):
        return 0
    landed = 0
    for layer in sorted(last_copied):
        experts, tokens = last_copied[layer]
        for e in np.asarray(experts)[np.argsort(tokens, kind="stable")].tolist():
            if core.cache.present(layer, e) or not core.reserve(layer, e, demand=True):
                continue
            core.landed(Copy(layer, (e,), DEMAND))
            landed += 1
    fresh = Counters()
    for f in dataclasses.fields(Counters):
        setattr(core.c, f.name, getattr(fresh, f.name))
    return landed
