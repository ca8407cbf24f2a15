"""Every documented target works from a fresh clone: `make student-dist` makes its own output
folder, `make docs` builds without the notebook reports (and says so), and the install routes
the README and docs/install.md name exist in the Makefile and requirements/."""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import build_docs  # noqa: E402
import student_dist  # noqa: E402


def test_student_dist_makes_its_missing_output_folder(tmp_path, monkeypatch, capsys):
    """dist/student/ does not exist in a fresh clone: the tool creates it (the wheel and the
    labs are stand-ins here; test_student_dist.py builds the real ones)."""

    def fake_wheel(folder: Path) -> Path:
        folder.mkdir(parents=True)
        wheel = folder / f"zg-{student_dist.kit_version()}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as whl:
            whl.writestr("zg/_bundled/cora.npz", b"")
            for module in student_dist.COURSE_MODULES:  # what the released labs import
                whl.writestr(module, b"")
        return wheel

    monkeypatch.setattr(student_dist, "build_wheel", fake_wheel)
    monkeypatch.setattr(student_dist, "release_labs", lambda into: [])
    out = tmp_path / "dist" / "student"  # neither folder exists
    assert student_dist.main(["--out", str(out)]) == 0, capsys.readouterr()
    assert (out / f"zg-course-{student_dist.kit_version()}.zip").is_file()


def test_the_docs_stage_without_reports_and_say_so(tmp_path, capsys):
    """No reports/ (a fresh clone): staging goes on, the Notebooks page names `make report`,
    and stderr carries the note; --require-reports (.ci/run) still fails."""
    empty = tmp_path / "no_reports"
    stage = tmp_path / "stage"
    args = ["--reports", str(empty), "--stage", str(stage), "--stage-only"]
    assert build_docs.main(args) == 0
    assert "no executed notebook" in capsys.readouterr().err
    page = (stage / "notebooks" / "index.md").read_text()
    assert "No executed notebook" in page and "make report ZG_SCALE=small" in page
    assert build_docs.main([*args, "--require-reports"]) == 1
    assert "make report ZG_SCALE=small" in capsys.readouterr().err


MAKEFILE = (ROOT / "Makefile").read_text()
README = (ROOT / "README.md").read_text()
INSTALL = (ROOT / "docs" / "install.md").read_text()


def target_recipe(target: str) -> str:
    rules = re.findall(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)*)", MAKEFILE, re.M)
    assert rules, f"the Makefile has no target {target}"
    return "".join(rules)


def test_the_light_route_is_installed_from_the_repository():
    light = (ROOT / "requirements" / "light.txt").read_text()
    pins = dict(
        re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line).groups()
        for line in light.splitlines()
        if re.match(r"[A-Za-z0-9_.-]+==", line)
    )
    modern = (ROOT / "requirements" / "modern.txt").read_text()
    assert f"torch=={pins['torch']}" in modern, "the light torch is the modern env's torch"
    for extra in ("jupyterlab", "ipywidgets", "plotly", "tqdm"):
        assert extra in pins, f"requirements/light.txt misses the lab extra {extra}"
    for heavy in ("dgl", "pytest", "ruff", "nbgrader", "mkdocs", "hypothesis", "nbval"):
        assert not re.search(rf"^{heavy}\b", light, re.M), f"{heavy} is not for students"
    assert "requirements/light.txt" in MAKEFILE
    assert "env-light" in target_recipe("light-check")
    assert "build_report.py" in target_recipe("light-check")


@pytest.mark.parametrize("text", [README, INSTALL], ids=["README", "install"])
def test_the_install_routes_are_documented(text):
    for command in ("make env-light", "make env", "make test-fast", "make lab"):
        assert command in text
    assert "download.pytorch.org/whl/cpu" in text


def test_ci_runs_the_light_check_and_the_docs_with_their_reports():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make light-check\b", ci, re.M)
    assert re.search(r"^make docs DOCS_ARGS=--require-reports$", ci, re.M)
