"""The notebooks are stored without outputs (nbstripout), and follow the
walkthrough's rules: they open with what they show, read ZG_SCALE, set up offline figures
and assert their claims. (Running them is `make test`'s job: it executes every notebook into reports/.)"""

import shutil
import sys
from pathlib import Path

import processes
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LABS = sorted((ROOT / "labs" / "source").glob("*/*.ipynb"))
STORED = NOTEBOOKS + LABS


def nbstripout_command():
    """nbstripout beside this Python (the venv's), else on PATH."""
    here = Path(sys.executable).with_name("nbstripout")
    return str(here) if here.exists() else shutil.which("nbstripout")


@pytest.mark.slow
@pytest.mark.parametrize("path", STORED, ids=[str(p.relative_to(ROOT)) for p in STORED])
def test_notebook_is_stored_without_outputs(path, require):
    """nbstripout (the pre-commit hook, `make lint`) would change nothing: no outputs, no
    execution counts or timings, no widget state. Cell ids stay (nbgrader and links use them)."""
    require("nbstripout")
    done = processes.run(
        [nbstripout_command(), "--verify", "--keep-id", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, (
        f"{path.name} holds outputs; run `nbstripout --keep-id {path.relative_to(ROOT)}`: "
        f"{done.stdout}{done.stderr}"
    )


@pytest.mark.slow
def test_the_strip_check_fails_on_a_notebook_with_outputs(tmp_path, require):
    """The check above can fail: an executed copy of a notebook is reported."""
    nbformat = require("nbformat")
    require("nbstripout")
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    cell.outputs = [nbformat.v4.new_output("stream", text="measured 1.23x")]
    cell.execution_count = 7
    dirty = tmp_path / "dirty.ipynb"
    nbformat.write(nb, dirty)
    done = processes.run([nbstripout_command(), "--verify", "--keep-id", str(dirty)])
    assert done.returncode != 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_follows_the_walkthrough_rules(path, require):
    nbformat = require("nbformat")
    nb = nbformat.read(path, as_version=4)
    assert nb.cells and nb.cells[0].cell_type == "markdown", "a notebook opens with what it shows"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    text = "\n".join(c.source for c in nb.cells)
    assert "zg.viz.setup_notebook()" in code, "figures must render offline in reports"
    assert "ZG_SCALE" in text, (
        "the parameters cell reads ZG_SCALE (small by default, full for reports)"
    )
    assert "assert " in code, "a notebook asserts its key claims"


def make_dirty(nbformat):
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    nb = new_notebook(
        cells=[new_markdown_cell("# title"), new_code_cell("print(1)"), new_code_cell("x = 2")]
    )
    nb.cells[1].outputs = [new_output("stream", name="stdout", text="1\n")]
    nb.cells[1].execution_count = 1
    nb.cells[2].metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    return nb


@pytest.mark.slow
def test_strip_removes_outputs_counts_timings_and_widget_state(require, tmp_path):
    """What `make format` / the pre-commit hook does to an executed notebook: outputs, counts,
    execution timings and widget state go; sources and cell ids stay."""
    nbformat = require("nbformat")
    require("nbstripout")
    path = tmp_path / "dirty.ipynb"
    nb = make_dirty(nbformat)
    ids = [c.get("id") for c in nb.cells]
    nbformat.write(nb, path)
    assert processes.run([nbstripout_command(), "--verify", "--keep-id", str(path)]).returncode
    assert nbformat.read(path, as_version=4).cells[1].outputs, "--verify changes nothing"
    processes.run([nbstripout_command(), "--keep-id", str(path)], check=True)
    clean = nbformat.read(path, as_version=4)
    assert clean.cells[1].outputs == [] and clean.cells[1].execution_count is None
    assert "execution" not in clean.cells[2].metadata and "widgets" not in clean.metadata
    assert clean.cells[1].source == "print(1)" and [c.get("id") for c in clean.cells] == ids
    nbformat.validate(clean)
    done = processes.run([nbstripout_command(), "--verify", "--keep-id", str(path)])
    assert done.returncode == 0
