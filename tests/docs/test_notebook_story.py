"""The notebooks tell the story their measurements tell, in a shape a reader can follow.

Rules, checked on every notebook in notebooks/ (cells read as stored JSON):

* Narrative stays short: no markdown cell is longer than ``MAX_WORDS`` words (a word has a
  letter or a digit: a table's pipes are not words).
* A host sync is not called "one such stall": the committed GPU run shows that without capture
  the launches, not the syncs, are the host's cost (a sync matters because it forbids capture).
* The fused CPU kernel is named: a notebook whose code reads a host-sync count (``SyncAudit``,
  ``host_syncs``) mentions "numba" in its prose, since the compiled kernel runs below the
  dispatcher where the audit cannot see.
* No measured number is typed into prose: no markdown cell holds a ratio with decimals
  ("1.62x"), a spread ("± 0.05"), a bare decimal with two or more places ("0.733") or a
  "measured N s" running time (inline code excepted, and a number right after "at least",
  "within", "default", "factor", ... is a criterion or a setting). Code cells render those from
  bench/results/ or from what the notebook just measured.
* Checks are grouped, not scattered through the narrative. A *check cell* is a code cell whose
  first line starts with ``# Checks``. Every ``assert`` lives in a check cell and carries a
  message; a check cell shows nothing (no ``display(...)``, no ``zg.viz`` figure) and at least
  half of its top-level statements are checks (an ``assert``, a loop or ``if`` holding asserts,
  or a ``print`` of what was checked). A section (the cells from one ``#`` or ``##`` heading to
  the next) has at most one check cell, and it is the section's last code cell.
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_WORDS = 260
CHECK_MARK = "# Checks"
TYPED_NUMBER = re.compile(
    r"(?<![\w.])\d+\.\d+\s?x\b"  # a ratio with decimals: 1.62x
    r"|±\s?\d"  # a spread: ± 0.05
    r"|(?<![\w.\-/])\d\.\d{2,}\b(?!\.\d)"  # a bare decimal with two or more places: 0.733
    r"|\bmeasured (?:about )?\d[\d,.]*\s?s\b"  # a typed running time: measured 250 s
)
# A number right after one of these words is a criterion or a setting, not a measurement.
SETTING = re.compile(
    r"(?:at least|at most|within|factor|default|defaults|rate|lr|threshold|tolerance|grows? by)"
    r"[^.\n]{0,20}$",
    re.IGNORECASE,
)
WORD = re.compile(r"\w")
INLINE_CODE = re.compile(r"`[^`\n]*`|\]\([^)]*\)|https?://\S+")
HEADING = re.compile(r"^#{1,2} ")


def cells(nb: dict) -> list[tuple[str, str]]:
    """(cell_type, source) of every cell."""
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def words(text: str) -> int:
    """Words of prose: whitespace-separated tokens with a letter or digit (table pipes are not)."""
    return sum(1 for token in text.split() if WORD.search(token))


def long_cells(nb: dict) -> list[str]:
    return [
        f"markdown cell [{i}]: {words(src)} words"
        for i, (kind, src) in enumerate(cells(nb))
        if kind == "markdown" and words(src) > MAX_WORDS
    ]


def stall_cells(nb: dict) -> list[str]:
    return [
        f"markdown cell [{i}]"
        for i, (kind, src) in enumerate(cells(nb))
        if kind == "markdown" and "one such stall" in src.lower()
    ]


def unnamed_kernel(nb: dict) -> list[str]:
    code = "\n".join(src for kind, src in cells(nb) if kind == "code")
    prose = "\n".join(src for kind, src in cells(nb) if kind == "markdown").lower()
    if ("SyncAudit" in code or "host_syncs" in code) and "numba" not in prose:
        return ["reads a host-sync count but its prose never names the numba kernel"]
    return []


def typed_numbers(nb: dict) -> list[str]:
    found = []
    for i, (kind, src) in enumerate(cells(nb)):
        if kind != "markdown":
            continue
        prose = INLINE_CODE.sub(" ", src)
        for match in TYPED_NUMBER.finditer(prose):
            if not SETTING.search(prose[: match.start()]):
                found.append(f"markdown cell [{i}]: {match.group(0)!r}")
    return found


def _is_check(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Assert):
        return True
    if isinstance(stmt, (ast.For, ast.If, ast.With, ast.While)):
        return any(isinstance(node, ast.Assert) for node in ast.walk(stmt))
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "print"
    )


def _shows_something(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "display":
                return True
            if isinstance(func, ast.Attribute) and ast.unparse(func).startswith("zg.viz."):
                return True
    return False


def scattered_checks(nb: dict) -> list[str]:
    problems = []
    section, checks_in_section, code_after_check = "(before the first heading)", 0, False
    for i, (kind, src) in enumerate(cells(nb)):
        if kind == "markdown":
            if HEADING.match(src):
                section, checks_in_section, code_after_check = src.splitlines()[0], 0, False
            continue
        if kind != "code":
            continue
        is_check_cell = src.lstrip().startswith(CHECK_MARK)
        if checks_in_section and not code_after_check:
            code_after_check = True
            problems.append(f"code cell [{i}] follows the check cell of section {section!r}")
        try:
            tree = ast.parse(src)
        except SyntaxError:  # IPython magics: no Python asserts to judge
            continue
        asserts = [node for node in ast.walk(tree) if isinstance(node, ast.Assert)]
        if not is_check_cell:
            if asserts:
                problems.append(f"code cell [{i}]: {len(asserts)} assert(s) outside a check cell")
            continue
        checks_in_section += 1
        if checks_in_section > 1:
            problems.append(f"code cell [{i}]: a second check cell in section {section!r}")
        problems += [
            f"code cell [{i}] line {a.lineno}: an assert without a message"
            for a in asserts
            if a.msg is None
        ]
        if _shows_something(tree):
            problems.append(f"code cell [{i}]: a check cell draws a figure or table")
        checks = sum(_is_check(stmt) for stmt in tree.body)
        if 2 * checks < len(tree.body):
            problems.append(
                f"code cell [{i}]: a check cell whose statements are mostly not checks "
                f"({checks} of {len(tree.body)})"
            )
    return problems


RULES = [long_cells, stall_cells, unnamed_kernel, typed_numbers, scattered_checks]


@pytest.mark.parametrize("rule", RULES, ids=[r.__name__ for r in RULES])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_follows_the_story_rules(path, rule):
    found = rule(load(path))
    assert not found, f"{path.name}, {rule.__name__}: {found[:8]}"


def notebook(*cell_list: tuple[str, str]) -> dict:
    return {"cells": [{"cell_type": k, "source": s} for k, s in cell_list]}


def test_each_rule_catches_what_it_forbids():
    assert long_cells(notebook(("markdown", "word " * (MAX_WORDS + 1))))
    assert not long_cells(notebook(("markdown", "word " * MAX_WORDS)))
    assert stall_cells(notebook(("markdown", "each sync is One such stall on a GPU")))
    syncing = ("code", "print(stats.host_syncs)")
    assert unnamed_kernel(notebook(("markdown", "# t"), syncing))
    assert not unnamed_kernel(notebook(("markdown", "the numba kernel"), syncing))
    for typed in (
        "it was 1.62x faster",
        "0.81 ± 0.02",
        "accuracy 0.733",
        "measured 250 s",
        "at least. It ran 1.62x",
    ):
        assert typed_numbers(notebook(("markdown", typed))), typed
    for setting in (
        "batch 1024",
        "at least 1.5x",
        "`lr=0.005`",
        "P = 4, 3 layers",
        "the default (0.01)",
    ):
        assert not typed_numbers(notebook(("markdown", setting))), setting
    good = notebook(
        ("markdown", "## 1 · A section"),
        ("code", "x = 1\ndisplay(x)"),
        ("code", "# Checks: section 1\nassert x == 1, 'x must be 1'\nprint('checked: x')"),
        ("markdown", "## 2 · Next"),
    )
    assert not scattered_checks(good)
    bad_cases = [
        ("code", "x = 1\nassert x == 1, 'x must be 1'"),  # an assert in a computing cell
        ("code", "# Checks\nassert x == 1"),  # no message
        ("code", "# Checks\nassert x, 'm'\nzg.viz.curves(x)"),  # draws
        ("code", "# Checks\na = 1\nb = 2\nc = 3\nassert a, 'm'"),  # mostly not checks
    ]
    for bad in bad_cases:
        assert scattered_checks(notebook(("markdown", "## 1"), bad)), bad[1]
    two = notebook(
        ("markdown", "## 1"),
        ("code", "# Checks\nassert 1, 'm'"),
        ("code", "# Checks\nassert 2, 'm'"),
    )
    assert scattered_checks(two), "two check cells in one section"
    after = notebook(("markdown", "## 1"), ("code", "# Checks\nassert 1, 'm'"), ("code", "y = 2"))
    assert scattered_checks(after), "a code cell after the section's check cell"
