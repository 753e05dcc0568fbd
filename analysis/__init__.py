"""Result tables, figures and the report (``python -m analysis report results=PATH``).

Analysis reads only result files (``results.parquet``); the one exception is the
timeline figure, which may re-simulate a few steps (see :mod:`analysis.timeline_fig`).
"""
from analysis.load import load_results
from analysis.report import build_report

__all__ = ["build_report", "load_results"]
