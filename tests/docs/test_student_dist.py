"""`make student-dist`: what students get holds the wheel (with Cora) and every released lab,
and no solution, hidden test, model answer or instructor file (tools/student_dist.py)."""

from __future__ import annotations

import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tool():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import student_dist
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return student_dist


@pytest.fixture(scope="module")
def built(tool, tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    assert tool.main(["--out", str(out)]) == 0
    return out / f"zg-course-{tool.kit_version()}"


def test_the_distribution_holds_the_wheel_and_every_released_lab(tool, built):
    import zg

    assert tool.kit_version() == zg.__version__
    labs = sorted(p.name for p in (ROOT / "labs" / "source").iterdir() if p.is_dir())
    assert sorted(p.name for p in (built / "labs").iterdir()) == labs
    manifest = json.loads((built / "MANIFEST.json").read_text())
    assert manifest["zg_version"] == zg.__version__ and manifest["labs"] == labs
    (wheel,) = built.glob("wheels/zg-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        cora = whl.read("zg/_bundled/cora.npz")
        names = set(whl.namelist())
    assert cora == (ROOT / "data" / "cora.npz").read_bytes()
    # The released labs import the course package (zg_course): every module they name is in
    # the wheel, so a student's kernel runs them from the wheel alone.
    imported = set()
    for nb in built.glob("labs/*/*.ipynb"):
        imported |= set(re.findall(r"\b(zg_course(?:\.\w+)*)", nb.read_text()))
    modules = {f"zg_course/{m.split('.')[1]}.py" for m in imported if "." in m}
    assert {"zg_course/labs.py", "zg_course/contract.py"} <= modules
    assert modules - names == set(), f"the labs import course modules the wheel lacks: {imported}"
    assert set(tool.COURSE_MODULES) <= names
    assert (built.parent / f"{built.name}.zip").is_file()
    assert tool.problems_in(built, zg.__version__) == []


@pytest.mark.parametrize(
    "planted",
    ["### BEGIN HIDDEN TESTS", "**Model answer.**", "### BEGIN SOLUTION"],
)
def test_the_check_finds_an_answer_left_in(tool, built, tmp_path, planted):
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    nb = next((copy / "labs").glob("04_*/*.ipynb"))
    nb.write_text(nb.read_text().replace("Lab 4", f"Lab 4 {planted}", 1))
    found = tool.problems_in(copy, tool.kit_version())
    marker = next(t for t in tool.FORBIDDEN_TEXT if t in planted)
    assert any(f"holds {marker!r}" in p for p in found), found
    (copy / "labs" / "source").mkdir()
    (copy / "labs" / "source" / "x.ipynb").write_text("{}")
    assert any("an instructor's file" in p for p in tool.problems_in(copy, tool.kit_version()))
