"""Pure decision objects (no SimPy, no torch, no clock). The registry maps names to classes."""
from sim.policies.registry import make_policy, policy_names

__all__ = ["make_policy", "policy_names"]
