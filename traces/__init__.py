"""Workloads: which experts each token wants at each MoE layer.

The trace schema (:mod:`traces.schema`), loading and validation (:mod:`traces.io`),
importers of public recorded routing (:mod:`traces.importers`), the calibrated synthetic
generator (:mod:`traces.synth`), verify windows for speculative decoding
(:mod:`traces.windows`), statistics (:mod:`traces.stats`) and, with the ``real`` extra,
capture from Hugging Face models (:mod:`real.capture`).
"""
from traces.errors import TraceError
from traces.schema import SCHEMA_VERSION, SDRecord, Trace
from traces.io import load_trace, save_trace

__all__ = ["SCHEMA_VERSION", "SDRecord", "Trace", "TraceError", "load_trace", "save_trace"]
