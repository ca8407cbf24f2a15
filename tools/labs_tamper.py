"""Find the lines of a submission that reach for the grader instead of the exercise.

A graded lab runs the student's cells and the instructor's tests in one Python process, so a
student cell can change what a later test sees: rebind ``torch.equal``, a setup name such as
``zg_check`` or ``SyncAudit``, a kit function, or the kernel's input. ``zg_check = zg.labs.checks()``
makes rebinding ``torch.equal`` harmless; this scan finds the rest before the submission runs,
and the graders (``tools/labs_grade.py``, ``tools/labs_sandbox.py``) give a submission with a
finding no points, naming the line. It reads code only (the ``ast``); it cannot see code built
at run time, which is why building code at run time (``exec``, ``eval``, ``compile``,
``__import__``) is itself a finding.

What a finding is, in a cell the student wrote:

* binding, at the top level or through ``global``, a name that a locked cell (setup or test)
  binds with an import, a ``def`` or a ``class``, or that the setup binds at all (``g``,
  ``seeds``, ``zg_check``), unless it is the same import again (``import torch``);
* setting or deleting an attribute of a module (``torch.equal = ...``), of ``zg_check``, or of a
  function or class a locked cell defined;
* using (calling, or naming to call later) ``setattr``, ``delattr``, ``globals``, ``vars``, ``exec``, ``eval``, ``compile``,
  ``__import__``, ``get_ipython`` or ``breakpoint``, or ``getattr`` with a name that is not a
  plain attribute's; importing ``builtins``, ``gc``, ``ctypes``,
  ``inspect``, ``importlib``, ``sys``, ``os``, ``subprocess``, ``socket``, ``signal`` or
  ``threading``, ``runpy``, ``code`` or ``pkgutil`` (a module run afresh holds unheld copies), or ``__main__`` (the notebook's own namespace); reading an attribute that
  leads out of the language's ordinary rules (``__globals__``, ``__builtins__``, ``__dict__``,
  ``__code__``, ``__closure__``, ``__subclasses__``, frames), also by name in a string
  (``operator.attrgetter("__closure__")``) or through ``attrgetter`` / ``methodcaller`` with a
  name built at run time;
* using ``zg.labs``'s holds (``hold_references``, ``hold``, ``forbid_within``, ``forbid``,
  ``as_student``) or a private name of ``zg.labs``: what keeps the kit's references off inside
  the student's functions, and the only way to the originals is through the names above;
* using a function or class that only a test cell defines (the tests' own reference, such as
  Lab 2's ``brute_first``): it exists only when the tests run, after the student's cells.

Every model solution and every file in ``labs/right/`` scans clean (``make labs-right`` would
fail otherwise): an honest answer to these labs needs none of it.

    findings = scan(student_cells={"gid": code}, locked=[setup_code, test_code, ...])
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

FORBIDDEN_CALLS = {
    "setattr", "delattr", "globals", "vars", "exec", "eval", "compile", "__import__",
    "get_ipython", "breakpoint",
}  # fmt: skip
FORBIDDEN_MODULES = {
    "builtins", "gc", "ctypes", "inspect", "importlib", "sys", "os", "subprocess", "socket",
    "signal", "threading", "multiprocessing", "IPython", "linecache", "marshal", "pickle",
    "__main__", "runpy", "code", "codeop", "pkgutil", "zipimport", "imp",
}  # fmt: skip
# zg.labs's holds (what keeps the kit's references off inside a student's functions): a student
# cell that calls them, or reads a private name of zg.labs, reaches for the grader.
HOLD_API = {"hold_references", "hold", "forbid_within", "forbid", "as_student"}
ATTRIBUTE_GETTERS = {"attrgetter", "methodcaller"}  # operator's getattr by name
FORBIDDEN_ATTRIBUTES = {
    "__globals__", "__builtins__", "__dict__", "__code__", "__closure__", "__subclasses__",
    "__bases__", "__mro__", "__class__", "__getattribute__", "__setattr__", "__delattr__",
    "__import__", "__self__", "__func__", "__wrapped__", "f_globals", "f_locals", "f_back",
    "f_builtins", "tb_frame", "gi_frame", "cr_frame",
}  # fmt: skip


@dataclass(frozen=True)
class Finding:
    cell: str  # the grade_id of the student's cell
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.cell} line {self.line}: {self.what}"


def _imports(tree: ast.AST) -> dict[str, str]:
    """{name bound: what it is bound to} for the imports of ``tree``'s top level."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _walk_scope(node: ast.AST):
    """``ast.walk`` that does not enter a nested function, lambda or class body."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        if current is node or not isinstance(current, _SCOPES):
            todo.extend(ast.iter_child_nodes(current))


def _assigned(tree: ast.Module) -> set[str]:
    """Names the module's top level assigns (not loop or ``with`` variables)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for sub in _walk_scope(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    return names


