"""No import circles in ``zg``: every module of the package, read with ``ast`` (nothing is
imported), every import of a ``zg`` module it makes (at module level or inside a function,
relative or absolute; only imports under ``if TYPE_CHECKING:`` are left out), and the graph they
make has no cycle. A cycle is listed as its modules, strongly connected components of the graph
(Tarjan), so one test names every circle at once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "zg"


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """{dotted module name: its file} for every module of the package (a package is its
    ``__init__.py``)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node of ``tree``, at any depth, except under
    ``if TYPE_CHECKING:`` (its ``else`` branch still counts)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of dotted ``name`` that is a module of the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imported_modules(module: str, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file."""
    path = modules[module]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[str] = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                if node.level - 1 > len(here):
                    raise AssertionError(f"{path}:{node.lineno}: relative import beyond the top")
                base = here[: len(here) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from P import x`: x is the submodule P.x when it is one, else a name of P.
            targets = [
                f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem
                for alias in node.names
            ]
        for target in targets:
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != module:
                out.add(resolved)
    return out


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    modules = module_files(root, package)
    return {m: imported_modules(m, modules) for m in modules}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _describe(component: list[str], graph: dict[str, set[str]]) -> str:
    inside = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & inside)]
    return f"{', '.join(component)}\n    " + "\n    ".join(edges)


# ----------------------------------------------------------------------------- the checker itself


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_checker_sees_every_kind_of_import(tmp_path):
    root = _tree(
        tmp_path,
        {
            "zg/__init__.py": "from . import a\n",
            "zg/a.py": "def f():\n    from .sub import b\n",
            "zg/sub/__init__.py": "",
            "zg/sub/b.py": "import zg.c\n",
            "zg/c.py": "from .sub.b import thing\nfrom . import a\n",
            "zg/d.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from .e import E\n"
                "from . import helper_name\n"
            ),
            "zg/e.py": "from .d import x\n",
        },
    )
    graph = import_graph(root)
    assert graph["zg"] == {"zg.a"}
    assert graph["zg.a"] == {"zg.sub.b"}  # function-level, `from . import submodule`
    assert graph["zg.sub.b"] == {"zg.c"}  # absolute
    assert graph["zg.c"] == {"zg.sub.b", "zg.a"}
    assert graph["zg.d"] == {"zg"}  # a name of the package; TYPE_CHECKING left out
    assert cycles(graph) == [["zg.a", "zg.c", "zg.sub.b"]]


def _fail_on(found: list[list[str]], graph: dict[str, set[str]]) -> None:
    assert not found, "import cycles in zg (every import counts, also inside functions):\n" + (
        "\n".join(_describe(c, graph) for c in found)
    )


def test_zg_has_no_import_cycle():
    graph = import_graph()
    assert "zg.grappa.train" in graph and graph["zg.grappa"]
    _fail_on(cycles(graph), graph)


@pytest.mark.parametrize("package", ["zg.grappa"])
def test_package_imports_sit_at_module_level(package):
    """Inside zg.grappa every import of the kit's modules is at the top of its module."""
    modules = module_files()
    late = []
    for name, path in modules.items():
        if name != package and not name.startswith(package + "."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        for node in _imports(tree):
            if id(node) in top:
                continue
            local = isinstance(node, ast.ImportFrom) and node.level > 0
            absolute = (
                [a.name for a in getattr(node, "names", [])]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            if local or any(n == PACKAGE or n.startswith(PACKAGE + ".") for n in absolute):
                late.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not late, f"imports inside functions or blocks: {late}"


def test_import_zg_loads_no_module_of_the_distributed_wing():
    """``import zg`` is light: the ``zg.grappa`` modules (and ``zg.parallel``, which starts
    them) load when first used, through ``zg.parallel`` or ``from zg import grappa``."""
    import sys

    from processes import run

    code = (
        "import sys, zg\n"
        "print(sorted(m for m in sys.modules if m.startswith(('zg.grappa', 'zg.parallel'))))\n"
        "zg.parallel\n"
        "print('zg.grappa.train' in sys.modules)\n"
    )
    out = run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    out = out.stdout.split("\n")
    assert out[0] == "[]", f"import zg loaded the distributed wing: {out[0]}"
    assert out[1] == "True", "zg.parallel did not load the distributed wing when used"


# The course (grading, holds, the tamper scan, the sandbox, Lab 6's DDP-hook form) is its own
# package beside zg, zg_course, which depends on zg. zg never imports it: no module of zg, at
# module level or inside a function, and the modules that moved out of zg are gone from it.
COURSE_PACKAGE = "zg_course"
MOVED_OUT = ("zg/contract.py", "zg/labs.py", "zg/grappa/hook.py")


def course_imports(root: Path = ROOT, package: str = PACKAGE) -> dict[str, list[str]]:
    """{module of ``package``: the course modules it imports anywhere in its file}."""
    found = {}
    for module, path in module_files(root, package).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names = []
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif not node.level:  # a relative import stays inside zg
                names.append(node.module or "")
        course = sorted(
            {n for n in names if n == COURSE_PACKAGE or n.startswith(COURSE_PACKAGE + ".")}
        )
        if course:
            found[module] = course
    return found


def test_the_checker_sees_a_course_import_anywhere(tmp_path):
    root = _tree(
        tmp_path,
        {
            "zg/__init__.py": "",
            "zg/a.py": "def f():\n    import zg_course.labs\n",
            "zg/b.py": "from zg_course import contract\n",
            "zg/c.py": "from . import a\nimport zg_coursework\n",
        },
    )
    assert course_imports(root) == {"zg.a": ["zg_course.labs"], "zg.b": ["zg_course"]}


def test_zg_never_imports_the_course():
    assert (ROOT / COURSE_PACKAGE / "__init__.py").is_file()
    assert course_imports() == {}, "modules of zg import the course package"
    left = [name for name in MOVED_OUT if (ROOT / name).exists()]
    assert left == [], f"course modules are back in zg: {left}"
