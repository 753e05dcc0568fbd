"""The notebooks run end to end on a tiny synthetic results file (so they never rot)."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.analysis.fixtures import write_results

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ("ablations.ipynb", "cache_ratio.ipynb")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return write_results(tmp_path_factory.mktemp("nb") / "res")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_and_draws(name, results, monkeypatch):
    monkeypatch.setenv("MOESPAC_RESULTS", str(results))
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no figure drawn"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_has_a_results_parameter(name):
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert params and "RESULTS" in params[0].source and "MOESPAC_RESULTS" in params[0].source
