"""Prefill: the prompt in micro-batches, the per-layer copy-or-CPU decision, time to first token.

``costs`` prices one micro-batch's parts, ``decision`` holds the pure copy-or-CPU rules,
``routing`` gives the prompt's per-micro-batch expert counts, ``phase`` is the executor (a clock
over the layers), ``handoff`` lands the prefill's copies in the decode's cache, ``crossover`` is the
``python -m sim crossover`` command.
"""
