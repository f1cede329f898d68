"""The example notebook runs headless, end to end, on small data, and closes its cluster."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

# executes a notebook on a local cluster: the integration set (`pytest -m integration`)
pytestmark = pytest.mark.integration

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "mspca_on_a_cluster.ipynb"


def outputs(cell: nbformat.NotebookNode) -> tuple[str, set[str]]:
    """The text a cell printed or displayed, and the MIME types of its rich outputs."""
    text, mimes = [], set()
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            text.append(out["text"])
        elif out["output_type"] in ("display_data", "execute_result"):
            mimes.update(out["data"])
            text.append(out["data"].get("text/plain", ""))
    return "".join(text), mimes


def cell_with(nb: nbformat.NotebookNode, code: str) -> nbformat.NotebookNode:
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and code in c.source]
    return cell


@pytest.mark.timeout(300)
def test_notebook__runs_headless_fits_plots_and_closes_its_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MSPCA_EXAMPLE_SAMPLES", "1200")
    monkeypatch.setenv("MSPCA_EXAMPLE_FEATURES", "300")
    monkeypatch.setenv("MSPCA_EXAMPLE_DIR", str(tmp_path))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    # Appended to the copy we run: ask the kernel, after the last cell, whether the cluster's
    # scheduler and workers were really shut down and whether the client let go.
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "print('after:', cluster.status.name, client.status, len(cluster.workers))"
        )
    )

    client = NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, with the traceback, if a cell fails

    dashboard, _ = outputs(cell_with(nb, "client.dashboard_link"))
    assert dashboard.startswith("Dask dashboard: http://")
    assert dashboard.rstrip().endswith("/status")

    assert (tmp_path / "mixture.zarr").is_dir()  # the generated store went where we said
    _, mimes = outputs(cell_with(nb, "result.plot()"))
    assert "image/png" in mimes
    _, mimes = outputs(cell_with(nb, "plt.subplots"))
    assert "image/png" in mimes
    (table,) = [c for c in nb.cells if c.cell_type == "code" and c.source == "result"]
    html = "".join(out["data"].get("text/html", "") for out in table.outputs)
    assert "mean shift" in html and "covariance" in html  # both kinds of component are found

    aligned, _ = outputs(cell_with(nb, "alignment("))
    assert "plain PCA's first component aligns" in aligned

    closed, _ = outputs(nb.cells[-1])
    assert closed.split() == ["after:", "closed", "closed", "0"]
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", cell.source
