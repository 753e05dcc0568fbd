"""Timelines of a run: a Chrome/Perfetto trace (JSON) and a PNG Gantt chart of the first steps.

Open the JSON in https://ui.perfetto.dev or chrome://tracing: one lane each for the GPU, the CPU
and the PCIe link.
"""
from __future__ import annotations

import json
from pathlib import Path

from traces.atomic import save_png
from traces.io import atomic_write_bytes

LANES = ("GPU", "CPU", "PCIe")
COLORS = {"GPU": "tab:green", "CPU": "tab:blue", "PCIe": "tab:orange"}


def chrome_trace(events: list, path: str | Path) -> Path:
    """Write ``(lane, label, start_s, end_s)`` events as Chrome trace-event JSON (microseconds)."""
    tid = {lane: i for i, lane in enumerate(LANES)}
    out = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": lane}}
           for lane, i in tid.items()]
    out += [{"name": label, "ph": "X", "pid": 0, "tid": tid[lane], "ts": a * 1e6, "dur": (b - a) * 1e6}
            for lane, label, a, b in events]
    data = json.dumps({"traceEvents": out, "displayTimeUnit": "ms"}).encode()
    return atomic_write_bytes(path, lambda f: f.write(data))


def gantt_png(events: list, path: str | Path, until_s: float | None = None, title: str = "") -> Path:
    """A Gantt chart of the busy intervals up to ``until_s`` (default: the first 5% of the run)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if until_s is None:
        end = max((b for *_, b in events), default=0.0)
        until_s = end * 0.05 or end
    fig, ax = plt.subplots(figsize=(11, 2.8))
    for i, lane in enumerate(LANES):
        bars = [(a * 1e3, (min(b, until_s) - a) * 1e3) for ln, _, a, b in events if ln == lane and a < until_s]
        ax.broken_barh(bars, (i - 0.4, 0.8), facecolors=COLORS[lane], edgecolor="black", linewidth=0.2)
    ax.set_yticks(range(len(LANES)), LANES)
    ax.set_xlabel("simulated time (ms)")
    ax.set_xlim(0, until_s * 1e3)
    ax.set_title(title or "busy intervals per resource")
    return save_png(fig, path, dpi=120)
