"""``python -m traces``: commands, argument errors, the lazy capture dispatch."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from traces.cli import main
from traces.io import load_trace, save_trace

from .helpers import real_dir, small_trace

ROOT = Path(__file__).resolve().parents[2]


def test_synth_then_stats_as_text_json_and_figure(tmp_path, capsys):
    out = tmp_path / "t.npz"
    assert main(["synth", "model=mixtral_8x7b", "workload=gsm8k", "tokens=64", "seed=3", f"out={out}"]) == 0
    tr = load_trace(out)
    assert tr.n_tokens == 64 and tr.meta["generator"]["seed"] == 3
    assert "64 tokens" in capsys.readouterr().out
    assert main(["stats", f"trace={out}"]) == 0
    text = capsys.readouterr().out
    assert "next-token reuse" in text and "Belady hit" in text
    png = tmp_path / "fig.png"
    assert main(["stats", f"trace={out}", "json=true", f"figure={png}"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert set(st["lru_hit"]) == {"2", "3", "4", "6"} and isinstance(st["reuse"], float)
    assert {"reuse_by_layer", "entropy_by_layer", "belady_hit", "unique_per_window"} <= set(st)
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


def test_stats_of_a_folder_pools_the_traces(tmp_path, capsys):
    save_trace(small_trace(seed=1, tokens=10), tmp_path / "a.npz")
    save_trace(small_trace(seed=2, tokens=15), tmp_path / "b.npz")
    assert main(["stats", f"trace={tmp_path}", "json=true", "slots=[2,4]"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["n_traces"] == 2 and st["tokens"] == 25 and list(st["lru_hit"]) == ["2", "4"]


def test_unknown_key_lists_the_valid_keys(capsys):
    assert main(["synth", "modle=qwen3_30b_a3b", "out=x.npz"]) == 2
    err = capsys.readouterr().err
    assert "unknown key(s) modle; valid keys: model, workload, tokens, seed, out" in err


def test_missing_required_key_and_non_key_value_arguments(capsys):
    assert main(["stats"]) == 2
    assert "missing required key(s) trace=" in capsys.readouterr().err
    assert main(["import", "source"]) == 2
    assert "arguments must be key=value" in capsys.readouterr().err


def test_input_errors_are_reported_without_a_traceback(tmp_path, capsys):
    assert main(["synth", "workload=chess", f"out={tmp_path / 'x.npz'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "unknown workload 'chess'; valid: alpaca" in err
    assert main(["stats", f"trace={tmp_path / 'none.npz'}"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["frobnicate"]])
def test_no_or_unknown_command_prints_usage(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    for command in ("synth", "stats", "import", "capture"):
        assert f"  {command}" in err


def test_capture_dispatches_lazily_with_a_dict(monkeypatch, capsys):
    seen = {}
    fake = types.ModuleType("real.capture")
    fake.main = lambda args: seen.update(args) or {"out": "somewhere", "written": 1}
    monkeypatch.setitem(sys.modules, "real.capture", fake)
    assert main(["capture", "target=tiny", "gamma=4"]) == 0
    assert seen == {"target": "tiny", "gamma": 4}
    assert json.loads(capsys.readouterr().out)["written"] == 1


def test_import_writes_a_folder_of_requests(tmp_path, capsys):
    src = real_dir("Mario928-speculative-moe") / "mixtral_decode_topk.npz"
    assert main(["import", f"source={src}", f"out={tmp_path / 'mix'}"]) == 0
    names = sorted(p.name for p in (tmp_path / "mix").iterdir())
    assert names == ["gsm8k_p0.npz", "gsm8k_p1.npz", "humaneval_p0.npz", "humaneval_p1.npz"]
    assert "missing (token, layer) rows" in capsys.readouterr().out


def test_import_of_one_request_to_a_file(tmp_path):
    src = tmp_path / "q.npz"
    ex = small_trace(tokens=3, n_layers=48, n_experts=128, top_k=8).experts
    np.savez(src, experts_p0=ex, phase_p0=np.ones(3, np.int8))
    assert main(["import", f"source={src}", f"out={tmp_path / 'one.npz'}"]) == 0
    assert load_trace(tmp_path / "one.npz").meta["source"] == "imported"


def test_python_dash_m_entry_point(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-m", "traces"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 2 and "usage: python -m traces" in run.stderr
    out = tmp_path / "s.npz"
    run = subprocess.run([sys.executable, "-m", "traces", "synth", "model=deepseek_v2_lite", "tokens=16",
                          f"out={out}"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert load_trace(out).meta["model"] == "deepseek_v2_lite"
