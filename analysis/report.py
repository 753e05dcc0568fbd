"""``python -m analysis report``: tables, headline claims and figures from result files.

The report reads only ``results.parquet`` files. The timeline figure reads ``timeline.json`` files
below the results when there are some for both policies, or else re-simulates a few steps with
:func:`sim.run.runner.run_one` (``timeline=auto``); the report says which.
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from analysis import claims, sections
from analysis.figure_specs import SPECS, rows_for
from analysis.load import load_results, main_slice
from analysis.names import MOESPAC, SD_BASELINE
from analysis.style import save
from analysis.tables import AVERAGE, hot_precision_summary, tps_by_workload
from analysis.timeline_fig import find_timeline_files, plot_timeline, simulate_events
from traces.atomic import atomic_write_bytes, check_writable

TIMELINE_MODES = ("auto", "files", "simulate", "off")


def build_report(results: str | Path, out: str | Path = "out/report", experiment: str | None = None,
                 timeline: str = "auto", timeline_workload: str = "mmlu_pro", log=print) -> Path:
    """Write ``out/report.md`` and its PNG figures from the result rows below ``results``."""
    if timeline not in TIMELINE_MODES:
        raise ValueError(f"timeline must be one of {', '.join(TIMELINE_MODES)}, got {timeline!r}")
    if timeline in ("auto", "simulate"):
        from traces.synth import list_workloads
        if timeline_workload not in list_workloads():
            raise ValueError(f"timeline_workload={timeline_workload!r}: must be one of {', '.join(list_workloads())}")
    t0 = time.perf_counter()
    out = check_writable(out, "out", kind="dir")
    df = load_results(results)
    log(f"[analysis] read {len(df)} rows ({df['experiment'].nunique()} experiments) from {results} "
        f"in {time.perf_counter() - t0:.2f} s")
    main = main_slice(df, experiment)
    t = tps_by_workload(main.rows)
    avg = t.loc[AVERAGE]
    md = ["# MoE-SpAc lab: simulation report", "",
          f"Results: `{results}` ({len(df)} rows; experiments: "
          f"{', '.join(sorted(map(str, df['experiment'].unique())))})."
          " Every number below is simulated unless marked as published.", ""]
    md += sections.setting(main.rows, main.note) + [""]
    md += ["## Headline claims", ""]
    md += claims.claim_sd(main.rows, avg) + [""]
    md += claims.claim_standard(avg) + [""]
    md += claims.claim_hot(hot_precision_summary(main.rows)) + [""]
    for part in (sections.tps_section(t), sections.paper_section(t), sections.speedup_section(avg),
                 sections.oracle_section(avg, set(main.rows.loc[main.rows["gamma"] > 0, "policy"])), sections.diagnostics_section(main.rows),
                 sections.ablation_section(avg), sections.dsv2_section(df), sections.real_section(df)):
        md += part + ([""] if part else [])
    log(f"[analysis] tables done at {time.perf_counter() - t0:.2f} s")
    md += ["## Figures", ""] + _figures(df, main.rows, out, log, t0)
    tl = _timeline(results, main.rows, out, timeline, timeline_workload, log)
    if timeline in ("files", "simulate") and "skipped" in tl[0]:
        log(f"[analysis] warning: the requested timeline was {tl[0].split('**: ', 1)[-1]}")
    md += tl + [""]
    path = out / "report.md"
    text = "\n".join(md).encode()
    atomic_write_bytes(path, lambda f: f.write(text))
    log(f"[analysis] wrote {path} in {time.perf_counter() - t0:.2f} s")
    return path


def _figures(df: pd.DataFrame, main: pd.DataFrame, out: Path, log, t0: float) -> list[str]:
    md = []
    for spec in SPECS:
        rows, note = rows_for(spec, df, main)
        fig = spec.plot(rows) if rows is not None else None
        if fig is None:
            reason = note if rows is None else (f"the rows of {note} do not vary what it plots; run "
                                                f"`python -m sim sweep experiment={spec.experiment or 'paper_qwen3'}`")
            md += [f"- **{spec.name}**: skipped ({reason}).", ""]
            log(f"[analysis] figure {spec.name}: skipped ({reason})")
            continue
        save(fig, out / f"{spec.name}.png")
        md += [f"### {spec.caption}", "", f"![{spec.name}]({spec.name}.png)", "", f"*Data: {note}.*", ""]
        log(f"[analysis] figure {spec.name}.png at {time.perf_counter() - t0:.2f} s")
    return md


def _timeline(results, main: pd.DataFrame, out: Path, mode: str, workload: str, log) -> list[str]:
    policies = (MOESPAC, SD_BASELINE)
    head = ["### Timeline: a few verify steps of MoE-SpAc and llama.cpp-w/SD", ""]
    if mode == "off":
        return ["- **timeline**: skipped (timeline=off)."]
    events, how = {}, ""
    if mode in ("auto", "files"):
        events = find_timeline_files(results, policies)
        how = "read from timeline.json files below the results"
    if len(events) < 2 and mode in ("auto", "simulate"):
        setting = _setting(main)
        if setting is None:
            return ["- **timeline**: skipped (the main table's hardware/model are patched specs, so a re-simulation "
                    "cannot be named; run `python -m sim run policy=moespac timeline=true` instead)."]
        try:
            events = simulate_events(policies, setting, workload)
        except (KeyError, ValueError) as exc:
            return [f"- **timeline**: skipped (re-simulation failed: {exc})."]
        how = (f"re-simulated by sim.run.runner.run_one(timeline=True) on {workload}, "
               + ", ".join(f"{k}={v}" for k, v in setting.items()))
    if len(events) < 2:
        return ["- **timeline**: skipped (no timeline.json for both moespac and llamacpp_sd below the results; "
                "use timeline=auto or timeline=simulate)."]
    fig = plot_timeline({p: events[p] for p in policies}, note=workload if "re-simulated" in how else "")
    save(fig, out / "timeline.png")
    log("[analysis] figure timeline.png")
    return head + ["![timeline](timeline.png)", "", f"*Events {how}; steps after the first four (cache warm-up).*"]


def _setting(main: pd.DataFrame) -> dict | None:
    sd = main[main["gamma"] > 0]
    if sd.empty or "[" in str(sd["hardware"].iloc[0]) + str(sd["model"].iloc[0]):
        return None
    r = sd.iloc[0]
    return {"model": r["model"], "hardware": r["hardware"], "draft": r["draft"],
            "cache_ratio": float(r["cache_ratio"]), "gamma": int(r["gamma"]), "seed": int(r["seed"])}
