"""Every graded part of Labs 1-9 declares the contract of each function it asks for, checks it
in a hidden cell with zg_course.contract, and gives those cells more than half of the part's points."""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

import pytest

import zg_course.contract_table

ROOT = Path(__file__).resolve().parents[2]

LABS = zg_course.contract_table.labs()


def test_the_course_has_nine_labs_with_contracts():
    assert [p.stem[:2] for p in LABS] == [f"{i:02d}" for i in range(1, 10)]


def _solution_functions(path: Path) -> dict[str, set[str]]:
    """Per part letter: the top-level functions its solution cells define (not _private)."""
    out: dict[str, set[str]] = {}
    part = None
    for cell in zg_course.contract_table.cells(path):
        source = "".join(cell["source"])
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "markdown" and zg_course.contract_table.PART.match(source):
            part = zg_course.contract_table.PART.match(source).group(1)
        if cell["cell_type"] == "code" and meta.get("solution") and part:
            names = {
                n.name
                for n in ast.parse(source).body
                if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
            }
            out.setdefault(part, set()).update(names)
    return out


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.stem)
def test_every_graded_function_declares_its_contract(path):
    functions = _solution_functions(path)
    lab_number = int(path.stem[:2])
    for part in zg_course.contract_table.parts_of(path):
        declared = {c.function: (gid, c) for gid, c in part["contracts"]}
        wanted = functions.get(part["part"], set())
        assert wanted, f"{path.stem} Part {part['part']}: no graded function found"
        missing = sorted(wanted - set(declared))
        assert not missing, f"{path.stem} Part {part['part']}: no contract cell for {missing}"
        for name, (variable, contract) in declared.items():
            assert variable in (f"contract_{name}", f"contract_{name.rstrip('_')}"), (
                f"{path.stem}: {variable} holds {name}'s contract"
            )
            assert contract.part.startswith(f"Lab {lab_number} Part {part['part']}"), (
                f"{path.stem} {variable}: part={contract.part!r}, expected 'Lab {lab_number} Part {part['part']}'"
            )


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.stem)
def test_each_contract_is_checked_in_a_hidden_cell(path):
    """Each declared contract is used by a hidden graded cell that calls zg_course.contract.check,
    and that cell is one the points count (its grade_id ends in _contract)."""
    hidden = {
        c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
        for c in zg_course.contract_table.cells(path)
        if c.get("metadata", {}).get("nbgrader", {}).get("grade")
        and "### BEGIN HIDDEN TESTS" in "".join(c["source"])
    }
    for part in zg_course.contract_table.parts_of(path):
        for variable, _contract in part["contracts"]:
            users = [
                gid
                for gid, code in hidden.items()
                if "zg_course.contract.check(" in code and re.search(rf"\b{variable}\b", code)
            ]
            assert users, (
                f"{path.stem}: no hidden cell checks {variable} with zg_course.contract.check"
            )
            assert all(gid.endswith("_contract") for gid in users), (path.stem, variable, users)


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.stem)
def test_the_contract_holds_more_than_half_of_every_part(path):
    """A submission that breaks any clause fails the contract cell, so it loses more than half
    of its part, whatever the visible tests say."""
    for part in zg_course.contract_table.parts_of(path):
        total = sum(g["points"] for g in part["graded"])
        held = sum(g["points"] for g in part["graded"] if g["contract"])
        assert held > total / 2, (
            f"{path.stem} Part {part['part']}: the contract cells hold {held:g} of {total:g} points"
        )


def test_the_readme_table_is_current():
    assert zg_course.contract_table.main(["--check", str(ROOT / "labs" / "README.md")]) == 0


def test_the_tool_reads_only_literals(tmp_path):
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["## Part A · x (2 points)"]},
            {
                "cell_type": "code",
                "metadata": {"nbgrader": {"grade": False, "grade_id": "contract_f"}},
                "source": ["contract_f = zg_course.contract.Contract('f', part=PART)"],
            },
        ]
    }
    (tmp_path / "x.ipynb").write_text(json.dumps(nb))
    with pytest.raises(SystemExit, match="part= is not a literal"):
        zg_course.contract_table.parts_of(tmp_path / "x.ipynb")


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.stem)
def test_no_hidden_test_fails_without_saying_why(path):
    """Every assert in a hidden test carries a message (the property, the input, what was
    expected, what came back): a bare AssertionError teaches a student nothing."""
    for cell in zg_course.contract_table.cells(path):
        source = "".join(cell["source"])
        if "### BEGIN HIDDEN TESTS" not in source:
            continue
        hidden = source.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN TESTS", 1)[0]
        gid = cell["metadata"]["nbgrader"]["grade_id"]
        bare = [
            node.lineno
            for node in ast.walk(ast.parse(textwrap.dedent(hidden)))
            if isinstance(node, ast.Assert) and node.msg is None
        ]
        assert not bare, f"{path.stem} {gid}: an assert without a message at hidden line(s) {bare}"
