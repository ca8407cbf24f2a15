"""Find the lines of a submission that reach for the grader instead of the exercise.

A graded lab runs the student's cells and the instructor's tests in one Python process, so a
student cell can change what a later test sees: rebind ``torch.equal``, a setup name such as
``zg_check`` or ``SyncAudit``, a kit function, or the kernel's input. ``zg_check = zg_course.labs.checks()``
makes rebinding ``torch.equal`` harmless; this scan finds the rest before the submission runs,
and the graders (``zg_course/grade.py``, ``zg_course/sandbox.py``) give a submission with a
finding no points, naming the line. It reads code only (the ``ast``); it cannot see code built
at run time, which is why building code at run time (``exec``, ``eval``, ``compile``,
``__import__``) is itself a finding, and why what a cell may import is an allow-list, not a
list of forbidden modules: a list of forbidden names misses every module that leads to them
(``pydoc.locate("gc")``, ``timeit.timeit(stmt=...)``, ``unittest.mock.patch(...)``).

What a finding is, in a cell the student wrote:

* importing a module that is not on the allow-list (``ALLOWED_MODULES``): the standard
  library's pure computation (``math``, ``cmath``, ``numbers``, ``itertools``, ``functools``,
  ``collections``, ``heapq``, ``bisect``, ``statistics``, ``operator``, ``dataclasses``,
  ``typing``, ``enum``, ``random``, ``fractions``, ``decimal``, ``copy``, ``time``, ``types``
  but only its plain containers), ``numpy`` (not ``ctypeslib``, ``f2py``, ``distutils``,
  ``testing``), ``torch``'s numeric subtrees (``TORCH_SUBTREES``, ``TORCH_MODULES``: not
  ``torch.jit``, ``torch.fx``, ``torch.overrides``, ``torch.library``, ``torch.ops``,
  ``torch.multiprocessing``, ``torch.hub``, ``torch.package``, ``torch.utils.cpp_extension``,
  ``torch.utils.benchmark``: code from strings, processes, operator overrides) and ``zg`` (not
  ``zg.cli``, ``zg.experiments``, ``zg.grappa.launch``, ``zg.grappa.worker``) and of the
  course package only what the locked cells use (``zg_course.labs``, ``zg_course.contract``,
  ``zg_course.hook``: not the graders, the scan or the sandbox); a private
  module (a name part starting with ``_``); a relative import or ``import *``. The list is
  what every model solution, ``labs/right/`` and a probe's right answers import, plus the
  obvious pure-computation modules; nothing else is needed by an honest answer;
* reaching, through a name bound to an allowed module (an import of the cell, of a locked
  cell, or ``name = module.attr``), a module off the list (``torch.sys``, ``np.lib.npyio.os``,
  ``np.ctypeslib``, ``zg_course.labs.inspect``), a private name of a module (``random._os``; torch's
  operators such as ``torch._foreach_add_`` excepted), a refused object (``numpy.load`` and
  ``torch.load``: pickles are code; ``torch.compile``; ``functools.update_wrapper``:
  sets attributes by name; ``typing.get_type_hints``: evaluates strings), a name of ``types``
  beyond its containers (``FunctionType``, ``CodeType`` build code); using a module as a value
  (``for m in (torch,)``, ``f(torch)``); using a decorator that changes what it is given
  (``dataclasses.dataclass``, ``functools.total_ordering``, ``functools.wraps``) other than on
  the cell's own code; defining ``__torch_function__`` or ``__torch_dispatch__``. The chains
  are resolved at scan time by importing only modules on the list; the scanning process
  imports ``numpy``, ``torch`` and ``zg`` for it;
* using a name a locked cell bound to a module off the list (every lab's first cell imports
  ``sys``; on Colab also ``glob``, ``importlib`` and ``subprocess``);
* binding, at the top level or through ``global``, a name that a locked cell (setup or test)
  binds with an import, a ``def`` or a ``class``, or that the setup binds at all (``g``,
  ``seeds``, ``zg_check``), unless it is the same import again (``import torch``);
* setting or deleting an attribute of a module (``torch.equal = ...``), of ``zg_check``, of a
  function or class a locked cell defined, or of anything a module holds reached through a
  name: an imported name, an alias (``C = zg_course.labs.Checks``), a loop, ``with``, ``:=`` or
  default-argument variable bound to one, or the result of ``type(...)`` / ``getattr(...)``;
* using (calling, or naming to call later) ``setattr``, ``delattr``, ``globals``, ``vars``,
  ``exec``, ``eval``, ``compile``, ``__import__``, ``get_ipython`` or ``breakpoint``, or
  ``getattr`` with a name that is not a plain attribute's; reading an attribute that leads out
  of the language's ordinary rules (``__globals__``, ``__builtins__``, ``__dict__``,
  ``__code__``, ``__closure__``, ``__subclasses__``, ``__reduce_ex__``, ``__loader__``,
  frames and code objects: ``f_locals``, ``gi_frame``, ``gi_code``, ...), also by name in a
  string (``operator.attrgetter("__closure__")``) or through ``attrgetter`` /
  ``methodcaller`` with a name built at run time;
* using ``zg_course.labs``'s holds (``hold_references``, ``hold``, ``forbid_within``, ``forbid``,
  ``as_student``) or a private name of ``zg_course.labs``: what keeps the kit's references off inside
  the student's functions, and the only way to the originals is through the names above;
* using a function or class that only a test cell defines (the tests' own reference, such as
  Lab 2's ``brute_first``): it exists only when the tests run, after the student's cells.

Every model solution and every file in ``labs/right/`` scans clean (``make labs-right`` would
fail otherwise): an honest answer to these labs needs none of it.

What the scan cannot promise (the residual risk): it reads names, so an object reached by a
route it does not model (an argument a test passes, an attribute chain through a call's
result) can still be changed, and an allowed module may hold a way out no one has found yet.
That is why the graders also check, while the submission runs, that their own code is intact
(``zg_course/integrity.py``: ``zg``, ``zg_course.contract``, ``zg_course.labs``, ``zg.audit``, ``builtins``,
torch's comparisons, the kit's classes, torch's mode stacks), before every locked cell and
after every test: a change by any route fails every test from there on. A change made and
undone inside one call of the student's function, while a test runs, is seen by neither.

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
# zg_course.labs's holds (what keeps the kit's references off inside a student's functions): a student
# cell that calls them, or reads a private name of zg_course.labs, reaches for the grader.
HOLD_API = {"hold_references", "hold", "forbid_within", "forbid", "as_student"}
ATTRIBUTE_GETTERS = {"attrgetter", "methodcaller"}  # operator's getattr by name
FORBIDDEN_ATTRIBUTES = {
    "__globals__", "__builtins__", "__dict__", "__code__", "__closure__", "__subclasses__",
    "__bases__", "__base__", "__mro__", "__class__", "__getattribute__", "__setattr__",
    "__delattr__", "__import__", "__self__", "__func__", "__wrapped__", "__objclass__",
    "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__loader__", "__spec__",
    "__torch_function__", "__torch_dispatch__", "f_globals", "f_locals", "f_back", "f_builtins",
    "f_code", "f_trace", "tb_frame", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame",
    "ag_code", "co_code", "co_consts", "co_names",
}  # fmt: skip

# The allow-list: the only modules a student cell may import or reach. The standard library's
# pure computation, and the libraries the labs are about. Anything else (``pydoc``, ``timeit``,
# ``unittest.mock``, ``concurrent.futures``, ``glob``, ...) is a finding: a module that reaches
# the interpreter (``pydoc.locate``), runs code from a string (``timeit``) or sets attributes by
# name (``unittest.mock.patch``) is a way around every rule below, and no lab needs one.
ALLOWED_MODULES = {
    "math", "cmath", "numbers", "itertools", "functools", "collections", "collections.abc",
    "heapq", "bisect", "statistics", "operator", "dataclasses", "typing", "enum", "random",
    "fractions", "decimal", "copy", "types", "time",
    "numpy", "torch", "zg",
    # of the course package, what the labs' locked cells use (never its graders and tools)
    "zg_course", "zg_course.labs", "zg_course.contract", "zg_course.hook",
}  # fmt: skip
# Below numpy and zg every public submodule is allowed but these (processes, native code,
# files of code, the kit's command line and worker loaders); below torch only the subtrees
# named here: torch.jit, torch.fx, torch.compile's machinery, torch.library / torch.ops
# (which replace an operator's implementation), torch.overrides (function modes, which
# intercept every torch call), torch.multiprocessing, torch.hub, torch.package and
# torch.utils.cpp_extension / .benchmark (code from a string) are not among them.
DENIED_SUBMODULES = {
    "numpy.ctypeslib", "numpy.f2py", "numpy.distutils", "numpy.testing",
    "zg.cli", "zg.experiments", "zg.grappa.launch", "zg.grappa.worker",
    "torch.cuda.jiterator", "torch.distributed.run", "torch.distributed.launch",
    "torch.distributed.elastic", "torch.distributed.launcher", "torch.distributed.rpc",
}  # fmt: skip
TORCH_SUBTREES = (
    "torch.nn", "torch.optim", "torch.autograd", "torch.cuda", "torch.distributed",
    "torch.amp", "torch.distributions", "torch.backends",
)  # fmt: skip
TORCH_MODULES = {
    "torch.linalg", "torch.fft", "torch.special", "torch.sparse", "torch.random", "torch.futures",
    "torch.testing", "torch.types", "torch.masked", "torch.nested", "torch.functional",
    "torch.return_types", "torch.storage", "torch.version", "torch.cpu", "torch.mps",
    "torch.profiler", "torch.func", "torch.utils", "torch.utils.data", "torch.utils.hooks",
    "torch.utils.checkpoint", "torch.serialization",
}  # fmt: skip
# Names of an allowed module that are refused all the same: they load pickles (code), evaluate
# strings, or set attributes of the objects they are given by name.
DENIED_OBJECTS = (
    "numpy.load", "numpy.lib.format.read_array", "torch.load", "torch.compile",
    "functools.update_wrapper", "typing.get_type_hints", "typing.ForwardRef",
)  # fmt: skip
# Decorators that change the class or function they are given: only on the student's own (in
# a decorator position), never called on a kit object.
DECORATOR_ONLY = (
    "dataclasses.dataclass", "functools.total_ordering", "functools.wraps",
    "typing.no_type_check", "typing.final", "typing.runtime_checkable",
)  # fmt: skip
# types: only its plain containers (FunctionType, CodeType, ModuleType, ... build code).
MODULE_NAMES = {"types": {"SimpleNamespace", "MappingProxyType", "NoneType", "GenericAlias"}}
CALLS_RETURNING_EXISTING = {"type", "getattr"}  # type(x) is x's class, shared with every x


def module_allowed(name: str) -> bool:
    """Whether a student cell may import (or reach) the module ``name``."""
    parts = name.split(".")
    if any(p.startswith("_") for p in parts):
        return False  # a private module
    if any(name == d or name.startswith(d + ".") for d in DENIED_SUBMODULES):
        return False
    if name in ALLOWED_MODULES or parts[0] in ("numpy", "zg"):
        return True
    if parts[0] == "torch":
        return name in TORCH_MODULES or any(
            name == t or name.startswith(t + ".") for t in TORCH_SUBTREES
        )
    return False


def allow_list() -> str:
    """The allow-list, as a finding names it."""
    return ", ".join(sorted(ALLOWED_MODULES - {"collections.abc"})) + " (see zg_course/tamper.py)"


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
    modules = {name for name, target in imports.items() if "." not in target} | {
        "torch",
        "zg",
        "zg_course",
    }
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
    """``node`` names the module zg_course.labs (``zg_course.labs``, or a name bound to it)."""
    text = ast.unparse(node)
    return text == "zg_course.labs" or imports.get(text) == "zg_course.labs"


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
    known = {**every_import, **_aliases(tree, every_import)}  # names of what modules hold
    roots = set(known) | _tainted(tree, set(known))
    _reach(tree, known, add)
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
            _check_imports(node, add)
            if isinstance(node, ast.ImportFrom) and node.module == "zg_course.labs":
                for a in node.names:
                    if a.name in HOLD_API or a.name.startswith("_"):
                        add(node, f"imports zg_course.labs.{a.name}, the lab's holds")
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
                add(node, f"uses zg_course.labs.{node.attr}, the lab's holds")
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                root = _root(node)
                held = _attribute_store(node, roots)
                if root in modules or root in names and root in locked:
                    add(node, f"sets an attribute of {root!r} ({ast.unparse(node)})")
                elif held is not None:
                    add(node, f"sets an attribute of what a module holds, through {held!r} "
                              f"({ast.unparse(node)})")  # fmt: skip
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            add(node, f"uses {node.id}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_CALLS:
            if isinstance(node.ctx, ast.Load):  # called here or through another name
                add(node, f"uses {node.id}()")
        elif isinstance(node, ast.Name) and node.id in late and node.id not in bound:
            if isinstance(node.ctx, ast.Load):
                add(node, f"uses {node.id}, which only the lab's tests define (their reference)")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (
            "__torch_function__",
            "__torch_dispatch__",
        ):
            add(node, f"defines {node.name}, which intercepts torch's calls (the tests' too)")
    return sorted(out, key=lambda f: f.line)  # the first line first (an import, often)


def _called_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


_UNKNOWN = object()
_RESOLVED: dict[str, object] = {}


def resolve(dotted: str):
    """The object ``dotted`` (``torch.nn.functional``) names, importing only allowed modules;
    ``_UNKNOWN`` when it names nothing this process can find."""
    if dotted in _RESOLVED:
        return _RESOLVED[dotted]
    import importlib
    import importlib.util
    import warnings

    parts = dotted.split(".")
    obj = _UNKNOWN
    if module_allowed(parts[0]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                obj = importlib.import_module(parts[0])
                for i, part in enumerate(parts[1:], 1):
                    try:
                        obj = getattr(obj, part)
                    except AttributeError:
                        name = ".".join(parts[: i + 1])
                        if module_allowed(name):
                            obj = importlib.import_module(name)
                            continue
                        try:  # a module not loaded yet, and not to be: its name
                            found = importlib.util.find_spec(name) is not None
                        except (ImportError, ValueError, AttributeError):
                            found = False
                        obj = _ModuleName(name) if found else _UNKNOWN
                        break
            except Exception:  # what cannot be found is no finding
                obj = _UNKNOWN
    _RESOLVED[dotted] = obj
    return obj


class _ModuleName(str):
    """A submodule named but not imported while scanning (one that is not allowed)."""


def _is_module(obj) -> str | None:
    """The name of the module ``obj`` is, or None."""
    import types

    if isinstance(obj, _ModuleName):
        return str(obj)
    if isinstance(obj, types.ModuleType):
        return getattr(obj, "__name__", None) or "?"
    return None


def _objects(names) -> list:
    return [o for o in (resolve(n) for n in names) if o is not _UNKNOWN]


def _denied(obj) -> bool:
    return any(obj is o for o in _objects(DENIED_OBJECTS))


def _decorator_only(obj) -> bool:
    return any(obj is o for o in _objects(DECORATOR_ONLY))


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` (or ``getattr(a.b, "c")``) as ["a", "b", "c"]; None for anything else."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        inner = _chain(node.value)
        return None if inner is None else [*inner, node.attr]
    if _is_plain_getattr(node):
        inner = _chain(node.args[0])
        return None if inner is None else [*inner, node.args[1].value]
    return None


def _is_plain_getattr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _aliases(tree: ast.Module, every_import: dict) -> dict[str, str]:
    """{name: dotted path} for the cell's ``name = a.b.c`` where ``a`` is imported: an import
    under another name (``F = torch.nn.functional``, ``C = zg_course.labs.Checks``)."""
    out: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                chain = _chain(node.value)
                known = {**every_import, **out}
                if chain is None or chain[0] not in known:
                    continue
                path = ".".join([known[chain[0]], *chain[1:]])
                for t in targets:
                    if (
                        isinstance(t, ast.Name)
                        and out.get(t.id) != path
                        and t.id not in every_import
                    ):
                        out[t.id] = path
                        changed = True
    return out


def _holds_existing(expr: ast.AST, roots: set[str]) -> bool:
    """``expr``'s value may be an object a module holds: it names one of ``roots`` (imports,
    their aliases) other than through a call, or calls ``type``/``getattr``."""
    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and node.id in roots:
            return True
        if isinstance(node, ast.Call):
            if _called_name(node.func) in CALLS_RETURNING_EXISTING:
                return True
            continue  # a call's result is a new object (the call itself is scanned elsewhere)
        if isinstance(node, _SCOPES):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False


def _tainted(tree: ast.Module, roots: set[str]) -> set[str]:
    """Names the cell binds (assignment, loop, ``with``, ``:=``, default argument) to what may be
    an object a module holds: setting one of their attributes sets the module's."""
    out = set()
    changed = True
    while changed:
        changed = False
        known = roots | out
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                pairs = [(t, node.value) for t in targets]
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                pairs = [(node.target, node.iter)]
            elif isinstance(node, ast.NamedExpr):
                pairs = [(node.target, node.value)]
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                pairs = [(i.optional_vars, i.context_expr) for i in node.items if i.optional_vars]
            elif isinstance(node, ast.arguments):
                args = node.posonlyargs + node.args
                pairs = [
                    (ast.Name(a.arg, ast.Store()), d)
                    for a, d in zip(args[len(args) - len(node.defaults):], node.defaults)
                ] + [
                    (ast.Name(a.arg, ast.Store()), d)
                    for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None
                ]  # fmt: skip
            for target, value in pairs:
                if not _holds_existing(value, known):
                    continue
                for n in _target_names(target):
                    if n not in out:
                        out.add(n)
                        changed = True
    return out


