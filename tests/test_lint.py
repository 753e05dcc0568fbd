"""The tree passes ``ruff check`` (pyflakes and syntax errors; rules in pyproject.toml)."""
import subprocess
import sys
from pathlib import Path

from tests.real import need

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    need("ruff")   # skips without it; under CI=true (which installs .[test]) a missing ruff fails
    p = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
