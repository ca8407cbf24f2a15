"""The tools that grade the labs: the forked grader, the mutator, the equivalent-mutant list,
the alternative solutions, the score table and the one pass over all three (zg_course/grade.py,
zg_course/mutants.py, zg_course/right.py, zg_course/variants.py). The full run is `make labs-variants` in
.ci/run."""

from __future__ import annotations

import ast
import json
import re
import time
from pathlib import Path

import pytest

import zg_course.grade
import zg_course.mutants
import zg_course.right
import zg_course.variants
import zg_course.wrong

ROOT = Path(__file__).resolve().parents[2]
LABS = ROOT / "labs"


def _notebook(tmp_path: Path, cells: list[tuple[str, dict, str]]) -> Path:
    """A lab notebook of code cells: (grade_id, nbgrader metadata, source)."""
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"nbgrader": dict(meta, grade_id=gid)},
                "source": src,
                "outputs": [],
                "execution_count": None,
            }
            for gid, meta, src in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    folder = tmp_path / "toy"
    folder.mkdir()
    path = folder / "toy.ipynb"
    path.write_text(json.dumps(nb))
    return path


SOL = {"solution": True, "grade": False}
TEST = {"solution": False, "grade": True, "points": 2}

TOY = [
    ("setup", {}, "import inspect\nbase = 10\n"),
    (
        "add",
        SOL,
        "def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b\n    ### END SOLUTION\n",
    ),
    ("test_add", TEST, "assert add(2, 3) == 5\n"),
    ("test_add_source", TEST, "assert 'return' in inspect.getsource(add)\n"),
    (
        "scale",
        SOL,
        "def scale(x):\n    ### BEGIN SOLUTION\n    return x * base\n    ### END SOLUTION\n",
    ),
    ("test_scale", TEST, "assert scale(3) == 30\n"),
]


def test_the_forked_grader_grades_each_variant_alone_and_kills_one_that_never_ends(tmp_path):
    # the fork's mechanics, so the tamper scan is off (it would stop `import os` before a run)
    lab = zg_course.grade.Lab(_notebook(tmp_path, TOY), timeout=3, jobs=2, scan=False)
    assert lab.parts == {"add": ["test_add", "test_add_source"], "scale": ["test_scale"]}
    pidfile = tmp_path / "grandchild.pid"
    forever = (
        "import os\nif os.fork() == 0:\n"
        f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "    while True:\n        pass\nwhile True:\n    pass\n"
    )
    variants = [
        zg_course.grade.Variant("right", {"add": "def add(a, b):\n    return sum((a, b))\n"}),
        zg_course.grade.Variant("wrong", {"add": "def add(a, b):\n    return a - b\n"}),
        # rebinding a name the later cells use does not leak into the next variant
        zg_course.grade.Variant("rebinds", {"add": "base = 0\ndef add(a, b):\n    return a + b\n"}),
        zg_course.grade.Variant("forever", {"add": forever}, judged_on=["test_add"]),
    ]
    t = time.monotonic()
    out = lab.grade(variants)
    assert time.monotonic() - t < 30
    assert out["right"].full_marks and out["right"].earned == 6  # getsource works in a fork
    assert not out["wrong"].passed["test_add"] and out["wrong"].passed["test_scale"]
    assert out["wrong"].earned == 4
    assert out["rebinds"].passed == {"test_add": True, "test_add_source": True, "test_scale": False}
    assert out["forever"].timed_out and out["forever"].earned == 0
    assert set(out["forever"].points) == {"test_add"}
    # the instructor's run is untouched by the variants, and the child's grandchild is gone
    assert all(lab.base.values()) and len(lab.base) == 3
    grandchild = int(pidfile.read_text())
    for _ in range(50):
        if not _running(grandchild):
            break
        time.sleep(0.1)
    assert not _running(grandchild), "a process the variant started outlived its deadline"


