"""The live JupyterLab check (tools/lab_live_check.py, `make lab-live-check`) and the first
screens it checks: `make lab` without nbgrader's tools, `make lab-instructor` with an exchange.

The configuration tests run everywhere. The live tests start JupyterLab on notebooks written
here and drive it in headless Chromium: the check must pass a good notebook and fail a broken
one naming the cell and the control, and it must fail an instructor screen whose exchange is
missing. They are skipped only where Debian's chromium is not installed (a missing playwright
is an error in the reference environment, as every pinned module is).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import processes
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "lab_live_check.py"
STUDENT = ROOT / "tools" / "student_lab"
LABS = ROOT / "labs"
NBGRADER_SERVER_EXTENSIONS = {
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.validate_assignment",
    "nbgrader.server_extensions.assignment_list",
    "nbgrader.server_extensions.course_list",
}


@pytest.fixture(scope="module")
def tool():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import lab_live_check
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return lab_live_check


def make_dry_run(target: str, **env) -> str:
    done = processes.run(
        ["make", "--no-print-directory", "-n", "-o", "env", "-o", ".venv/.zg-installed", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, **env),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# ----------------------------------------------------------------------------- configuration


def test_the_student_lab_turns_every_nbgrader_extension_off():
    server = json.loads((STUDENT / "jupyter_server_config.json").read_text())
    switches = server["ServerApp"]["jpserver_extensions"]
    assert set(switches) == NBGRADER_SERVER_EXTENSIONS and not any(switches.values())
    # Every server extension nbgrader enables where it is installed is among them.
    enabled = Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "nbgrader.json"
    if enabled.exists():
        installed = json.loads(enabled.read_text())["ServerApp"]["jpserver_extensions"]
        assert set(installed) <= set(switches)
    page = json.loads((STUDENT / "labconfig" / "page_config.json").read_text())
    assert page["disabledExtensions"] == {"@jupyter/nbgrader": True}


def test_make_lab_reads_the_student_config_and_lab_instructor_does_not():
    lab = make_dry_run("lab")
    assert f'JUPYTER_CONFIG_PATH="{STUDENT}' in lab and "cd notebooks" in lab
    instructor = make_dry_run("lab-instructor")
    assert "student_lab" not in instructor and "cd labs" in instructor
    assert "mkdir -p labs/exchange && chmod 0777 labs/exchange" in instructor


def load_course_config(monkeypatch, **env):
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.delenv("ZG_EXCHANGE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return PyFileConfigLoader("nbgrader_config.py", path=str(LABS)).load_config()


def test_the_course_names_an_exchange_that_make_lab_instructor_creates(monkeypatch):
    config = load_course_config(monkeypatch)
    if os.path.isdir("/srv/nbgrader/exchange"):
        assert config.Exchange.root == "/srv/nbgrader/exchange"
    else:
        assert config.Exchange.root == str(LABS / "exchange")
    assert config.CourseDirectory.course_id == "zg-labs"
    assert "labs/exchange/" in (ROOT / ".gitignore").read_text().splitlines()
    assert load_course_config(monkeypatch, ZG_EXCHANGE="/x/y").Exchange.root == "/x/y"
    # The formgrader's debug panel logged a warning on every page load.
    assert config.FormgradeExtension.debug is False


def notebook(cells: list[str]) -> dict:
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"c{i}",
                "metadata": {},
                "outputs": [],
                "source": src,
            }
            for i, src in enumerate(cells)
        ],
        "metadata": {
            "kernelspec": {
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
                "name": "python3",
            }
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.mark.parametrize(
    "source, expected",
    [
        ("w = widgets.FloatSlider(value=1)", True),
        ('x = __import__("ipywidgets").Dropdown(options=[1])', True),
        ("fig = go.FigureWidget()", True),
        ("zg.viz.explore(f, n=ipywidgets.IntSlider())", True),
        ("!pip install -e .   # add .[lab] for plotly and ipywidgets", False),
        ("import plotly.graph_objects as go; go.Figure().show()", False),
    ],
)
def test_notebooks_with_controls_are_found_by_their_code(tool, tmp_path, source, expected):
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(notebook([source])))
    assert tool.has_controls(path) is expected


def test_every_explore_notebook_is_one_the_check_runs(tool):
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = "".join(
            "".join(c["source"])
            for c in json.loads(path.read_text())["cells"]
            if c["cell_type"] == "code"
        )
        if "explore(" in code or "FigureWidget" in code:
            assert tool.has_controls(path), path.name


@pytest.mark.parametrize(
    "args, message",
    [
        (["--timeout", "0", "notebooks/02_envelopes.ipynb"], "--timeout must be a positive"),
        (["README.md"], "not an .ipynb file"),
        (
            ["--root", "notebooks", "labs/source/00_setup/00_setup.ipynb"],
            "not inside the lab's root",
        ),
        (["--root", "nowhere/at/all", "--first-screens"], "--root nowhere/at/all: not a folder"),
        ([], "nothing to check"),
    ],
)
def test_bad_arguments_end_in_one_line_naming_them(args, message):
    done = processes.run(
        [sys.executable, str(TOOL), *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr


# ----------------------------------------------------------------------------- live

GOOD = [
    "import ipywidgets as widgets\nimport plotly.graph_objects as go\nimport zg.viz\nzg.viz.setup_notebook()",
    "go.Figure(go.Bar(x=['a', 'b'], y=[1, 2])).show()",
    "def view(n, kind, flip):\n"
    "    y = [n, n * 2, 3] if kind == 'up' else [3, n, 1]\n"
    "    return go.Figure(go.Bar(x=['a', 'b', 'c'], y=y[::-1] if flip else y))\n"
    "zg.viz.explore(view, n=widgets.IntSlider(value=2, min=1, max=9, description='n', continuous_update=False),\n"
    "               kind=widgets.Dropdown(options=['up', 'down'], value='up', description='kind'),\n"
    "               flip=widgets.Checkbox(value=False, description='flip'))",
]
BROKEN = [
    GOOD[0],
    "def view(level):\n"
    "    return go.Figure(go.Bar(x=['a'], y=[1]))   # ignores the control\n"
    "zg.viz.explore(view, level=widgets.FloatSlider(value=0.5, min=0, max=1, step=0.1,\n"
    "                                              description='stuck level', continuous_update=False))",
    "raise ValueError('deliberately broken')",
]


def chromium_or_skip(tool, require):
    require("playwright")
    if tool.find_chromium(None) is None:
        pytest.skip(
            "no chromium: Debian's package is what the live check drives (apt-get install chromium)"
        )


def run_tool(args, tmp_path, timeout=600, **env):
    out = tmp_path / "result.json"
    done = processes.run(
        [sys.executable, str(TOOL), "--json", str(out), "--timeout", "240", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **env),
    )
    assert out.exists(), done.stdout + done.stderr
    return done, json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_live_check_passes_a_good_notebook_and_names_what_is_broken(tool, require, tmp_path):
    chromium_or_skip(tool, require)
    root = tmp_path / "lab"
    root.mkdir()
    (root / "good.ipynb").write_text(json.dumps(notebook(GOOD)))
    (root / "broken.ipynb").write_text(json.dumps(notebook(BROKEN)))
    before = {p.name: p.read_bytes() for p in root.glob("*.ipynb")}
    done, result = run_tool(
        ["--root", str(root), str(root / "good.ipynb"), str(root / "broken.ipynb")], tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    good, broken = result["notebooks"]
    assert good["problems"] == [], good["problems"]
    assert good["figures"] == 2
    assert sorted((c["control"], c["kind"]) for c in good["controls"]) == [
        ("flip", "checkbox"),
        ("kind", "dropdown"),
        ("n", "slider"),
    ]
    assert all(c["before"] != c["after"] for c in good["controls"])
    joined = "\n".join(broken["problems"])
    assert "broken.ipynb, cell 1 (id c1" in joined and "control 'stuck level' (slider)" in joined
    assert "not drawn with new data" in joined
    assert "cell 2 (id c2" in joined and "error output ValueError: deliberately broken" in joined
    # The notebooks are as they were, and JupyterLab's checkpoints are not left behind.
    assert {p.name: p.read_bytes() for p in root.glob("*.ipynb")} == before
    assert not (root / ".ipynb_checkpoints").exists()
    assert "FAIL broken.ipynb" in done.stderr and "FAIL good.ipynb" not in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_first_screens_fail_without_an_exchange_and_name_it(tool, require, tmp_path):
    chromium_or_skip(tool, require)
    student = tmp_path / "notebooks"
    student.mkdir()
    (student / "intro.ipynb").write_text(json.dumps(notebook(["print('hello')"])))
    course = tmp_path / "labs"
    (course / "source" / "00_setup").mkdir(parents=True)
    shutil.copy(LABS / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copy(LABS / "source" / "00_setup" / "00_setup.ipynb", course / "source" / "00_setup")
    done, result = run_tool(
        ["--first-screens", "--root", str(student), "--instructor-root", str(course)],
        tmp_path,
        ZG_EXCHANGE=str(tmp_path / "no" / "exchange"),
    )
    student_screen, instructor_screen = result["screens"]
    # The student's screen has no nbgrader tool and no nbgrader line in its log.
    assert student_screen["problems"] == [], student_screen["problems"]
    assert all(student_screen[f"GET /{e}"] == 404 for e in ("formgrader", "assignments", "courses"))
    # The instructor's shows nbgrader's tools (the detector works) and, with no exchange, the
    # banner and the CRITICAL line are caught.
    assert instructor_screen["detector_broken"] == []
    joined = "\n".join(instructor_screen["problems"])
    assert "the formgrader shows a banner" in joined and "does not exist" in joined
    assert "server log: [C" in joined and "Unwritable directory" in joined
    assert instructor_screen["labs_listed"] == ["00_setup"]
    assert done.returncode == 1
    # What the formgrader and JupyterLab wrote into the course and the lab root is gone.
    assert not (course / "gradebook.db").exists()
    assert not (student / ".ipynb_checkpoints").exists()
    assert not (course / "source" / "00_setup" / ".ipynb_checkpoints").exists()
