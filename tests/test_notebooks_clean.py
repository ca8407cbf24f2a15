"""The notebooks are stored without outputs (tools/strip_notebooks.py), and follow the
walkthrough's rules: they open with what they show, read ZG_SCALE, set up offline figures
and assert their claims. (Running them is nbval's job: `make test` runs every notebook.)"""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def load_tool():
    spec = importlib.util.spec_from_file_location(
        "strip_notebooks", ROOT / "tools" / "strip_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path, require):
    nbformat = require("nbformat")
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    found = load_tool().problems(nb)
    assert not found, (
        f"{path.name} holds outputs; run `python tools/strip_notebooks.py`: {found[:5]}"
    )


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


def test_strip_removes_outputs_counts_timings_and_widget_state(require):
    nbformat = require("nbformat")
    tool = load_tool()
    nb = make_dirty(nbformat)
    found = tool.problems(nb)
    assert any("output" in f for f in found) and any("execution count" in f for f in found)
    assert any("'execution'" in f for f in found) and any("widgets" in f for f in found)
    assert nb.cells[1].outputs, "problems() must not change the notebook"
    removed = tool.strip(nb)
    assert removed == found
    assert tool.problems(nb) == [] and tool.strip(nb) == []
    assert nb.cells[1].outputs == [] and nb.cells[1].execution_count is None
    assert "widgets" not in nb.metadata and nb.cells[1].source == "print(1)"
    nbformat.validate(nb)


def test_check_mode_exit_status(require, tmp_path, capsys):
    nbformat = require("nbformat")
    tool = load_tool()
    path = tmp_path / "dirty.ipynb"
    nbformat.write(make_dirty(nbformat), path)
    assert tool.main(["--check", str(path)]) == 1
    assert "not stripped" in capsys.readouterr().out
    assert nbformat.read(path, as_version=4).cells[1].outputs, "--check changes nothing"
    assert tool.main([str(path)]) == 0  # strip in place
    assert tool.main(["--check", str(path)]) == 0
    assert nbformat.read(path, as_version=4).cells[1].outputs == []
