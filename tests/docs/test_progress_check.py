"""tools/progress_check.py: a long notebook cell shows progress while it runs, as a person in
JupyterLab sees it. The rules on made-up executed notebooks, and the whole tool on real
notebooks run in a real kernel (slow): a silent long cell is found, a cell with the kit's bar
passes, a setup cell is set apart."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "progress_check", ROOT / "tools" / "progress_check.py"
)
pc = importlib.util.module_from_spec(spec)
sys.modules["progress_check"] = pc
spec.loader.exec_module(pc)

WIDGET = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"


def cell(source: str, seconds: float, outputs=()) -> dict:
    start = "2026-12-07T10:00:00.000000Z"
    end = f"2026-12-07T10:00:{seconds:09.6f}Z"
    return {
        "cell_type": "code",
        "source": source,
        "outputs": list(outputs),
        "metadata": {"execution": {"iopub.execute_input": start, "shell.execute_reply": end}},
    }


def notebook(*cells, widgets=None) -> dict:
    meta = {"widgets": {STATE: {"state": widgets}}} if widgets else {}
    return {"cells": list(cells), "metadata": meta}


TQDM_STATE = {
    "box": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_bar", "IPY_MODEL_t"]}},
    "bar": {"model_name": "FloatProgressModel", "state": {}},
    "t": {"model_name": "HTMLModel", "state": {}},
    "slider": {"model_name": "IntSliderModel", "state": {}},
}


def view(model_id: str) -> dict:
    return {"output_type": "display_data", "data": {WIDGET: {"model_id": model_id}}}


def test_a_long_cell_is_silent_unless_it_shows_a_bar():
    nb = notebook(
        cell("import torch\nimport zg\nprint('ready')", 6.0),
        cell("engine.fit(3)", 9.0, [view("box")]),
        cell("slow()", 8.0, [view("slider")]),  # a control is no progress
        cell("loop()", 7.0, [{"output_type": "stream", "name": "stderr", "text": "40%|####"}]),
        cell("quick()", 0.5),
        widgets=TQDM_STATE,
    )
    rows = {r["cell"]: r for r in pc.long_cells(nb, share=0.10, min_seconds=1.0)}
    assert sorted(rows) == [0, 1, 2, 3]  # the quick cell is not long
    assert rows[0]["setup"] and not rows[0]["progress"]
    assert rows[1]["progress"] and rows[3]["progress"]
    assert not rows[2]["progress"] and not rows[2]["setup"]
    assert rows[1]["seconds"] == 9.0 and rows[1]["share"] == round(9 / 30.5, 3)


@pytest.mark.parametrize(
    "source, setup",
    [
        ("import os\nos.environ.setdefault('A', '1')\nimport zg\nzg.viz.setup_notebook()", True),
        ("import zg\nprint(ex.machine_label(ex.machine_note()))", True),
        ("import zg\ng = zg.datasets.load('cora')", False),  # work beside the imports
        ("print('no import')", False),
        ("import (", False),  # not Python: never exempt
    ],
)
def test_a_setup_cell_imports_and_makes_only_setup_calls(source, setup):
    assert pc.is_setup(source) is setup


@pytest.mark.slow
def test_the_tool_finds_a_silent_long_cell_in_a_real_kernel(tmp_path):
    import nbformat

    def write(name, *sources):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
        path = tmp_path / f"{name}.ipynb"
        nbformat.write(nb, path)
        return path

    barred = (
        "import time\nfrom zg import experiments as ex\n"
        "for _ in ex.progress(range(4), desc='waiting'):\n    time.sleep(0.5)"
    )
    silent = write("silent", "x = 1", barred, "import time\ntime.sleep(2.5)")
    shown = write("shown", "x = 1", barred)
    out = tmp_path / "out.json"
    before = dict(os.environ)  # the kernel gets its switches; this process keeps its own
    assert pc.main([str(silent), str(shown), "--json", str(out), "--min-seconds", "1.5"]) == 1
    report = json.loads(out.read_text())["notebooks"]
    marks = {
        (name, r["cell"]): r["progress"] for name, v in report.items() for r in v["long_cells"]
    }
    assert marks == {("silent", 1): True, ("silent", 2): False, ("shown", 1): True}
    assert pc.main([str(shown), "--min-seconds", "1.5"]) == 0
    assert dict(os.environ) == before
