"""docs/notebook.ipynb runs headless from start to end (nbclient, a fresh Python kernel) and
shows its charts: the app's chart builders work outside Streamlit, on the shipped model."""

from __future__ import annotations

import pytest

from tests.apptest_support import ROOT

nbformat = pytest.importorskip("nbformat", reason="pip install -r requirements-dev.txt")
nbclient = pytest.importorskip("nbclient", reason="pip install -r requirements-dev.txt")
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


@pytest.mark.skipif(not (ROOT / "models" / "shakespeare.npz").is_file(),
                    reason="the shipped model is not in models/")
def test_the_notebook_runs_and_shows_its_charts():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "docs")}}).execute()
    shown = [out for cell in nb.cells if cell.cell_type == "code"
             for out in cell.get("outputs", []) if out.get("output_type") == "display_data"]
    assert len(shown) >= 4, f"{len(shown)} charts shown"
    assert not [out for cell in nb.cells for out in cell.get("outputs", [])
                if out.get("output_type") == "error"]
    text = "".join(out.get("text", "") for cell in nb.cells for out in cell.get("outputs", []))
    assert "tokens, d = 256" in text  # the shipped model, not the test fixture
