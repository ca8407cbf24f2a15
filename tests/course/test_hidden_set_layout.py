"""A hidden set is not tied to cell names (issue 59, item 5): a wrong solution names its lab, its
solution cell and, where that cell defines several functions, the function it gets wrong; the
part it is judged on is read from the lab's source notebook as it is now
(zg_course.grade.part_of). Reorganising a lab (its test cells renamed and moved, cells
inserted) leaves every wrong and right solution judged on the same tests with the same scores."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

import zg_course.grade
import zg_course.right
import zg_course.wrong

ROOT = Path(__file__).resolve().parents[2]
LABS = ROOT / "labs"
LAB3 = "03_sizing_an_envelope"  # its cell `overflow` defines overflow_rate and smallest_margin


def _old_part(path: Path) -> list[str] | None:
    lines = [x for x in path.read_text().splitlines() if x.startswith("# part:")]
    return lines[0].split(":", 1)[1].split() if lines else None


def test_no_wrong_solution_lists_its_test_cells_and_each_part_is_the_notebooks():
    """Every file of labs/wrong/ names no test cell; where its solution cell defines several
    functions it names one, and its part is that function's tests only."""
    several = 0
    for path in sorted((LABS / "wrong").glob("*.py")):
        assert _old_part(path) is None, path.name
        wrong = zg_course.wrong.read_wrong(path)
        cells = zg_course.grade.code_cells(zg_course.grade.lab_source(LABS, wrong["lab"]))
        whole = zg_course.grade.parts(cells)[wrong["cell"]]
        assert wrong["part"] and set(wrong["part"]) <= set(whole), path.name
        if wrong["function"] is not None:
            several += 1
            assert set(wrong["part"]) < set(whole), path.name  # a function's share of the part
            for gid in wrong["part"]:  # each test of its part names the function
                source = next(c.source for c in cells if c.grade_id == gid)
                named = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
                assert wrong["function"] in named, (path.name, gid)
        else:
            assert wrong["part"] == whole, path.name
    assert several >= 14  # Lab 3's overflow_rate / smallest_margin, Lab 9's two


def test_the_part_of_a_function_leaves_out_the_tests_of_the_functions_that_call_it():
    cells = zg_course.grade.code_cells(zg_course.grade.lab_source(LABS, LAB3))
    rate = zg_course.grade.part_of(cells, "overflow", "overflow_rate")
    margin = zg_course.grade.part_of(cells, "overflow", "smallest_margin")
    # test_smallest_margin calls overflow_rate too, but smallest_margin calls overflow_rate
    assert rate == ["test_overflow_rate", "test_overflow_rate_contract"]
    assert margin == [
        "test_smallest_margin",
        "test_smallest_margin_hidden",
        "test_smallest_margin_contract",
    ]
    assert zg_course.grade.part_of(cells, "overflow") == rate + margin
    with pytest.raises(ValueError, match="no function 'overflow_rat'"):
        zg_course.grade.part_of(cells, "overflow", "overflow_rate"[:-1])
    with pytest.raises(ValueError, match="no solution cell 'test_overflow_rate'"):
        zg_course.grade.part_of(cells, "test_overflow_rate")


def test_a_contract_cell_counts_for_every_function_it_checks():
    """Lab 6's hidden contract cell checks the contracts of stats_of, batch_scales and
    shrink_scales: it is part of each, although shrink_scales calls batch_scales (a test that
    only calls a function through another is still the other's)."""
    cells = zg_course.grade.code_cells(zg_course.grade.lab_source(LABS, "06_estimator_weights"))
    batch = zg_course.grade.part_of(cells, "scales", "batch_scales")
    shrink = zg_course.grade.part_of(cells, "scales", "shrink_scales")
    assert batch == ["test_batch_scales", "test_scales_contract"]
    assert shrink == ["test_shrink_scales", "test_scales_contract"]


