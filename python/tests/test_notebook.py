"""The example notebook (examples/demo.ipynb) runs from top to bottom in a fresh kernel, and
its outputs say what the demo should: the card, 44,800 messages all between nodes, every rank
slow for its mapping, the matrix, a line chart, the background-traffic windows and the report."""

import pytest

from conftest import REPO

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def outputs(cell, kind):
    return "".join(
        "".join(o.get("data", {}).get(kind, "")) if o.get("output_type") in ("execute_result", "display_data") else ""
        for o in cell.get("outputs", [])
    )


def test_the_example_notebook_runs_and_shows_the_demos_findings():
    notebook = nbformat.read(REPO / "examples" / "demo.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), "committed without outputs"
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}).execute()
    code = [c for c in notebook.cells if c.cell_type == "code"]
    for cell in code:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
    card, counts, causes, matrix, profile, chart, windows, report = code
    assert "rows in messages" in outputs(card, "text/html") and "44,800" in outputs(card, "text/html")
    assert "44800" in outputs(counts, "text/plain") and "false" in outputs(counts, "text/plain")
    assert "mapping" in outputs(causes, "text/plain") and "64" in outputs(causes, "text/plain")
    assert outputs(matrix, "text/plain") == "((64, 64), 44800, 200)"
    assert "compute" in outputs(profile, "text/html")
    assert outputs(chart, "image/svg+xml").startswith("<svg")
    background = outputs(windows, "text/plain")
    assert all(f" {ms} " in background for ms in range(8, 14)) and " 14 " not in background
    assert outputs(report, "text/html").startswith("<iframe")
