"""The timeline figure: a few decode steps of MoE-SpAc and llama.cpp-w/SD, lane by lane.

Events are ``(lane, label, start_s, end_s)`` on the lanes GPU, CPU and PCIe (sim.engine.decode). They
come either from ``timeline.json`` files below the results folder (written by
``python -m sim run ... timeline=true``, matched to a policy by the ``results.parquet`` beside
them) or from re-simulating a short run with :func:`sim.run.runner.run_one` (``timeline=True``) at the
main table's setting. The report says which.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from matplotlib.patches import Patch

from analysis.names import display_name
from analysis.style import plt
from sim.run.spec import RunSpec

LANES = ("GPU", "CPU", "PCIe")
SKIP_STEPS, SHOW_STEPS = 4, 3
SIM_TOKENS = 96


def _color(lane: str, label: str) -> str:
    if lane == "GPU":
        return "palegreen" if label == "draft" else "tab:green"
    if lane == "CPU":
        return "tab:blue"
    return "tab:orange" if label.startswith("prefetch") else "tab:red"


def read_chrome_trace(path: str | Path) -> list:
    """Events of a Chrome trace written by :func:`sim.engine.timeline.chrome_trace`."""
    data = json.loads(Path(path).read_text())
    names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"] if e.get("ph") == "M"}
    return [(names[e["tid"]], e["name"], e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6)
            for e in data["traceEvents"] if e.get("ph") == "X"]


def find_timeline_files(results: str | Path, policies) -> dict:
    """``{policy: events}`` for the timeline.json files below ``results`` of the given policies."""
    root = Path(results)
    root = root.parent if root.is_file() else root
    found = {}
    for tl in sorted(root.rglob("timeline.json")):
        rp = tl.parent / "results.parquet"
        if rp.exists():
            pol = pd.read_parquet(rp, columns=["policy"])["policy"]
            if len(pol) and pol.iloc[-1] in policies and pol.iloc[-1] not in found:
                found[pol.iloc[-1]] = read_chrome_trace(tl)
    return found


def simulate_events(policies, setting: dict, workload: str, gen_tokens: int = SIM_TOKENS) -> dict:
    """``{policy: events}`` of a short run of each policy at ``setting`` (names from result rows)."""
    from sim.run.runner import run_one

    keys = ("model", "hardware", "draft", "cache_ratio", "gamma", "seed")
    args = {k: setting[k] for k in keys if k in setting}
    return {p: run_one(RunSpec.of(policy=p, workload=workload, gen_tokens=gen_tokens, timeline=True, **args)).engine.events
            for p in policies}


def step_starts(events: list) -> list[float]:
    """Start times of the decode steps (each begins with the draft, or embed+lm_head in AR)."""
    label = "draft" if any(lb == "draft" for _, lb, *_ in events) else "embed+lm_head"
    return sorted(a for lane, lb, a, _ in events if lane == "GPU" and lb == label)


def window(events: list, skip: int = SKIP_STEPS, show: int = SHOW_STEPS) -> tuple[float, float, list]:
    """(start, end, step starts) of ``show`` steps after the first ``skip`` (fewer if the run is short)."""
    starts = step_starts(events)
    end_all = max(b for *_, b in events)
    skip = min(skip, max(0, len(starts) - show))
    inside = starts[skip:skip + show]
    end = starts[skip + show] if skip + show < len(starts) else end_all
    return inside[0], end, inside


def plot_timeline(events_by_policy: dict, note: str = ""):
    """One panel per policy, the same time scale, a few steps after the warm-up."""
    if len(events_by_policy) < 1 or any(not ev for ev in events_by_policy.values()):
        return None
    wins = {p: window(ev) for p, ev in events_by_policy.items()}
    span = max(b - a for a, b, _ in wins.values()) * 1e3
    fig, axes = plt.subplots(len(wins), 1, sharex=True, squeeze=False, figsize=(11, 1.9 * len(wins) + 0.9))
    axes = axes[:, 0]
    for ax, (p, ev) in zip(axes, events_by_policy.items()):
        t0, t1, starts = wins[p]
        for i, lane in enumerate(LANES):
            for ln, lb, a, b in ev:
                if ln == lane and b > t0 and a < t1:
                    ax.broken_barh([((max(a, t0) - t0) * 1e3, (min(b, t1) - max(a, t0)) * 1e3)], (i - 0.4, 0.8),
                                   facecolors=_color(ln, lb), linewidth=0)
        for s in starts:
            ax.axvline((s - t0) * 1e3, color="black", ls="--", lw=0.8)
        ax.set_yticks(range(len(LANES)), LANES)
        ax.set_ylim(-0.6, len(LANES) - 0.4)
        ms = (t1 - t0) * 1e3 / max(1, len(starts))
        ax.set_title(f"{display_name(p)}: {len(starts)} verify steps in {(t1 - t0) * 1e3:.1f} ms ({ms:.1f} ms/step)",
                     fontsize=9, loc="left")
    axes[-1].set_xlim(0, span)
    axes[-1].set_xlabel("simulated time from the window start (ms); dashed: step starts")
    legend = [Patch(color=c, label=n) for c, n in (("palegreen", "GPU draft"), ("tab:green", "GPU target"),
                                                  ("tab:blue", "CPU experts"), ("tab:orange", "PCIe prefetch"),
                                                  ("tab:red", "PCIe demand fetch"))]
    fig.legend(handles=legend, loc="upper right", ncol=5, fontsize=7)
    fig.suptitle("Decode steps lane by lane" + (f" ({note})" if note else ""), fontsize=10, x=0.01, ha="left")
    return fig