def test_a_variant_that_passes_every_cell_records_no_failure(tmp_path):
    """A variant that passes every cell has no failure (it was once recorded as "the child
    died"); one whose process ends before it reports says so; a process pool the variant
    forks (its workers hold the report's pipe open) delays nothing."""
    lab = zg_course.grade.Lab(_notebook(tmp_path, TOY), timeout=60, jobs=1, scan=False)
    pool = (
        "import multiprocessing\n_pool = multiprocessing.get_context('fork').Pool(1)\n"
        "def add(a, b):\n    return _pool.apply(sum, ((a, b),))\n"
    )
    t = time.monotonic()
    out = lab.grade(
        [
            zg_course.grade.Variant("right", {"add": "def add(a, b):\n    return a + b\n"}),
            zg_course.grade.Variant("pool", {"add": pool}),
            zg_course.grade.Variant("exits", {"add": "import os\nos._exit(0)\n"}),
        ]
    )
    assert time.monotonic() - t < 30  # not the 60 s deadline: the pool's report was whole
    assert out["right"].full_marks and out["right"].failure == "", out["right"]
    assert out["pool"].full_marks and out["pool"].failure == "" and not out["pool"].timed_out
    assert out["exits"].earned == 0 and "ended before it reported" in out["exits"].failure


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_a_variant_must_name_a_real_solution_cell(tmp_path):
    lab = zg_course.grade.Lab(_notebook(tmp_path, TOY))
    with pytest.raises(ValueError, match="no solution cell 'test_add'"):
        lab.grade([zg_course.grade.Variant("x", {"test_add": "pass\n"})])
    with pytest.raises(ValueError, match="no graded cell 'nope'"):
        lab.grade([zg_course.grade.Variant("x", {"add": "pass\n"}, judged_on=["nope"])])


CELL = """def f(x, mask, n, p):
    ### BEGIN SOLUTION
    y = x[:n] + 1
    for i in range(n):
        y[i] *= 2
    p.copy_(torch.amax(y[~mask], dim=0))
    if n < 3 and mask.any():
        return None
    return y
    ### END SOLUTION
"""


def test_the_mutator_makes_every_kind_the_issue_names_and_only_inside_the_solution():
    mutants = zg_course.mutants.mutants_of("lab", "f", CELL)
    kinds = {m.op for m in mutants}
    assert kinds >= {
        "operator",
        "comparison",
        "boolean",
        "flip",
        "off-by-one",
        "drop",
        "out-of-place",
        "swap",
        "constant",
    }, kinds
    keys = [m.key for m in mutants]
    assert len(keys) == len(set(keys))
    after = {(m.op, m.before, m.after) for m in mutants}
    assert ("swap", "torch.amax", "torch.amin") in after
    assert ("flip", "~mask", "mask") in after
    assert ("out-of-place", "p.copy_", "p.copy") in after
    assert ("off-by-one", ":n", ":n + 1") in after
    assert ("off-by-one", "range(n)", "range(n - 1)") in after
    assert ("comparison", "n < 3", "n <= 3") in after
    for m in mutants:
        ast.parse(m.code)  # every mutant is valid Python
        assert m.code.startswith("def f(x, mask, n, p):")  # the signature is never mutated
    # nothing outside BEGIN/END SOLUTION: the scaffold's own code stays
    scaffold = "z = 0 + 1\n" + CELL
    assert not [m for m in zg_course.mutants.mutants_of("lab", "f", scaffold) if m.line == 1]


def test_every_listed_equivalent_mutant_is_made_from_its_lab():
    equivalent = zg_course.mutants.read_equivalent()
    assert equivalent, "labs/equivalent_mutants.toml lists the mutants no test can kill"
    made = {}
    for lab in {lab for lab, _ in equivalent}:
        path = zg_course.grade.lab_source(LABS, lab)
        made[lab] = {m.key for m in zg_course.mutants.lab_mutants(zg_course.grade.Lab(path))}
    for (lab, key), why in equivalent.items():
        assert key in made[lab], f"{lab}: {key} is no longer made"
        assert len(why) > 20, (lab, key)


