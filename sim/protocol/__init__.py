"""The clock-free protocol core shared by every executor (DESIGN.md section 3.3).

:class:`ProtocolCore` is the state machine around a policy: slots, reservations, applying a
placement, landing transfers, eviction and the request/hit/prefetch tallies. Executors only add
time: :mod:`sim.engine.decode` (SimPy), :mod:`real.offload` (threads and copy streams),
:mod:`tests.sim.fast_eval` (a recurrence) and the test driver (instant transfers).
"""
from sim.protocol.context import build_context, policy_cost_model, routing_counts, table_context
from sim.protocol.core import ProtocolCore
from sim.protocol.plan import DEMAND, PREFETCH, STREAM_COPY, Copy, LayerPlan, SlotObserver, Wait, layer_end_delay

__all__ = ["Copy", "DEMAND", "LayerPlan", "PREFETCH", "ProtocolCore", "STREAM_COPY", "SlotObserver", "Wait",
           "build_context", "layer_end_delay", "policy_cost_model", "routing_counts",
           "table_context"]
