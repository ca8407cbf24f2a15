"""The pins live in requirements/reference.txt; environment.yml and pyproject must agree with it."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def requirement_lines(text):
    return [ln.split("#")[0].strip() for ln in text.splitlines() if ln.split("#")[0].strip()]


def name_of(spec):
    return re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower().replace("_", "-")


def reference_pins():
    return requirement_lines((ROOT / "requirements" / "reference.txt").read_text())


def conda_pins():
    lines, inside = [], False
    for ln in (ROOT / "environment.yml").read_text().splitlines():
        if re.match(r"^\s*- pip:\s*$", ln):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s{6,}- (.+?)\s*$", ln)
            if not m:
                break
            lines.append(m.group(1))
    return lines


def test_environment_yml_repeats_the_reference_pins_exactly():
    assert sorted(conda_pins()) == sorted(reference_pins())
    assert "python=3.11" in (ROOT / "environment.yml").read_text()


def test_the_required_pins_are_there():
    pins = set(reference_pins())
    for spec in ("torch==2.2.1", "dgl==2.1.0", "torchdata==0.7.1", "setuptools<70"):
        assert spec in pins
    numpy = [p for p in pins if name_of(p) == "numpy"]
    assert numpy and re.match(r"numpy==1\.", numpy[0]), "DGL 2.1 needs numpy<2"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11+")
def test_every_pyproject_dependency_is_pinned_in_the_reference_env():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {name_of(p) for p in reference_pins()}
    wanted = list(project["dependencies"])
    for _extra, deps in project["optional-dependencies"].items():
        wanted += deps
    missing = sorted({name_of(d) for d in wanted} - pinned)
    assert not missing, (
        f"pyproject asks for {missing}, which requirements/reference.txt does not pin"
    )
    assert set(project["optional-dependencies"]) >= {"dgl", "lab", "grappa", "dev"}


def test_makefile_installs_from_the_single_pin_file():
    makefile = (ROOT / "Makefile").read_text()
    assert "requirements/reference.txt" in makefile and "requirements/modern.txt" in makefile
    assert "torch==2.13.0" in (ROOT / "requirements" / "modern.txt").read_text()
    assert "dgl" not in {
        name_of(p) for p in requirement_lines((ROOT / "requirements" / "modern.txt").read_text())
    }
