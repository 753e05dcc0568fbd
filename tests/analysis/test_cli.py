"""``python -m analysis``: key=value parsing and clear errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from analysis.__main__ import main, parse
from tests.analysis.fixtures import write_results

ROOT = Path(__file__).resolve().parents[2]


def test_parse_defaults_and_bare_path():
    cfg = parse(["out/x"])
    assert cfg["results"] == "out/x" and cfg["out"] == "out/report" and cfg["timeline"] == "auto"
    assert parse(["results=a", "timeline=off"])["timeline"] == "off"


@pytest.mark.parametrize("args, message", [
    (["results=a", "colour=red"], "unknown key(s) colour"),
    (["out=b"], "results=PATH is required"),
    (["a", "b"], "unexpected arguments"),
])
def test_parse_errors(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(args)


def test_usage_and_exit_codes(tmp_path, capsys):
    assert main([]) == 2
    assert "usage: python -m analysis report" in capsys.readouterr().err
    assert main(["report", "results=a", "bogus=1"]) == 2
    assert "unknown key(s) bogus" in capsys.readouterr().err
    assert main(["report", f"results={tmp_path / 'none'}", f"out={tmp_path / 'o'}"]) == 1
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", f"results={tmp_path / 'empty'}", f"out={tmp_path / 'o'}"]) == 1
    assert "no results.parquet found" in capsys.readouterr().err
    res = write_results(tmp_path / "res", sweeps=False)
    assert main(["report", f"results={res}", "experiment=nope", f"out={tmp_path / 'o'}"]) == 1
    assert "experiment 'nope' has no rows" in capsys.readouterr().err


def test_module_entry_point(tmp_path):
    res = write_results(tmp_path / "res", sweeps=False)
    p = subprocess.run([sys.executable, "-m", "analysis", "report", f"results={res.parent}", f"out={tmp_path / 'o'}",
                        "timeline=off"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "[analysis] read" in p.stdout and "report:" in p.stdout
    assert (tmp_path / "o" / "report.md").exists()