def test_the_score_table_counts_the_mutants_the_labs_make_now():
    """docs/course/mutation_scores.md is written by `make labs-mutants`: its counts are the
    mutants the labs' solutions give today (a changed solution needs the table rewritten)."""
    doc = (ROOT / "docs" / "course" / "mutation_scores.md").read_text()
    rows = re.findall(
        r"^\| (\d\d_\w+) \| `(\w+)` \| (\d+) \| (\d+) \| (\d+) \| (\S+) \|$", doc, re.M
    )
    assert rows, "the score table is missing: run `make labs-mutants`"
    equivalent = zg_course.mutants.read_equivalent()
    seen = set()
    for lab, part, total, eq, killed, score in rows:
        lab_obj = zg_course.grade.Lab(zg_course.grade.lab_source(LABS, lab))
        made = [m for m in zg_course.mutants.lab_mutants(lab_obj) if m.cell == part]
        assert int(total) == len(made), (lab, part, total, len(made))
        assert int(eq) == sum((lab, m.key) in equivalent for m in made), (lab, part)
        if score.endswith("%"):
            assert int(killed) >= 0.9 * (int(total) - int(eq)), (lab, part)
        seen.add((lab, part))
    for lab in zg_course.mutants.labs(LABS, []):
        parts = zg_course.grade.Lab(zg_course.grade.lab_source(LABS, lab)).parts
        assert {(lab, p) for p, tests in parts.items() if tests} <= seen, lab


def test_every_alternative_solution_names_real_cells_and_every_lab_has_two():
    files = sorted((LABS / "right").glob("*.py"))
    per_lab = {}
    for path in files:
        right = zg_course.right.read_right(path)
        lab = zg_course.grade.Lab(zg_course.grade.lab_source(LABS, right["lab"]))
        lab.check_variant(zg_course.grade.Variant(right["name"], right["cells"]))
        assert right["how"], path.name
        per_lab[right["lab"]] = per_lab.get(right["lab"], 0) + 1
    for lab in sorted(p.name for p in (LABS / "source").iterdir() if p.is_dir()):
        assert per_lab.get(lab, 0) >= 2, f"{lab}: {per_lab.get(lab, 0)} alternative solutions"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make labs-variants" in ci  # labs-right and labs-mutants, with labs-wrong, in one pass
    assert "zg_course/variants.py" in (ROOT / "Makefile").read_text()


def _course(tmp_path: Path, wrong: dict[str, str], right: dict[str, str]) -> Path:
    """A course of the toy lab with wrong and right solutions for its ``add`` cell."""
    course = tmp_path / "course"
    (course / "wrong").mkdir(parents=True)
    (course / "right").mkdir()
    (course / "source").mkdir()
    _notebook(course / "source", TOY)
    for name, code in wrong.items():
        (course / "wrong" / f"{name}.py").write_text(
            f"# lab: toy\n# cell: add\n# why: {name}\n{code}"
        )
    for name, code in right.items():
        (course / "right" / f"{name}.py").write_text(
            f"# lab: toy\n# how: {name}\n# cell: add\n{code}"
        )
    return course


def test_one_pass_judges_wrong_right_and_mutants_as_the_three_tools_do(tmp_path, capsys):
    subtract = "def add(a, b):\n    return a - b\n"
    summed = "def add(a, b):\n    return sum((a, b))\n"
    course = _course(tmp_path, {"subtracts": subtract}, {"sums": summed, "sums_too": summed})
    args = ["--course", str(course)]
    assert zg_course.variants.main(args) == 0
    out = capsys.readouterr().out
    assert "zg_course.wrong: passed" in out and "zg_course.right: passed" in out
    assert "zg_course.mutants: passed" in out
    row = next(line for line in out.splitlines() if line.startswith("subtracts"))
    assert row.split()[2:4] == ["2", "4"]  # test_add fails; test_add_source passes
    # the same rows as each tool alone
    assert zg_course.wrong.main(["--course", str(course), "--wrong", str(course / "wrong")]) == 0
    alone = capsys.readouterr().out
    assert row in alone.splitlines()
    assert zg_course.right.main(["--course", str(course), "--right", str(course / "right")]) == 0
    alone = capsys.readouterr().out
    sums = [line for line in out.splitlines() if line.startswith("sums ")]
    assert sums and sums == [line for line in alone.splitlines() if line.startswith("sums ")]

    # a "wrong" solution that is right, and a "right" one that is wrong, each fail the pass
    course = _course(tmp_path / "b", {"not_wrong": summed}, {"sums": summed, "not_right": subtract})
    assert zg_course.variants.main(["--course", str(course)]) == 1
    out = capsys.readouterr().out
    assert "zg_course.wrong: FAILED" in out and "not_wrong (toy, cell add) earns 4 of 4" in out
    assert "zg_course.right: FAILED" in out and "not_right (toy) earns" in out
    assert "zg_course.mutants: passed" in out


