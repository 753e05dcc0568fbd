"""The report on a small synthetic results file: statements, tables, figures, skip lines."""
from __future__ import annotations

import pytest

from analysis.report import build_report
from analysis.timeline_fig import find_timeline_files, plot_timeline, read_chrome_trace, window
from tests.analysis.fixtures import write_results

FIGURES = ("tps_vs_paper", "tps_vs_cache_ratio", "speedup_vs_gamma", "tps_vs_gen_length", "tps_vs_pcie",
           "tps_by_hardware", "ablations", "hot_precision_by_layer", "utilization")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    results = write_results(root / "res")
    path = build_report(results, root / "out", timeline="off", log=lambda *_: None)
    return path, path.read_text()


def test_headline_statements(report):
    _, md = report
    assert "MoE-SpAc over llama.cpp-w/SD (paper 1.42x)" in md
    assert "**Simulated 1.33x**" in md                       # 24 / 18 in the fixture
    assert "Average speedup over the standard baselines (paper 4.04x)" in md
    assert "*Standard baselines* are the nine systems" in md and "arithmetic mean" in md
    assert "Hot/cold prediction precision (paper ~85%)" in md
    assert "at MMLU-Pro layer 47" in md


def test_tables_present(report):
    _, md = report
    for heading in ("Throughput per system and workload", "Published numbers vs simulated", "Speedup of each system",
                    "Oracle (upper bound)", "Diagnostics", "Ablations", "DeepSeek-V2-Lite compatibility"):
        assert f"## {heading}" in md, heading
    assert "| MoE-SpAc | average of 7 | 24.00 | 25.06 | -4.2% |" in md
    assert "| MoE-SpAc | 24.00 | 60.0% | 120.0% |" in md        # oracle (SD) 40, oracle (AR) 20


def test_figures_written_and_linked(report):
    path, md = report
    for name in FIGURES:
        assert (path.parent / f"{name}.png").stat().st_size > 10_000, name
        assert f"![{name}]({name}.png)" in md
    assert "timeline**: skipped (timeline=off)" in md


def test_missing_sweeps_are_skipped_with_the_producing_command(tmp_path):
    results = write_results(tmp_path / "res", sweeps=False)
    md = build_report(results, tmp_path / "out", timeline="files", log=lambda *_: None).read_text()
    for sweep in ("sweep_cache_ratio", "sweep_gamma", "sweep_gen_length", "sweep_pcie", "sweep_hardware"):
        assert f"python -m sim sweep experiment={sweep}" in md
    assert "No DeepSeek-V2-Lite rows" in md
    assert "no timeline.json" in md
    assert not (tmp_path / "out" / "tps_vs_cache_ratio.png").exists()


def _events(step_ms: float, steps: int = 8) -> list:
    ev = []
    for s in range(steps):
        t = s * step_ms / 1e3
        ev += [("GPU", "draft", t, t + 0.002), ("GPU", "L0 experts", t + 0.002, t + step_ms / 1e3),
               ("CPU", "L0 experts", t + 0.003, t + 0.006), ("PCIe", "prefetch L1E2", t, t + 0.001)]
    return ev


def test_timeline_window_and_plot(tmp_path):
    a, b, starts = window(_events(10.0))
    assert (a, len(starts)) == (pytest.approx(0.04), 3) and b == pytest.approx(0.07)
    fig = plot_timeline({"moespac": _events(10.0), "llamacpp_sd": _events(14.0)})
    assert len(fig.axes) == 2


def test_timeline_files_are_found_by_policy(tmp_path):
    import pandas as pd

    from sim.engine.timeline import chrome_trace
    from tests.analysis.fixtures import row

    for pol in ("moespac", "llamacpp_sd"):
        d = tmp_path / pol
        d.mkdir()
        chrome_trace(_events(10.0), d / "timeline.json")
        pd.DataFrame([row("adhoc", pol, "gsm8k")]).to_parquet(d / "results.parquet")
    found = find_timeline_files(tmp_path, ("moespac", "llamacpp_sd"))
    assert set(found) == {"moespac", "llamacpp_sd"}
    assert read_chrome_trace(tmp_path / "moespac" / "timeline.json")[0][:2] == ("GPU", "draft")
