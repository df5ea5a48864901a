"""The notebooks run top to bottom on a CPU (executed, not just parsed)."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.mark.parametrize("name", ["quickstart.ipynb", "distributed.ipynb"])
def test_notebook_executes(name, tmp_path, monkeypatch):
    """Top to bottom, with no error; what a notebook writes (the Zarr store's folder, under
    DLAP_DATA) it removes."""
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("DLAP_DATA", str(data))  # the kernel inherits it
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert not list(data.iterdir())