def test_running_a_lab_alone_reports_each_graded_cell(tmp_path, capsys):
    """`python -m zg_course.grade NOTEBOOK`: what a GPU machine without Jupyter runs for Lab 8."""
    path = _notebook(tmp_path, TOY)
    assert zg_course.grade.main([str(path), "--json", str(tmp_path / "ok.json")]) == 0
    report = json.loads((tmp_path / "ok.json").read_text())
    assert [c["grade_id"] for c in report["cells"]] == ["test_add", "test_add_source", "test_scale"]
    assert all(c["passed"] for c in report["cells"])
    broken = [(g, m, s.replace("x * base", "x + base")) for g, m, s in TOY]
    (tmp_path / "b").mkdir()
    path = _notebook(tmp_path / "b", broken)
    assert zg_course.grade.main([str(path), "--json", str(tmp_path / "bad.json")]) == 1
    cells = json.loads((tmp_path / "bad.json").read_text())["cells"]
    assert [c["passed"] for c in cells] == [True, True, False]
    assert "AssertionError" in cells[2]["failure"]
    assert "toy: 4 of 6 points" in capsys.readouterr().out


def test_a_variant_deadline_of_its_own_and_the_mutants_deadline_per_lab(tmp_path):
    """Variant.timeout overrides the Lab's; a mutant's deadline is 3x the lab's measured grading
    time in labs/timings.json (at least 20 s), 60 s for a lab it does not time."""
    lab = zg_course.grade.Lab(_notebook(tmp_path, TOY), timeout=600, jobs=2)
    forever = "def add(a, b):\n    while True:\n        pass\n"
    t = time.monotonic()
    out = lab.grade([zg_course.grade.Variant("forever", {"add": forever}, timeout=2)])
    assert time.monotonic() - t < 60  # not the Lab's 600 s
    assert out["forever"].timed_out and "killed at the 2 s deadline" in out["forever"].failure
    timings = tmp_path / "timings.json"
    timings.write_text(json.dumps({"seconds": {"slow": 30.0, "quick": 2.0}}))
    assert zg_course.mutants.deadline("slow", timings) == 90.0
    assert zg_course.mutants.deadline("quick", timings) == 20.0
    assert zg_course.mutants.deadline("untimed", timings) == 60.0
    measured = json.loads((LABS / "timings.json").read_text())["seconds"]
    for lab_name in zg_course.mutants.labs(LABS, []):
        assert lab_name in measured, f"{lab_name} has no measured time in labs/timings.json"


def test_labs_wrong_keeps_what_it_graded_without_nbgrader_too(tmp_path, capsys):
    course = _course(tmp_path, {"subtracts": "def add(a, b):\n    return a - b\n"}, {})
    keep = tmp_path / "kept"
    code = zg_course.wrong.main(
        ["--course", str(course), "--wrong", str(course / "wrong"), "--keep", str(keep)]
    )
    assert code == 0, capsys.readouterr().out
    scores = json.loads((keep / "scores.json").read_text())
    assert scores["subtracts"]["earned"] == 2 and scores["subtracts"]["total"] == 4
    assert scores["subtracts"]["failure"].startswith("test_add")
    kept = json.loads((keep / "labs" / "submitted" / "subtracts" / "toy" / "toy.ipynb").read_text())
    assert any("a - b" in "".join(c["source"]) for c in kept["cells"])
    with pytest.raises(SystemExit, match="new or empty"):  # never over an earlier run
        zg_course.wrong.main(
            ["--course", str(course), "--wrong", str(course / "wrong"), "--keep", str(keep)]
        )


def test_labs_right_judges_only_the_labs_a_folder_has_solutions_of():
    files = sorted((LABS / "right").glob("*.py"))
    rights = [zg_course.right.read_right(p) for p in files]
    one_lab = rights[0]["lab"]
    mine = [r for r in rights if r["lab"] == one_lab]
    assert zg_course.right.missing_alternatives(LABS, mine, 2) == []  # the other labs: not judged
    found = zg_course.right.missing_alternatives(LABS, mine, len(mine) + 1)
    assert len(found) == 1 and found[0].startswith(one_lab)
    stray = [dict(mine[0], lab="99_no_such_lab")]
    assert "no such lab" in zg_course.right.missing_alternatives(LABS, mine + stray, 1)[0]
