"""notebooks/speculation.ipynb runs end to end (computing its own tiny break-even map) and draws."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_speculation_notebook_runs_and_draws(tmp_path, monkeypatch):
    monkeypatch.setenv("MOESPAC_BREAKEVEN", str(tmp_path / "absent.json"))
    nb = nbformat.read(ROOT / "notebooks" / "speculation.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2, "map and gamma curves"
    assert any("best AR policy" in o.get("text", "") for o in outputs)