def _reorganised(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the course whose Lab 3 is reorganised: every graded test cell renamed, Part B's
    first test moved to the end of its part, a markdown and a code cell inserted after the
    `overflow` solution cell. Returns the course and {new grade_id: old grade_id}."""
    course = tmp_path / "labs"
    shutil.copytree(LABS / "source" / LAB3, course / "source" / LAB3)
    path = course / "source" / LAB3 / f"{LAB3}.ipynb"
    nb = json.loads(path.read_text())
    renamed = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and meta.get("grade") and not meta.get("solution"):
            new = "check_" + meta["grade_id"].removeprefix("test_") + "_v2"
            renamed[new] = meta["grade_id"]
            meta["grade_id"] = new
    cells = nb["cells"]
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells]
    moved = cells.pop(ids.index("check_overflow_rate_v2"))
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells]
    cells.insert(ids.index("check_smallest_margin_contract_v2") + 1, moved)
    after = ids.index("overflow") + 1
    cells[after:after] = [
        {"cell_type": "markdown", "metadata": {}, "source": ["A note put in later.\n"]},
        {
            "cell_type": "code",
            "metadata": {},
            "source": ["inserted_later = sorted([3, 1, 2])\n"],
            "outputs": [],
            "execution_count": None,
        },
    ]
    path.write_text(json.dumps(nb, indent=1))
    return course, renamed


def test_an_old_part_line_is_checked_against_the_notebook_and_the_notebooks_part_wins(
    tmp_path, capsys
):
    course, renamed = _reorganised(tmp_path)
    old = tmp_path / "old_layout.py"
    old.write_text(
        "# lab: 03_sizing_an_envelope\n# cell: overflow\n# function: overflow_rate\n"
        "# part: test_overflow_rate test_overflow_rate_contract\n# why: counts in ints\n"
        "def overflow_rate(sizes, counts):\n    return 0\n"
    )
    wrong = zg_course.wrong.read_wrong(old, LABS)  # the layout it was written against: silent
    assert wrong["part"] == ["test_overflow_rate", "test_overflow_rate_contract"]
    assert capsys.readouterr().err == ""
    wrong = zg_course.wrong.read_wrong(old, course)
    assert [renamed[g] for g in wrong["part"]] == [
        "test_overflow_rate_contract",
        "test_overflow_rate",
    ]
    err = capsys.readouterr().err
    assert "its '# part:' line names ['test_overflow_rate', 'test_overflow_rate_contract']" in err
    assert "graded on the latter" in err and "check_overflow_rate_v2" in err
    for bad, match in (
        ("# function: overflow_rat\n", "defines no function 'overflow_rat'"),
        ("# function: overflow_rate\n# cell: nope\n", "no solution cell 'nope'"),
    ):
        old.write_text(f"# lab: 03_sizing_an_envelope\n# cell: overflow\n{bad}# why: x\npass\n")
        with pytest.raises(SystemExit, match=match):
            zg_course.wrong.read_wrong(old, course)


@pytest.mark.slow
def test_a_reorganised_lab_grades_the_same_files_on_the_same_tests_with_the_same_scores(
    tmp_path,
):
    """Lab 3's wrong and right solutions, graded on the lab as it is and on a reorganised copy
    (tests renamed, one moved, cells inserted): the same tests, the same points each."""
    course, renamed = _reorganised(tmp_path)
    wrong_files = sorted((LABS / "wrong").glob("lab3_*.py"))
    rights = [zg_course.right.read_right(p) for p in sorted((LABS / "right").glob("lab3_*.py"))[:2]]
    results = {}
    for where in (LABS, course):
        wrongs = [zg_course.wrong.read_wrong(p, where) for p in wrong_files]
        lab = zg_course.grade.Lab(zg_course.grade.lab_source(where, LAB3), jobs=2)
        outcomes = lab.grade(
            zg_course.wrong.variants(lab, wrongs) + zg_course.right.variants(lab, rights)
        )
        back = (lambda g: renamed.get(g, g)) if where == course else (lambda g: g)
        assert all(lab.base.values()) and len(lab.base) == 11, lab.base_failures
        results[where] = {
            key: (
                {back(g): o.passed[g] for g in o.points},
                o.earned,
                o.total,
            )
            for key, o in outcomes.items()
        }
        results[where, "parts"] = {w["name"]: sorted(back(g) for g in w["part"]) for w in wrongs}
    assert results[LABS, "parts"] == results[course, "parts"]
    assert results[LABS] == results[course]
    for w in wrong_files:  # and each still loses at least half its part
        _, earned, total = results[course][w.stem]
        assert total > 0 and earned <= total / 2, (w.stem, earned, total)
    for r in rights:
        passed, earned, total = results[course][r["name"]]
        assert earned == total > 0 and all(passed.values()), r["name"]
