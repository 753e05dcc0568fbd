"""A true upper bound on decode speed: an LP relaxation over transfers, slots and the CPU/GPU split."""
from sim.bound.lp import Bound, decode_bound

__all__ = ["Bound", "decode_bound"]
