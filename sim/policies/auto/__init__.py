"""``spac_auto`` (ours): one policy that picks, per machine and model, among existing strategies."""
from sim.policies.auto.params import SpacAutoParams
from sim.policies.auto.policy import SpacAuto

__all__ = ["SpacAuto", "SpacAutoParams"]
