"""MoE-SpAc (arXiv 2603.09983) as a pure policy: utility estimator, workload balancer, and the
prefetch queue + ordered eviction tree of its asynchronous engine."""
from sim.policies.moespac.policy import MoESpAc

__all__ = ["MoESpAc"]
