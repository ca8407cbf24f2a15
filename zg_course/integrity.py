"""Check that the grader's own code is still what it was before a submission ran.

The tamper scan (``zg_course/tamper.py``) reads a submission's code; code that reaches the
grader by a route the scan does not know (a library that sets attributes by name, a module
reached without importing it) is still caught here, by what it did rather than how: before any
student cell runs, :func:`fingerprint` records the identity of every object the tests and the
comparison code use, and :func:`changes` says which of them differ now.

What is recorded (the objects themselves, compared with ``is``: a replaced value is a change
even when it looks the same):

* every value in the ``__dict__`` of ``zg``, ``zg_course.contract``, ``zg_course.portable``, ``zg_course.remote``, ``zg_course.labs``, ``zg.audit`` and
  ``builtins``; torch's comparisons (``torch.equal``, ``torch.allclose``, ``torch.isclose``,
  ``torch.testing.assert_close``, ...) and the functions ``zg_course.contract`` reads the process's
  state with; every value of ``torch.Tensor``'s ``__dict__`` (``torch.Tensor.__eq__``, ...);
* for every class those zg modules hold that zg defines, and every class it inherits from
  outside ``builtins`` (``TorchDispatchMode`` under ``zg_course.labs.FirstWriteWins``), each value of
  its ``__dict__``, and a name it newly defines (which would hide an inherited one);
* for every function among all of these: its ``__code__``, ``__defaults__``,
  ``__kwdefaults__`` and what its closure holds;
* the depth of torch's function-mode and dispatch-mode stacks (a mode left entered intercepts
  every torch call, the tests' comparisons included).

A module that only a later import adds (``zg.grappa`` once imported) is not a change; a new
name in one of the modules or classes above is. The modules above are imported first when
they are not yet (a submission must not be the first to import one, and patch it unseen).

    before = fingerprint()
    ...                        # a student cell
    changed = changes(before)  # [] or the names that differ, e.g. ["zg_course.contract.check"]

What it cannot see: a change undone before the next check (code that patches while a test
calls it and restores before returning), state outside the objects above, and a submission
that reaches this module's own objects to fool it (that takes the introspection the scan
forbids). The graders check before every locked cell and after every test cell.
"""

from __future__ import annotations

import sys
import types

ZG_MODULES = (
    "zg",
    "zg_course.contract",
    "zg_course.portable",
    "zg_course.remote",
    "zg_course.labs",
    "zg.audit",
)
# torch's comparisons and what zg_course.contract reads the process's state with (not all of torch:
# importing torch._dynamo, say, rewraps torch.manual_seed, which is no submission's doing)
TORCH_NAMES = tuple(
    f"torch.{n}" for n in (
        "equal", "allclose", "isclose", "eq", "ne", "is_tensor", "is_grad_enabled",
        "is_inference_mode_enabled", "is_anomaly_enabled", "get_default_dtype",
        "get_num_threads", "get_num_interop_threads", "are_deterministic_algorithms_enabled",
        "is_deterministic_algorithms_warn_only_enabled", "testing.assert_close",
        "random.get_rng_state", "cuda.is_available",
    )
)  # fmt: skip
TENSOR_LOOKUPS = (
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__len__",
    "__iter__", "__getitem__", "all", "any", "item", "tolist", "equal", "eq", "ne", "sum",
)  # fmt: skip
_EMPTY = object()  # an empty closure cell
CACHES = {"__slotnames__"}  # what copy and pickle cache on a class the first time
_FUNCTIONS = (types.FunctionType,)


def _function_parts(fn) -> tuple:
    """What changes a function's behaviour without replacing the function object."""
    cells = ()
    for cell in fn.__closure__ or ():
        try:
            cells += (cell.cell_contents,)
        except ValueError:
            cells += (_EMPTY,)
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__, *cells)


def _unwrap(value):
    """The functions a class attribute holds (staticmethod, classmethod, property)."""
    if isinstance(value, (staticmethod, classmethod)):
        return [value.__func__]
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if f is not None]
    return [value]


def _record(out: dict, name: str, value) -> None:
    parts = [value]
    for fn in _unwrap(value):
        if isinstance(fn, _FUNCTIONS):
            parts.extend(_function_parts(fn))
    out[name] = tuple(parts)


