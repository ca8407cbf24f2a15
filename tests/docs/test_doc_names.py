"""No doc names a function (or module, class, attribute, file) that does not exist.

Where: README.md, CONTRIBUTING.md, docs/**/*.md and the Markdown cells of notebooks/*.ipynb and
of the labs (labs/source/*/*.ipynb). What counts as a reference to the kit, exactly:

1. **A dotted name from zg**, in inline code or a fenced block: ``zg`` then ``.name`` one or
   more times, not preceded by a letter, digit, ``.``, ``/`` or ``-`` (so ``bench/zg.json``
   and ``zg-result/1`` are not names); a call's arguments end it (``zg.datasets.load("cora")``
   is ``zg.datasets.load``). It must resolve by import and getattr, as the route page's
   steps do (``resolve`` in tools/route.py: ``zg.grappa.train`` is the function,
   ``zg.grappa.train.train_many`` reaches into the module).
2. **Class.attribute**, in inline code or a fenced block, where ``Class`` is the name of a class
   defined in a zg module (``Engine._train_batch``, ``EnvelopeSampler.sample_static``,
   ``EpochStats.launches``): the attribute must be one of that class (or a zg base): a class
   attribute, an annotated field, or one its code assigns as ``self.attribute = ...``. A name
   that is no zg class (``DataLoader.x``, ``torch.Tensor.item``) and an instance's attribute
   (``eng.train_epoch``, ``g.indptr``) are not checked.
3. **A repository path**: a whitespace-separated word of inline code that starts with
   ``zg/``, ``tools/``, ``tests/``, ``bench/``, ``docs/``, ``labs/``, ``notebooks/``,
   ``data/`` or ``.ci/`` (words with ``*``, ``<``, ``>``, ``{``, ``}`` or ``$`` are patterns
   and placeholders, skipped). The file or folder must exist; ``path:LINE`` must be a line of
   the file; ``path::name`` (a pytest id) a ``def name`` in it; ``bench/_machine.RESULTS``
   (a script's attribute) a top-level name of ``bench/_machine.py``.

What cannot resolve on purpose (an old name a page records, a file written at run time) is in
:data:`ALLOWED` with its reason; an entry no page holds any more fails too.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from functools import cache
from pathlib import Path

import pytest

import zg
from tests.script_loader import load_script

ROOT = Path(__file__).resolve().parents[2]
route, _restore = load_script(ROOT / "tools" / "route.py", "zg_route")
_restore()

# (page, reference as the page writes it, why it cannot resolve)
ALLOWED = [
    *(
        ("docs/what_changed.md", old, "a removed name, listed beside its replacement")
        for old in (
            "zg.pipeline",
            "zg.pipeline.DynamicPipeline",
            "zg.baselines.dgl.DGLPipeline",
            "zg.baselines.dgl.DGLSource",
            "zg._fused",
            "zg._aggregate",
            "zg.Step",
            "zg.step.run_batches",
            "zg.sampling.resolve_kernel",
            "zg.labs",
            "zg.contract",
            "zg.grappa.hook",
        )
    ),
    # the course's old names, in the instructors' note on what moved to zg_course
    *(
        ("docs/course/running_the_course.md", old, "a moved name, listed beside its new one")
        for old in ("zg.labs", "zg.contract", "zg.grappa.hook", "tools/labs_check.py")
    ),
    ("docs/what_changed.md", "tools/labs_contracts.py", "a moved tool, beside its new name"),
    ("docs/course/running_the_course.md", "labs/gradebook.db", "nbgrader writes it"),
    ("docs/course/running_the_course.md", "labs/release/", "nbgrader writes it"),
    ("docs/course/running_the_course.md", "labs/downloaded/", "nbgrader writes it"),
    ("docs/install.md", "labs/release/", "nbgrader writes it"),
    ("docs/course/running_the_course.md", "labs/exchange/", "make lab-instructor makes it"),
    ("docs/install.md", "labs/exchange/", "make lab-instructor makes it"),
    ("docs/data.md", "bench/data/", "the download cache, made by the first download"),
    ("docs/gpu.md", "bench/results/floor_cuda.json", "written on a CUDA machine, not committed"),
]

FENCE = re.compile(r"^ *(```|~~~).*?^ *\1", re.DOTALL | re.MULTILINE)
SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
ZG_NAME = re.compile(r"(?<![\w./-])zg(?:\.[A-Za-z_]\w*)+")
CLASS_ATTRIBUTE = re.compile(r"(?<![\w.])([A-Z]\w*)\.([A-Za-z_]\w*)")
PATH_WORD = re.compile(r"(?:zg|tools|tests|bench|docs|labs|notebooks|data|\.ci)/[\w./:-]*")
PLACEHOLDER = set("*<>{}$")


def pages() -> list[tuple[str, str]]:
    """(name, Markdown text) of every page and notebook Markdown cell the check reads."""
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [(f.relative_to(ROOT).as_posix(), f.read_text()) for f in files if f.is_file()]
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    notebooks += sorted((ROOT / "labs" / "source").glob("*/*.ipynb"))
    for nb_path in notebooks:
        cells = json.loads(nb_path.read_text()).get("cells", [])
        for i, c in enumerate(cells):
            if c.get("cell_type") == "markdown":
                text = c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                found.append((f"{nb_path.relative_to(ROOT).as_posix()} (cell {i})", text))
    return found


@cache
def kit_classes() -> dict[str, list[type]]:
    """Every class defined in a zg module, by name (modules whose optional dependency is
    missing are left out)."""
    classes: dict[str, list[type]] = {}
    for info in pkgutil.walk_packages(zg.__path__, "zg."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and obj.__module__ == module.__name__:
                classes.setdefault(name, []).append(obj)
    return classes


def has_attribute(cls: type, name: str) -> bool:
    if hasattr(cls, name):
        return True
    assigned = re.compile(rf"\bself\.{name}\s*(?::[^=\n]*)?=(?!=)")
    for base in cls.__mro__:
        if not base.__module__.startswith("zg"):
            continue
        if name in base.__dict__.get("__annotations__", {}):
            return True
        try:
            if assigned.search(inspect.getsource(base)):
                return True
        except (OSError, TypeError):
            pass
    return False


def path_problem(word: str) -> str | None:
    """Why a repository path word does not resolve, or None."""
    path, _, test = word.partition("::")
    line = None
    if m := re.fullmatch(r"(.*?):(\d+)", path):
        path, line = m[1], int(m[2])
    file = ROOT / path
    if not file.exists():
        stem, dot, attribute = path.rpartition(".")
        script = ROOT / f"{stem}.py"
        if dot and attribute.isidentifier() and script.is_file():
            names = {
                t.id if isinstance(t, ast.Name) else getattr(node, "name", None)
                for node in ast.parse(script.read_text()).body
                for t in (getattr(node, "targets", None) or [getattr(node, "target", node)])
            }
            return None if attribute in names else f"{stem}.py has no top-level {attribute!r}"
        return "no such file or folder"
    if line is not None and (not file.is_file() or line > len(file.read_text().splitlines())):
        return f"{path} has no line {line}"
    if test and not re.search(rf"^\s*(?:async )?def {re.escape(test)}\b", file.read_text(), re.M):
        return f"{path} defines no {test!r}"
    return None


def references(text: str) -> list[tuple[int, str, str | None]]:
    """(line, reference, problem or None) of every kit reference in ``text``."""
    found = []

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def names(chunk: str, start: int) -> None:
        for m in ZG_NAME.finditer(chunk):
            try:
                route.resolve(m[0])
                problem = None
            except ValueError as e:
                problem = str(e)
            found.append((line_of(start + m.start()), m[0], problem))
        for m in CLASS_ATTRIBUTE.finditer(chunk):
            classes = kit_classes().get(m[1])
            if not classes:
                continue
            ok = any(has_attribute(c, m[2]) for c in classes)
            problem = None if ok else f"class {m[1]} has no attribute {m[2]!r}"
            found.append((line_of(start + m.start()), m[0], problem))

    fenced = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    for a, b in fenced:
        names(text[a:b], a)
    prose = FENCE.sub(lambda m: " " * len(m[0]), text)  # same offsets, fences blanked
    for span in SPAN.finditer(prose):
        names(span[2], span.start(2))
        for word in span[2].split():
            word = re.sub(r"\(.*$", "", word).rstrip(",;)")
            if PLACEHOLDER & set(word) or not PATH_WORD.fullmatch(word):
                continue
            found.append((line_of(span.start(2)), word, path_problem(word)))
    return found


def test_no_doc_names_what_does_not_exist():
    allowed = {(page, ref) for page, ref, _ in ALLOWED}
    wrong, checked = [], 0
    for name, text in pages():
        page = name.split(" (cell ")[0]
        for line, ref, problem in references(text):
            checked += 1
            if problem and (page, ref) not in allowed:
                wrong.append(f"{name}:{line}: `{ref}`: {problem}")
    assert checked > 500, f"only {checked} references found: the patterns broke"
    assert not wrong, (
        "these docs name what does not exist (renamed or removed? fix the doc, or if it "
        "cannot resolve on purpose add it to ALLOWED with a reason):\n" + "\n".join(wrong)
    )


def test_every_allowed_reference_is_still_there():
    texts = dict(pages())
    for page, ref, why in ALLOWED:
        refs = {r for _, r, _ in references(texts[page])}
        assert ref in refs, f"{page} no longer names {ref!r} ({why}): remove it from ALLOWED"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("the loop `Engine._run`", "class Engine has no attribute '_run'"),
        ("`zg.step.nothing(x)`", "zg.step.nothing does not exist"),
        ("```python\nzg.datasets.nothing()\n```", "zg.datasets.nothing does not exist"),
        ("see `zg/nothing.py`", "no such file or folder"),
        ("see `zg/engine.py:999999`", "zg/engine.py has no line 999999"),
        ("`tests/docs/test_route.py::test_nothing`", "defines no 'test_nothing'"),
        ("`bench/_machine.NOTHING`", "bench/_machine.py has no top-level 'NOTHING'"),
        ("`python tools/nothing.py --check`", "no such file or folder"),
    ],
)
def test_a_stale_reference_is_found(text, problem):
    found = [p for _, _, p in references(text) if p]
    assert found and problem in found[0], found


@pytest.mark.parametrize(
    "text",
    [
        "`zg.Engine.train_epoch` and `zg.grappa.train` and `zg.grappa.train.train_many`",
        "`Engine.train_epoch`, `EpochStats.launches`, `MiniBatch.seeds`, `Engine.settings`",
        "`eng.train_epoch()`, `g.indptr`, `DataLoader.x`, `torch.Tensor.item`",
        "`out/zg.json`, `zg-result/1`, `labs/submitted/<student id>/<lab>.ipynb`",
        "`zg/engine.py:1`, `tools/render_docs.py --check`, `bench/_machine.write_json(name)`",
        "`tests/docs/test_route.py::test_the_route_and_the_module_table_are_current`",
    ],
)
def test_what_exists_or_is_no_kit_reference_passes(text):
    assert [p for _, _, p in references(text) if p] == []