def _loaded(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _defined(tree: ast.Module) -> set[str]:
    return {
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None  # it fails when it runs, and earns nothing there


def protected(setup: list[str], tests: list[str]) -> tuple[set[str], dict[str, str], set[str]]:
    """(names a student may not rebind, the locked cells' imports, names that are modules)."""
    names, imports, data, read = set(), {}, set(), set()
    for code in setup + tests:
        tree = _parse(code)
        if tree is None:
            continue
        found = _imports(tree)
        imports.update(found)
        names |= set(found) | _defined(tree)
        if code in setup:
            data |= _assigned(tree)
        else:
            read |= _loaded(tree)
    names |= data & read  # setup data the tests read (a setup's temporaries are free to reuse)
    modules = {name for name, target in imports.items() if "." not in target} | {"torch", "zg"}
    return names, imports, modules


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _bound_anywhere(tree: ast.AST) -> set[str]:
    """Every name ``tree`` binds in any scope: assignments, defs, classes, arguments, imports."""
    out = set(_imports(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
    return out


def test_defined(setup: list[str], tests: list[str]) -> set[str]:
    """Functions and classes only the lab's test cells define (the tests' own references and
    helpers): they do not exist when the student's cells run."""
    early = set()
    for code in setup:
        tree = _parse(code)
        if tree is not None:
            early |= _bound_anywhere(tree)
    late = set()
    for code in tests:
        tree = _parse(code)
        if tree is not None:
            late |= _defined(tree)
    return late - early


def _is_labs(node: ast.AST, imports: dict) -> bool:
    """``node`` names the module zg.labs (``zg.labs``, or a name bound to it)."""
    text = ast.unparse(node)
    return text == "zg.labs" or imports.get(text) == "zg.labs"


def scan_cell(
    gid: str,
    code: str,
    names: set[str],
    imports: dict,
    modules: set[str],
    late: set[str] = frozenset(),
    bound: set[str] = frozenset(),
) -> list:
    """The findings of one student cell; ``late``: names only the tests define, ``bound``:
    names the student's cells bind (a student's own name is theirs)."""
    tree = _parse(code)
    if tree is None:
        return []
    out = []

    def add(node, what):
        out.append(Finding(gid, getattr(node, "lineno", 0), what))

    own_imports = _imports(tree)
    every_import = {**imports, **own_imports}
    modules = modules | {n for n, t in own_imports.items() if "." not in t}
    locked = _locked_objects(names, imports)  # once per cell, not once per attribute store
    for name, target in own_imports.items():
        if name in names and imports.get(name) != target:
            add(tree, f"imports {target} as {name!r}, a name the lab's locked cells bind")
    for node in _walk_scope(tree):  # top-level bindings of protected names
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in names:
                add(node, f"redefines {node.name!r}, which the lab's locked cells define")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if node.id in names:
                add(node, f"rebinds {node.id!r}, which the lab's locked cells bind (rename yours)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                if name in names:
                    add(node, f"declares 'global {name}', a name the lab's locked cells bind")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            for mod in mods:
                if mod.split(".")[0] in FORBIDDEN_MODULES:
                    add(node, f"imports {mod}, which these labs never need")
            if isinstance(node, ast.ImportFrom) and node.module == "zg.labs":
                for a in node.names:
                    if a.name in HOLD_API or a.name.startswith("_"):
                        add(node, f"imports zg.labs.{a.name}, the lab's holds")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "getattr" and len(node.args) >= 2:
                name = node.args[1]
                if not isinstance(name, ast.Constant) or name.value in FORBIDDEN_ATTRIBUTES:
                    add(node, "calls getattr() with a name that is not a plain attribute")
        elif isinstance(node, ast.Call) and _called_name(node.func) in ATTRIBUTE_GETTERS:
            for arg in node.args:
                if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
                    add(node, f"calls {_called_name(node.func)}() with a name built at run time")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in FORBIDDEN_ATTRIBUTES:
                add(node, f"names .{node.value} in a string")
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                add(node, f"reads .{node.attr}")
            if _is_labs(node.value, every_import) and (
                node.attr in HOLD_API or node.attr.startswith("_")
            ):
                add(node, f"uses zg.labs.{node.attr}, the lab's holds")
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                root = _root(node)
                if root in modules or root in names and root in locked:
                    add(node, f"sets an attribute of {root!r} ({ast.unparse(node)})")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            add(node, f"uses {node.id}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_CALLS:
            if isinstance(node.ctx, ast.Load):  # called here or through another name
                add(node, f"uses {node.id}()")
        elif isinstance(node, ast.Name) and node.id in late and node.id not in bound:
            if isinstance(node.ctx, ast.Load):
                add(node, f"uses {node.id}, which only the lab's tests define (their reference)")
    return out


def _called_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _locked_objects(names: set[str], imports: dict) -> set[str]:
    """The protected names whose attributes a student may not set: everything but data the setup
    made (a student may fill a setup tensor's ``.grad``, say, through the code the lab asks for)."""
    return set(imports) | {"zg_check"} | {n for n in names if n[:1].isupper()}


def scan(student_cells: dict[str, str], setup: list[str], tests: list[str]) -> list[Finding]:
    """Every finding in ``student_cells`` ({grade_id: code}) against the lab's locked cells."""
    names, imports, modules = protected(setup, tests)
    late = test_defined(setup, tests)
    bound = set()
    for code in student_cells.values():
        tree = _parse(code)
        if tree is not None:
            bound |= _bound_anywhere(tree)
    out = []
    for gid, code in student_cells.items():
        out.extend(scan_cell(gid, code, names, imports, modules, late, bound))
    return out