def _classes(modules: list) -> list[type]:
    """The classes zg defines that ``modules`` hold, and their bases outside ``builtins``."""
    seen, out = set(), []
    for module in modules:
        for value in list(vars(module).values()):
            if not isinstance(value, type) or not str(value.__module__).startswith("zg"):
                continue
            for cls in value.__mro__:
                if cls.__module__ != "builtins" and id(cls) not in seen:
                    seen.add(id(cls))
                    out.append(cls)
    return out


def _mode_stacks() -> tuple:
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    c = torch._C
    return (c._len_torch_function_stack(), c._len_torch_dispatch_stack())


def _import_grader() -> None:
    """Import the modules recorded, so that a submission cannot be the first to (and patch
    one before it is recorded)."""
    import importlib

    for name in (*ZG_MODULES, "torch.testing"):
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except ImportError:  # not installed (yet): nothing of it to record
                pass


def fingerprint() -> dict:
    """{name: (object, what makes it behave as it does, ...)} of the grader's code, now."""
    out: dict = {}
    _import_grader()
    zg_modules = [sys.modules[m] for m in ZG_MODULES if m in sys.modules]
    for module in zg_modules:
        for key, value in list(vars(module).items()):
            _record(out, f"{module.__name__}.{key}", value)
    import builtins

    for key, value in list(vars(builtins).items()):
        if key != "_":  # the interactive last-result name
            _record(out, f"builtins.{key}", value)
    for dotted in TORCH_NAMES:
        space, _, key = dotted.rpartition(".")
        module = sys.modules.get(space)
        if module is not None and key in vars(module):
            _record(out, dotted, vars(module)[key])
    torch = sys.modules.get("torch")
    classes = _classes(zg_modules)
    if torch is not None:
        classes.append(torch.Tensor)
    for cls in classes:
        where = f"{cls.__module__}.{cls.__qualname__}"
        for key, value in list(vars(cls).items()):
            if key != "__dict__" and key != "__weakref__":
                _record(out, f"{where}.{key}", value)
        out[f"{where} (its names)"] = (frozenset(vars(cls)),)
    if torch is not None:  # what a test's comparison of tensors looks up (also inherited)
        for attr in TENSOR_LOOKUPS:
            if f"torch.Tensor.{attr}" not in out and hasattr(torch.Tensor, attr):
                _record(out, f"torch.Tensor.{attr}", getattr(torch.Tensor, attr))
    out["torch's mode stacks (a mode left entered)"] = _mode_stacks()
    return out


def _is_submodule(name: str, value) -> bool:
    return isinstance(value, types.ModuleType) and getattr(value, "__name__", None) == name


def changes(before: dict) -> list[str]:
    """The names of ``before`` whose object, code, defaults or closure differ now, and names
    newly defined in a recorded module or class (a later import's submodule is not one)."""
    now = fingerprint()
    changed = []
    for name, was in before.items():
        if name.endswith("(its names)"):
            added = sorted(now.get(name, (frozenset(),))[0] - was[0] - CACHES)
            changed += [f"{name[: -len(' (its names)')]}.{key} (added)" for key in added]
            continue
        if name.startswith("torch's mode stacks"):
            if now.get(name, ()) != was:
                changed.append(name)
            continue
        current = now.get(name)
        if current is None:
            changed.append(f"{name} (removed)")
        elif len(current) != len(was) or any(a is not b for a, b in zip(current, was)):
            changed.append(name)
    recorded = {n.rsplit(".", 1)[0] for n in before if n.startswith(ZG_MODULES)}
    for name in now.keys() - before.keys():
        module = name.rsplit(".", 1)[0]
        if module in ZG_MODULES and module in recorded and not _is_submodule(name, now[name][0]):
            changed.append(f"{name} (added)")
    return changed


def message(changed: list[str], limit: int = 6) -> str:
    """How a grader reports it (after its "tamper: ")."""
    names = ", ".join(changed[:limit]) + (
        f" (and {len(changed) - limit} more)" if len(changed) > limit else ""
    )
    return f"the submission changed the grader's code: {names}"