def _target_names(target: ast.AST) -> list[str]:
    """The names an assignment target binds (not ``x`` of ``x.a = ...`` or ``x[0] = ...``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _reach(tree: ast.Module, known: dict[str, str], add) -> None:
    """The allow-list, applied to what the cell reaches through imported names: a module off the
    list (``torch.sys``, ``np.ctypeslib``, a locked cell's ``sys``), a private name of a module,
    a refused object, a module passed around as a value, a decorator that changes what it gets
    called on something else."""
    parents = _parents(tree)
    decorators = {
        id(d.func if isinstance(d, ast.Call) else d)
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for d in n.decorator_list
    }
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            continue
        chain = _chain(node)
        if (
            chain is None
            or chain[0] not in known
            or not isinstance(getattr(node, "ctx", ast.Load()), ast.Load)
        ):
            continue
        parent = parents.get(id(node))
        base = known[chain[0]].split(".")
        path = [*base, *chain[1:]]
        text = ".".join(path)
        outer = (isinstance(parent, ast.Attribute) and parent.value is node) or (
            _is_plain_getattr(parent) and parent.args[0] is node
        )
        if len(chain) > 1:  # the step from the chain's parent to its last name
            holder = _is_module(resolve(".".join(path[:-1])))
            last = chain[-1]
            if holder and last.startswith("_") and not last.startswith("__"):
                if not _torch_op(holder, resolve(text)):
                    add(node, f"reads the private name {holder}.{last}")
                    continue
            if holder in MODULE_NAMES and last not in MODULE_NAMES[holder]:
                add(node, f"uses {holder}.{last} (of {holder}, only "
                          f"{', '.join(sorted(MODULE_NAMES[holder]))} are allowed)")  # fmt: skip
                continue
        elif not module_allowed(base[0]):  # a locked cell's import of a module off the list
            add(node, f"uses {known[chain[0]]}, a module not on the allow-list ({allow_list()})")
            continue
        obj = resolve(text)
        if obj is _UNKNOWN:
            continue
        name = _is_module(obj)
        if name is not None and not module_allowed(name):
            add(node, f"reaches the module {name} ({ast.unparse(node)}), not on the allow-list "
                      f"({allow_list()})")  # fmt: skip
        elif name is not None and not outer and not _is_alias_value(node, parent):
            add(node, f"uses the module {name} as a value (import it under a name instead)")
        elif name is None and not outer and _denied(obj):
            add(node, f"uses {text}, which loads code or sets attributes by name")
        elif name is None and not outer and _decorator_only(obj) and id(node) not in decorators:
            add(node, f"uses {text} other than as a decorator of the cell's own code")
        elif name is None and not outer and id(node) in decorators and _is_wraps(obj):
            call = parent if isinstance(parent, ast.Call) and parent.func is node else None
            if call is not None and (len(call.args) > 1 or call.keywords):
                add(node, f"calls {text} with more than the function it wraps")


def _torch_op(holder: str, obj) -> bool:
    """``torch._foreach_add_`` and the like: a private name of torch that is one of its
    operators (what ``torch.add`` is), not a way into its machinery."""
    import types

    return (
        holder == "torch"
        and isinstance(obj, types.BuiltinFunctionType)
        and getattr(obj, "__module__", None) == "torch"
    )


def _is_wraps(obj) -> bool:
    return obj is resolve("functools.wraps")


def _is_alias_value(node: ast.AST, parent) -> bool:
    """``node`` is the whole value of ``name = node`` (an alias, see ``_aliases``)."""
    return (
        isinstance(parent, (ast.Assign, ast.AnnAssign))
        and parent.value is node
        and all(
            isinstance(t, ast.Name)
            for t in (parent.targets if isinstance(parent, ast.Assign) else [parent.target])
        )
    )


def _check_imports(node, add) -> None:
    """The allow-list, applied to an import statement."""
    if isinstance(node, ast.ImportFrom) and node.level:
        add(node, "a relative import (the allow-list names absolute modules only)")
        return
    if isinstance(node, ast.Import):
        for a in node.names:
            if not module_allowed(a.name):
                add(node, f"imports {a.name}, not on the allow-list ({allow_list()})")
        return
    module = node.module or ""
    if not module_allowed(module):
        add(node, f"imports from {module}, not on the allow-list ({allow_list()})")
        return
    for a in node.names:
        if a.name == "*":
            add(node, f"imports * from {module} (name what the cell uses)")
            continue
        if a.name.startswith("_") and not a.name.startswith("__"):
            add(node, f"imports the private name {module}.{a.name}")
            continue
        if module in MODULE_NAMES and a.name not in MODULE_NAMES[module]:
            add(node, f"imports {module}.{a.name} (of {module}, only "
                      f"{', '.join(sorted(MODULE_NAMES[module]))} are allowed)")  # fmt: skip
            continue
        obj = resolve(f"{module}.{a.name}")
        name = _is_module(obj)
        if name is not None and not module_allowed(name):
            add(node, f"imports the module {name}, not on the allow-list ({allow_list()})")
        elif obj is not _UNKNOWN and name is None and _denied(obj):
            add(node, f"imports {module}.{a.name}, which loads code or sets attributes by name")


def _attribute_store(node: ast.Attribute, roots: set[str]) -> str | None:
    """Why setting or deleting ``node`` (``x.a.b = ...``) sets what a module holds, or None."""
    base = node.value
    while True:
        if isinstance(base, ast.Call) and _called_name(base.func) in CALLS_RETURNING_EXISTING:
            return f"{_called_name(base.func)}()"
        if isinstance(base, (ast.Attribute, ast.Subscript)):
            base = base.value
        elif isinstance(base, ast.Call):
            base = base.func if _is_plain_getattr(base) else None
            if base is None:
                return None
        else:
            break
    return base.id if isinstance(base, ast.Name) and base.id in roots else None


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
