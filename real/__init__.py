"""Live PyTorch execution: speculative decoding, router recording, offloaded experts.

``python -m real run|profile|validate``: :mod:`real.offload` runs the simulator's policy objects on
a real model (expert slots on the GPU, a copy engine, CPU workers), profiles the machine for the
cost model, and compares measured against simulated runs. :mod:`real.speculative` (the
draft-then-verify loop), :mod:`real.router_hooks` (recording), :mod:`real.model_loading` and
:mod:`real.tiny_models` serve both it and trace capture.

Importing this package is cheap: torch and transformers are imported only by its submodules, so
the simulator and the trace tools never pay for them.
"""
