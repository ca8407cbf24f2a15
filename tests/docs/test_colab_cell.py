"""tools/colab_cell.py: the Colab install cell a lab notebook opens with. It is inserted
idempotently into a copy, does nothing off Colab, and on Colab (simulated: a fake
``google.colab`` module, a throwaway venv that sees this environment's torch as Colab's
preinstalled one, pip offline) installs the kit's wheel so that ``import zg`` works."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import site
import sys
import venv
from pathlib import Path

import processes
import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "labs" / "source" / "00_setup" / "00_setup.ipynb"


def import_tool(name):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(ROOT / "tools"))


@pytest.fixture(scope="module")
def tool():
    return import_tool("colab_cell")


def inserted(tool, tmp_path, *args):
    assert tool.main(["--out", str(tmp_path), *args, str(LAB)]) == 0
    return tmp_path / LAB.parent.name / LAB.name


def install_source(path: Path) -> str:
    (cell,) = [c for c in json.loads(path.read_text())["cells"] if c["id"] == "colab-install"]
    return "".join(cell["source"])


def test_the_cell_goes_into_a_copy_first_among_code_cells_and_again_changes_nothing(tool, tmp_path):
    # the lab without the cell: the labs in labs/source carry it already
    bare = tmp_path / "bare"
    assert tool.main(["--out", str(bare), "--remove", str(LAB)]) == 0
    bare_lab = bare / LAB.parent.name / LAB.name
    original = bare_lab.read_bytes()
    assert all(c["id"] != "colab-install" for c in json.loads(original)["cells"])
    before = LAB.read_bytes()
    assert tool.main(["--out", str(tmp_path / "with"), str(bare_lab)]) == 0
    copy = tmp_path / "with" / LAB.parent.name / LAB.name
    assert LAB.read_bytes() == before, "--out must leave the lab itself alone"
    cells = json.loads(copy.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code[0]["id"] == "colab-install" and cells[0]["cell_type"] == "markdown"
    assert code[0]["outputs"] == [] and code[0]["execution_count"] is None
    nbgrader = code[0]["metadata"]["nbgrader"]  # locked: autograde runs the instructor's cell
    assert nbgrader["locked"] and not nbgrader["grade"] and not nbgrader["solution"]
    assert [c["id"] for c in cells if c["id"] != "colab-install"] == [
        c["id"] for c in json.loads(original)["cells"]
    ]
    first = copy.read_bytes()
    tool.main([str(copy)])  # again, in place: the same bytes
    assert copy.read_bytes() == first
    tool.main(["--remove", str(copy)])
    assert copy.read_bytes() == original, "--remove must give back the lab byte for byte"


def test_every_lab_opens_with_the_current_colab_cell(tool, tmp_path):
    """labs/source carries the cell, at the kit's version: running the tool again changes
    nothing (after a version bump, run `tools/colab_cell.py labs/source/*/*.ipynb`)."""
    labs = sorted((ROOT / "labs" / "source").glob("*/*.ipynb"))
    assert len(labs) >= 10
    assert tool.main(["--out", str(tmp_path), *map(str, labs)]) == 0
    for lab in labs:
        again = tmp_path / lab.parent.name / lab.name
        assert again.read_bytes() == lab.read_bytes(), f"{lab.name}: run tools/colab_cell.py on it"


def test_the_cell_records_the_kit_version_and_what_to_install(tool, tmp_path):
    import zg

    source = install_source(
        inserted(tool, tmp_path, "--install", "zg @ https://x.org/zg-{version}.whl")
    )
    compile(source, "colab-install", "exec")
    assert f'ZG_VERSION = "{zg.__version__}"' in source
    assert f'ZG_INSTALL = "zg @ https://x.org/zg-{zg.__version__}.whl"' in source
    assert 'ZG_INSTALL = ""' in install_source(inserted(tool, tmp_path / "default"))


def test_the_badge_links_the_released_notebook_on_colab(tool, tmp_path):
    import zg

    url = "https://github.com/org/course/blob/v{version}/{lab}/{lab}.ipynb"
    cells = json.loads(inserted(tool, tmp_path, "--badge", url).read_text())["cells"]
    assert [c["id"] for c in cells[1:3]] == ["colab-badge", "colab-install"]
    badge = "".join(cells[1]["source"])
    assert (
        f"https://colab.research.google.com/github/org/course/blob/v{zg.__version__}/"
        "00_setup/00_setup.ipynb" in badge
    )
    assert "<img" not in badge and "](" in badge  # a link, nothing loaded from the network
    with pytest.raises(SystemExit):
        tool.main(["--out", str(tmp_path), "--badge", "https://github.com/org/c.ipynb", str(LAB)])


def test_off_colab_the_cell_does_nothing(tool, tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    source = install_source(inserted(tool, tmp_path))
    namespace, printed = {}, io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "colab-install", "exec"), namespace)
    assert printed.getvalue() == ""
    assert set(namespace) - {"__builtins__"} == {"sys", "ZG_VERSION", "ZG_INSTALL"}


@pytest.mark.slow
def test_a_lab_with_the_cell_runs_in_a_kernel_off_colab(tool, tmp_path, require):
    """The whole of Lab 0 with the cell, executed as nbgrader would: every cell runs and the
    Colab cell prints nothing."""
    nbformat = require("nbformat")
    nbclient = require("nbclient")
    copy = inserted(tool, tmp_path)
    nb = nbformat.read(copy, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    (cell,) = [c for c in nb.cells if c.get("id") == "colab-install"]
    assert cell.outputs == []


SIMULATED_COLAB = """
import sys, types
sys.modules["google"] = types.ModuleType("google")
sys.modules["google.colab"] = types.ModuleType("google.colab")
"""
AFTERWARDS = """
import zg
print("zg", zg.__version__, zg.__file__, zg.datasets.load("cora").num_nodes)
"""


@pytest.mark.slow
def test_on_colab_the_cell_installs_the_wheel_and_zg_imports(tool, tmp_path):
    """A stock Python with a recent torch, as on Colab: a fresh venv of this interpreter's
    Python that sees this environment's packages (torch, numpy, pymetis, ...), but not zg,
    through a .pth line naming a folder of links to them. pip runs offline (--no-index): the
    cell installs the student distribution's wheel, uploaded to the working folder
    (ZG_INSTALL empty) or named by ``--install``, and zg then imports from the venv's own
    site-packages."""
    import zg

    wheel = import_tool("student_dist").build_wheel(tmp_path / "wheel")
    preinstalled = tmp_path / "preinstalled"  # what Colab brings: everything here but zg
    preinstalled.mkdir()
    for folder in map(Path, site.getsitepackages()):
        for entry in folder.iterdir() if folder.is_dir() else []:
            name = entry.name.lower()
            skip = name.startswith(("zg", "__editable__"))
            if not skip and not name.endswith(".pth") and not (preinstalled / entry.name).exists():
                (preinstalled / entry.name).symlink_to(entry)
    env_dir = tmp_path / "colab"
    venv.EnvBuilder().create(env_dir)  # pip too comes from the links, as Colab has it
    python = env_dir / "bin" / "python"
    own_site = Path(
        processes.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (own_site / "preinstalled.pth").write_text(f"{preinstalled}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_FIND_LINKS")}
    env["PIP_NO_INDEX"] = "1"
    work = tmp_path / "content"  # Colab's working folder
    work.mkdir()

    def run(code):
        return processes.run(
            [python, "-c", code], capture_output=True, text=True, cwd=work, env=env, timeout=600
        )

    before = run("import torch, numpy, pymetis\nimport zg")
    assert before.returncode != 0 and "No module named 'zg'" in before.stderr, before.stderr

    # ZG_INSTALL empty: the wheel the student uploaded to the session.
    shutil.copy(wheel, work / wheel.name)
    cell = install_source(inserted(tool, tmp_path / "uploaded"))
    done = run(SIMULATED_COLAB + cell + AFTERWARDS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"installed zg {zg.__version__}" in done.stdout, done.stdout
    assert f"zg {zg.__version__} {own_site}" in done.stdout and done.stdout.endswith(" 2708\n")
    (work / wheel.name).unlink()

    # Without a wheel and without ZG_INSTALL: one clear error.
    processes.run([python, "-m", "pip", "uninstall", "-y", "-q", "zg"], env=env, check=True)
    missing = run(SIMULATED_COLAB + cell)
    assert missing.returncode != 0 and "upload zg-" in missing.stderr

    # --install: a requirement naming the wheel (here a path; a URL for a course).
    cell = install_source(inserted(tool, tmp_path / "named", "--install", str(wheel)))
    done = run(SIMULATED_COLAB + cell + AFTERWARDS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"zg {zg.__version__} {own_site}" in done.stdout


def test_every_lab_that_has_the_cell_installs_the_version_it_grades_against():
    """After a version bump, `python tools/colab_cell.py ...` must run again (docs/install.md):
    a stale cell would install a kit that the lab's own setup cell then refuses."""
    import zg

    for path in sorted((ROOT / "labs" / "source").glob("*/*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for cell in cells:
            if cell.get("id") == "colab-install":
                assert f'ZG_VERSION = "{zg.__version__}"' in "".join(cell["source"]), (
                    f"{path.name}: its Colab cell installs another zg than {zg.__version__}; "
                    "run tools/colab_cell.py on it again"
                )
