"""Offloaded expert execution: the live executor that runs the simulator's policies for real.

The routed experts of every MoE layer live in host memory (:mod:`real.offload.host`); a fixed
pool of device slots (:mod:`real.offload.slots`) holds the ones the policy keeps resident; a copy
engine (:mod:`real.offload.copier`) moves experts host->device on its own thread (a CUDA copy
stream with events when CUDA is used); a CPU tier (:mod:`real.offload.cpu_tier`) computes cold
experts concurrently with the device's hot ones. :mod:`real.offload.executor` calls the policy at
the protocol points of :mod:`sim.policies.base` exactly where :mod:`sim.engine.decode` does, and
:mod:`real.offload.experts_fn` plugs it into transformers as the ``slot_offload`` experts
implementation. Everything here imports torch; the package itself is imported lazily by the CLI.
"""
