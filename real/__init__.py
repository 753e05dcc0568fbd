"""Live PyTorch execution: speculative decoding, router recording and model loading.

Importing this package is cheap: torch and transformers are imported only by its submodules
(:mod:`real.speculative`, :mod:`real.router_hooks`, :mod:`real.model_loading`,
:mod:`real.tiny_models`), so the simulator and the trace tools never pay for them.
"""
