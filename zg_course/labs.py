"""Helpers the graded labs (labs/) call where a notebook alone cannot test a student's code.

Where it sits: in the course package (``zg_course``, beside ``zg``), outside the training flow.

* :func:`rewind_loop` (Lab 4): the overflow policy of :meth:`zg.Engine.train_epoch` over any
  ``run_batch(b)`` function, so the lab can compare a student's poll / rewind / resume loop with
  the kit's on a toy step. It is built from the same pieces as the engine's loop
  (:class:`zg.step.OverflowPoll`, :meth:`zg.step.OverflowGuard.reset`).
* :func:`hold_references`, :func:`hold`, :func:`forbid_within`, :func:`forbid` and
  :func:`as_student` (every lab): inside a student's function, the kit's own functions that
  compute the same result (and the references a lab's setup defines for its tests) raise,
  however the student reached them: a module attribute, an imported name, an alias, a
  ``functools.partial``, a bound method, an object with ``__call__``, a decorator's wrapper, a
  cache, a closure, a thread, a thread pool, a forked process or a process pool. A held
  function looks for the student's frames in every thread (a forked child has its parent's),
  for a call of the student's name whose object leaves no frame of its own, and, while a test
  runs the student's function inside :func:`as_student`, refuses outright, also in a process
  pool forked before. The originals live only in a closure (no module attribute holds them).
  A submission that calls the reference instead of writing it earns nothing.
* :func:`checks` (every lab's setup cell): the comparisons and the sync audit the tests use,
  bound when this module is first imported, before any student cell runs, so a cell that
  rebinds ``torch.equal``, ``torch.allclose`` or ``SyncAudit`` changes nothing in a test.
* :class:`FirstWriteWins` (labs whose answers scatter): PyTorch leaves undefined which of
  several writes to one index a ``scatter_`` or ``index_put_`` keeps; under this mode the
  first one wins instead of the last, so a test run both ways fails an answer that depends on
  the order.
* :func:`graded_against` (every lab's setup cell): the kit version the lab's tests were
  written and checked against; another version stops the notebook before any test runs, so a
  grade never changes silently because the kit changed mid-term.
* :func:`hook_on_workers` (Lab 6). Lab 6 asks for a DDP communication hook; a hook run
in one process (world size 1) cannot show whether it communicates, or whether it scales before
the all-reduce, so :func:`hook_on_workers` runs it on real gloo processes
(:func:`zg.grappa.launch.spawn`, as the kit's trainers start workers) and returns what every
rank got beside what it should have got. The kit's own hook is held while the student's runs.

The spawned workers cannot see a notebook's globals, so the hook travels as its source code
(``inspect.getsource``, which works for functions defined in a Jupyter cell) and is defined
again in each worker with ``torch`` and ``torch.distributed as dist`` in scope: the hook must
use nothing else from the notebook.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import re
import tempfile
import textwrap
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode

from zg._checks import seed_arg
from zg.audit import SyncAudit as _SyncAudit
from zg.errors import WorkerFailed, ZgError
from zg.grappa.comm import CommLedger
from zg.grappa.launch import spawn
from zg.step import OverflowGuard, OverflowPoll, mean_loss
from zg_course.hook import HookState, estimator_hook

__all__ = [
    "rewind_loop",
    "RewindRun",
    "hook_on_workers",
    "forbid",
    "forbid_within",
    "hold_references",
    "hold",
    "as_student",
    "ForbiddenCall",
    "graded_against",
    "checks",
    "Checks",
    "FirstWriteWins",
    "LabVersionMismatch",
]


# ----------------------------------------------------------------------------- every lab

ANY_VERSION_ENV = "ZG_LABS_ANY_VERSION"


class LabVersionMismatch(ZgError, RuntimeError):
    """The kernel's zg is not the version a lab was released and checked against."""


def graded_against(version: str) -> str:
    """Stop unless this kernel runs zg ``version``, the one the lab was released with.

    Every lab's setup cell calls it, in the student's kernel and in the grader's: a lab checked
    against one version and graded against another could change a grade without anyone seeing
    why. Set ``ZG_LABS_ANY_VERSION=1`` to run anyway (a warning then says so). Returns the
    running version.
    """
    from zg import __version__

    if not isinstance(version, str) or not version.strip():
        raise TypeError(f"version must be a version string like '0.3.0', got {version!r}")
    if version == __version__:
        return __version__
    import warnings

    from zg import __file__ as where

    message = (
        f"this lab was released with zg {version} and its tests were checked against it; this "
        f"kernel runs zg {__version__} ({os.path.dirname(where)}). Install zg {version} (the "
        "wheel in the course's student distribution) and restart the kernel, or ask the course "
        "staff: graded against another version, points could change without anyone seeing why"
    )
    if os.environ.get(ANY_VERSION_ENV) == "1":
        warnings.warn(f"{message} ({ANY_VERSION_ENV}=1: running anyway)", stacklevel=2)
        return __version__
    raise LabVersionMismatch(message + f" (set {ANY_VERSION_ENV}=1 to run anyway)")


class Checks:
    """The comparisons and the audit a lab's tests use, bound when ``zg_course.labs`` was imported.

    A lab's setup cell binds ``zg_check = zg_course.labs.checks()`` before any student cell runs, and
    its tests call ``zg_check.equal``, ``.allclose``, ``.isclose``, ``.assert_close`` and
    ``.SyncAudit``: a student cell that rebinds ``torch.equal`` or ``SyncAudit`` afterwards
    changes nothing in a test. The attributes cannot be set. (A cell that rebinds ``zg_check``
    itself, or a kit module's attribute, is what the graders' tamper scan reports.)
    """

    __slots__ = ()
    equal = staticmethod(torch.equal)
    allclose = staticmethod(torch.allclose)
    isclose = staticmethod(torch.isclose)
    assert_close = staticmethod(torch.testing.assert_close)
    SyncAudit = _SyncAudit

    def __setattr__(self, name, value):
        raise AttributeError(f"zg_course.labs.checks() is read-only: cannot set {name!r}")

    def __repr__(self) -> str:
        return "zg_course.labs.checks(): equal, allclose, isclose, assert_close, SyncAudit"


_CHECKS = Checks()


def checks() -> Checks:
    """The comparisons bound when ``zg_course.labs`` was first imported (see :class:`Checks`)."""
    return _CHECKS


def _flipped_write(func, args, kwargs):
    """``func`` (a scatter or index_put without reduction) with its writes in reverse order.

    Writes to one index then land first-to-last reversed, so the first one stays. Returns
    None where the call has no order to reverse (a scalar source, a reduction, a ``None``
    index), and the caller runs it unchanged.
    """
    aten = torch.ops.aten
    name = func._schema.name.split("::")[-1]
    if name in ("scatter", "scatter_"):
        if len(args) < 4 or not isinstance(args[3], torch.Tensor) or kwargs.get("reduce"):
            return None
        self, dim, index, src = args[:4]
        if index.numel() == 0:
            return None
        d = dim % max(index.dim(), 1)
        rows = src[tuple(slice(0, n) for n in index.shape)]  # the entries scatter reads
        return func(self, dim, index.flip(d), rows.flip(d), *args[4:], **kwargs)
    if name in ("index_put", "index_put_", "_index_put_impl_"):
        self, indices, values = args[:3]
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if accumulate or any(i is None for i in indices):
            return None
        idx = []
        for i in indices:
            idx.extend(i.nonzero().unbind(1) if i.dtype == torch.bool else [i])
        idx = torch.broadcast_tensors(*idx)
        if idx[0].numel() == 0:
            return None
        lead = idx[0].shape
        rest = self.shape[len(idx) :]
        vals = values.expand(*lead, *rest).reshape(-1, *rest).flip(0)
        flat = [i.reshape(-1).flip(0) for i in idx]
        put = aten.index_put_ if name.endswith("_") else aten.index_put
        return put.default(self, flat, vals)
    if name in ("index_copy", "index_copy_"):
        self, dim, index, source = args[:4]
        return func(self, dim, index.flip(0), source.flip(dim))
    return None


class FirstWriteWins(TorchDispatchMode):
    """Run ``scatter_``, ``index_put_`` (``x[i] = v``) and ``index_copy_`` with their writes in
    reverse order, so that of several writes to one index the first stays, not the last.

    PyTorch does not say which duplicate such a write keeps (on a GPU it varies from run to
    run); the CPU happens to keep the last. A lab whose answer must not depend on that runs the
    student's function normally and under this mode, and compares both with the reference.
    Reductions (``scatter_reduce_``, ``index_add_``, ``accumulate=True``) are defined and run
    unchanged. ``flipped`` counts the writes it reversed.
    """

    _NAMES = (
        "scatter",
        "scatter_",
        "index_put",
        "index_put_",
        "_index_put_impl_",
        "index_copy",
        "index_copy_",
    )

    def __init__(self):
        super().__init__()
        self.flipped = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func._schema.name.split("::")[-1] in self._NAMES:
            out = _flipped_write(func, args, kwargs)
            if out is not None:
                self.flipped += 1
                return out
        return func(*args, **kwargs)


class ForbiddenCall(ZgError, AssertionError):
    """A student's function called a kit function the lab asks them to write themselves."""


def _functions_of(target) -> list:
    """The plain Python functions behind ``target``: itself, or every function a class defines
    (methods, static and class methods, properties' getters)."""
    if inspect.isfunction(target):
        return [target]
    if inspect.isclass(target):
        found = []
        for value in vars(target).values():
            value = getattr(value, "__func__", value)  # staticmethod / classmethod
            value = getattr(value, "fget", value)  # property
            if inspect.isfunction(value):
                found.append(value)
        return found
    raise TypeError(f"forbid takes functions and classes, got {type(target).__name__}")


_NAME_LOADS = ("LOAD_NAME", "LOAD_GLOBAL", "LOAD_FAST", "LOAD_DEREF", "LOAD_CLASSDEREF")
_NOT_OPERANDS = ("PUSH_NULL", "PRECALL", "KW_NAMES", "CACHE", "NOP", "EXTENDED_ARG")


def _callees(code) -> dict:
    """{offset of a call (and of its caches): the bare name it calls} for the calls of ``code`` whose callee is a
    bare name (``f(x)``, not ``a.f(x)`` or ``f(x)(y)``); found from the instructions' source
    positions, so empty where the interpreter keeps none."""
    import dis

    out = {}
    instructions = list(dis.get_instructions(code))
    for k, call in enumerate(instructions):
        where = getattr(call, "positions", None)
        if not call.opname.startswith("CALL") or where is None or where.lineno is None:
            continue
        start, end = (where.lineno, where.col_offset), (where.end_lineno, where.end_col_offset)
        first = []
        for before in reversed(instructions[:k]):  # the call's operands, back to its start
            p = before.positions
            if p is None or p.lineno is None or before.opname in _NOT_OPERANDS:
                continue
            if (p.lineno, p.col_offset) < start or (p.end_lineno, p.end_col_offset) > end:
                break
            if (p.lineno, p.col_offset) == start:
                first.append(before)
        if len(first) == 1 and first[0].opname in _NAME_LOADS:
            # a frame's f_lasti is the call or one of its inline caches (a Python callee)
            after = instructions[k + 1].offset if k + 1 < len(instructions) else call.offset + 2
            for offset in range(call.offset, after, 2):
                out[offset] = (first[0].opname, first[0].argval)
    return out


def _vault():
    """The holds, kept in this closure and in no module attribute: a student's cell can reach
    the originals only through what the graders' tamper scan forbids (``__closure__``, ``gc``,
    frames), nor the count :func:`as_student` keeps. Returns (hold, held_call, as_student,
    is_held, absent)."""
    import mmap
    import sys
    import threading

    # id(stand-in code) -> (stand-in code, message, original or None, {id(namespace):
    # (namespace, names)}): a hold made again for another namespace adds it (the last 64), so
    # a call that holds again (the lab's setup run twice, a test) never loosens a hold
    entries: dict = {}
    # absent() was called: no hold made from now on keeps its original, except those named
    # in ``kept`` (module.qualname), which the kit's own code needs in this process
    # absent(namespace) was called: no hold made from now on for that namespace keeps its
    # original, except those named in ``kept`` (module.qualname)
    gone = {"kept": frozenset(), "spaces": {}}  # id(namespace) -> namespace
    name_of: dict = {}  # id(stand-in code) -> the held function's module.qualname
    calls: dict = {}  # id(code) -> (code, _callees(code)): the call sites seen so far
    lock = threading.Lock()
    # Which students' functions run (as_student): {name: depth}, "" for "a student's function",
    # as JSON in memory a forked child shares with this process (a pool forked before the call
    # still refuses while one runs). Only this process writes it; a forked child that enters
    # as_student itself counts in ``own``.
    shared = mmap.mmap(-1, 1 << 16)
    owner = os.getpid()
    own: dict = {}

    def read_shared() -> dict:
        size = int.from_bytes(shared[:4], "little")
        return json.loads(shared[4 : 4 + size]) if size else {}

    def running() -> dict:
        out = read_shared()
        for name, n in own.items():
            out[name] = out.get(name, 0) + n
        return {name: n for name, n in out.items() if n > 0}

    def step(name: str, by: int) -> None:
        with lock:
            table = read_shared() if os.getpid() == owner else own
            table[name] = max(table.get(name, 0) + by, 0)
            if not table[name]:
                del table[name]
            if os.getpid() == owner:
                data = json.dumps(table).encode()
                if len(data) + 4 > len(shared):
                    raise ValueError("as_student: too many student's functions run at once")
                shared[4 : 4 + len(data)] = data
                shared[:4] = len(data).to_bytes(4, "little")

    def behind(obj, namespace, codes: dict, seen: set, depth: int, top: bool) -> None:
        """Add to ``codes`` the code of every function of the student's that ``obj`` runs
        first when called: a function, a partial's function and its callable arguments, a
        bound method's function, a callable object's ``__call__``, a class's methods, a
        wrapper's ``__wrapped__`` and the functions its closure holds (only functions the
        notebook defined, past the name itself, so a library function a closure holds is
        not taken for the student's)."""
        if depth > 16 or id(obj) in seen:
            return
        seen.add(id(obj))
        more = []
        if isinstance(obj, types.FunctionType):
            code = obj.__code__
            if id(code) not in entries and (top or obj.__globals__ is namespace):
                codes[id(code)] = code
            if obj.__globals__ is namespace or top:
                for cell in obj.__closure__ or ():
                    try:
                        more.append(cell.cell_contents)
                    except ValueError:  # a cell not filled yet
                        pass
            more.append(obj.__dict__.get("__wrapped__"))
        elif isinstance(obj, types.MethodType):
            more += [obj.__func__, obj.__self__]
        elif isinstance(obj, functools.partial):
            more += [obj.func, *obj.args, *obj.keywords.values()]
        elif isinstance(obj, (staticmethod, classmethod)):
            more.append(obj.__func__)
        elif isinstance(obj, type):
            more += list(vars(obj).values())
        elif callable(obj):
            more.append(inspect.getattr_static(type(obj), "__call__", None))
            try:
                more.append(inspect.getattr_static(obj, "__wrapped__", None))
            except Exception:  # an object whose lookup itself fails: nothing behind it
                pass
        elif isinstance(obj, property):
            more.append(obj.fget)
        for inner in more:
            if inner is not None and (callable(inner) or isinstance(inner, property)):
                behind(inner, namespace, codes, seen, depth + 1, False)

    def callee(frame, values: dict) -> str | None:
        """The student's name the frame is calling now, if its call is of a bare name bound
        to one of ``values`` ({id: (value, name)})."""
        code = frame.f_code
        got = calls.get(id(code))
        if got is None or got[0] is not code:
            if len(calls) > 4096:
                calls.clear()
            try:
                got = calls[id(code)] = (code, _callees(code))
            except Exception:  # no instructions to read: no callee
                return None
        site = got[1].get(frame.f_lasti)
        if site is None:
            return None
        op, name = site
        scopes = [frame.f_locals] if op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLASSDEREF") else []
        if op == "LOAD_NAME":
            scopes.append(frame.f_locals)
        if op in ("LOAD_NAME", "LOAD_GLOBAL"):
            scopes += [frame.f_globals, frame.f_builtins]
        for scope in scopes:
            if name in scope:
                hit = values.get(id(scope[name]))
                return hit[1] if hit is not None and hit[0] is scope[name] else None
        return None

    def student_on_stack(spaces: dict) -> str | None:
        """The student's function running in any thread of this process (or, in a forked
        child, in the parent when it forked), or None. ``spaces``: {id: (namespace, names)}."""
        codes: dict = {}
        values: dict = {}
        direct = False  # a name whose call need not leave a frame of the student's
        for namespace, names in list(spaces.values()):
            for name in names:
                value = namespace.get(name)
                if value is None:
                    continue
                values[id(value)] = (value, name)
                behind(value, namespace, codes, set(), 0, True)
                if not isinstance(value, types.FunctionType) or id(value.__code__) in entries:
                    direct = True
        if not values:
            return None
        seen = set()
        for top in [sys._getframe(), *sys._current_frames().values()]:
            frame = top
            while frame is not None and id(frame) not in seen:
                seen.add(id(frame))
                code = codes.get(id(frame.f_code))
                if code is frame.f_code:
                    return code.co_name
                if direct:
                    name = callee(frame, values)
                    if name is not None:
                        return name
                frame = frame.f_back
        return None

    def held_call(args: tuple, kwargs: dict):
        """What every held function runs: it finds its hold through its own code (it may not
        use its globals: they are the original module's)."""
        code = sys._getframe(1).f_code
        entry = entries.get(id(code))
        if entry is None or entry[0] is not code:
            raise TypeError("zg_course.labs._held_call runs only as a held function's body")
        _, message, original, spaces = entry
        if original is None:
            raise ForbiddenCall(message)
        active = running()
        if active:
            inside = {n for _, names in spaces.values() for n in names}
            if "" in active:
                raise ForbiddenCall(f"{message} (called while a student's function runs)")
            hit = sorted(inside & set(active))
            if hit:
                raise ForbiddenCall(f"{message} (called while {hit[0]} runs)")
        who = student_on_stack(spaces)
        if who is not None:
            raise ForbiddenCall(f"{message} (from {who})")
        return original(*args, **kwargs)

    def hold(fn, lab: str, within: bool = False, namespace=None, names=()) -> tuple:
        """Give ``fn`` a stand-in's code: one that always refuses, or (``within``) one that
        refuses inside the functions ``names`` of ``namespace`` and runs the original
        elsewhere; if ``fn`` has the latter already (the lab run again), add ``namespace``
        and ``names`` to it. Returns what restores it."""
        saved = (fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__)
        entry = entries.get(id(fn.__code__))
        if entry is not None and entry[0] is fn.__code__:
            if within and entry[2] is not None:
                with lock:
                    spaces = entry[3]
                    spaces.pop(id(namespace), None)
                    spaces[id(namespace)] = (namespace, tuple(names))
                    while len(spaces) > 64:
                        del spaces[next(iter(spaces))]
                return saved
        if fn.__code__.co_freevars:
            raise TypeError(f"forbid cannot hold {fn.__qualname__}: it is a closure")
        original = None
        name = f"{fn.__module__}.{fn.__qualname__}"
        absent_here = gone["spaces"].get(id(namespace)) is namespace is not None
        if within and (not absent_here or name in gone["kept"]):
            original = types.FunctionType(
                fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
            )
            original.__kwdefaults__ = fn.__kwdefaults__
            original.__qualname__ = fn.__qualname__
        # The stand-in, compiled on the original's first line of the original's file: its
        # source (inspect, the docs' routes) is the original's, and a traceback through it
        # names the original's def line. One code object per hold: entries go by identity.
        line = max(fn.__code__.co_firstlineno, 1)
        body = "import zg_course.labs as _labs; return _labs._held_call(args, kwargs)"
        source = "\n" * (line - 1) + f"def _held(*args, **kwargs): {body}\n"
        module = compile(source, fn.__code__.co_filename, "exec")
        code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
        fields = {"co_name": fn.__code__.co_name}
        if hasattr(code, "co_qualname"):  # Python 3.11 and later
            fields["co_qualname"] = fn.__qualname__
        code = code.replace(**fields)
        message = f"{lab} asks you to write this yourself: do not call {name}"
        spaces = {id(namespace): (namespace, tuple(names))} if within else {}
        with lock:
            entries[id(code)] = (code, message, original, spaces)
            name_of[id(code)] = name
        fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, None, None
        return saved

    def is_held(fn) -> bool:
        code = getattr(fn, "__code__", None)
        entry = entries.get(id(code))
        return entry is not None and entry[0] is code

    @contextlib.contextmanager
    def as_student(function: str | None = None):
        """Run the block as a student's function: while it runs, every function a lab holds
        (:func:`hold_references`, :func:`hold`, :func:`forbid_within`) raises
        :class:`ForbiddenCall` wherever it is called from, in any thread of this process and
        in a process forked from it, also one forked before the block (a process pool made
        earlier). Given ``function``, the name of the student's function the block runs, only
        the functions held inside that one refuse (Lab 1's ``syncs_per_hop`` may run the
        sampler that ``dynamic_compact`` may not call). A lab's tests put it around each call
        of a student's function, and compute what they expect outside it:

            with zg_course.labs.as_student("compact_hop"):
                got = compact_hop(flat, n_valid, 3)
            expected = reference(flat, n_valid, 3)
        """
        if function is not None and not (isinstance(function, str) and function.isidentifier()):
            raise TypeError(f"function must be the student's function's name, got {function!r}")
        name = function or ""
        step(name, 1)
        try:
            yield
        finally:
            step(name, -1)

    def absent(namespace: dict, kept=()) -> list[str]:
        """From now on, in this process, the functions held for ``namespace`` (the lab's
        ``globals()``, :func:`hold_references` and :func:`hold`) refuse wherever they are
        called from, and their originals are dropped: no closure of this module holds them
        any more (nor a later hold's for the same namespace), so nothing in the process can
        reach the reference's code, whatever it walks (``gc``, frames, modules). Those named in
        ``kept`` ("module.qualname": the student's other functions or the kit's own code run
        them in this process) stay held as before, and so do the holds of other namespaces
        (an earlier lab's, whose functions the kit's later labs run). Called in the grading
        worker (:func:`zg_course.sandbox.work_judged`), whose tests run in the judge. Returns
        the names absent now (dropped now or before)."""
        absent_now = []
        with lock:
            calls.clear()  # the call sites seen: a frame's code, a reference's among them
            gone["kept"] = frozenset(gone["kept"]) | frozenset(kept)
            gone["spaces"][id(namespace)] = namespace
            for key, (code, message, original, spaces) in list(entries.items()):
                name = name_of.get(key)
                held_for = spaces.get(id(namespace), (None,))[0] is namespace
                if not held_for or name in gone["kept"]:
                    continue
                if original is not None:
                    message += (
                        " (while grading it is not in the process that runs the"
                        " notebook's cells: the tests that use it run in the grader)"
                    )
                entries[key] = (code, message, None, spaces)
                absent_now.append(name)
        return absent_now

    return hold, held_call, as_student, is_held, absent


_hold, _held_call, as_student, _is_held, _absent = _vault()
as_student.__qualname__ = "as_student"
del _vault


@contextlib.contextmanager
def forbid(*targets, lab: str = "this lab"):
    """While the block runs, calling any of ``targets`` (functions, or classes: every function
    they define) raises :class:`ForbiddenCall` naming it. The function objects themselves are
    changed (their code), so every way of reaching them is covered: the module attribute, a
    name imported into the notebook, an alias. They are restored on exit, also after an error.

        with zg_course.labs.forbid(zg_course.labs.rewind_loop, zg.step.OverflowPoll, lab="Lab 4"):
            rewinds = train_with_rewind(run, 20, poll_every=4)   # the student's function
    """
    functions = [fn for target in targets for fn in _functions_of(target)]
    saved = []
    try:
        for fn in functions:
            saved.append(_hold(fn, lab))
        yield
    finally:
        for fn, code, defaults, kwdefaults in reversed(saved):
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


def forbid_within(namespace: dict, names, *targets, lab: str = "this lab") -> None:
    """From now on (a lab's setup cell calls it once), ``targets`` raise :class:`ForbiddenCall`
    when called while one of ``names`` of ``namespace`` (the notebook's ``globals()``: the
    student's functions, looked up at each call, so they may be defined later) runs, however
    the student's name reaches them; called from anywhere else (the lab's own setup and tests)
    they work as before. A held function refuses

    * while :func:`as_student` is active, from any thread, or a process forked from this one;
    * while a frame of the student's runs in any thread of this process (or ran in the parent
      when this process was forked from it): the function bound to the name, and what the
      name's object runs when called (a partial's function, a bound method's, a callable
      object's ``__call__``, a decorator's ``__wrapped__`` and its closure's functions);
    * while any frame is calling the student's name itself, where the object bound to it is
      not a function of the student's (a partial of a held function, a cache wrapper, a bound
      method of the kit's): such a call leaves no frame of the student's.

        zg_course.labs.forbid_within(globals(), ["gradient_error_of"], grappa.gradient_error, lab="Lab 9")
    """
    if not isinstance(namespace, dict):
        raise TypeError(f"namespace must be a dict (globals()), got {type(namespace).__name__}")
    names = [names] if isinstance(names, str) else list(names)
    if not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise TypeError(f"names must be the student's function names (strings), got {names!r}")
    for target in targets:
        for fn in _functions_of(target):
            _hold(fn, lab, True, namespace, names)


def _lab_references() -> dict[int, tuple[list[str], list]]:
    """Per lab: the functions it asks the student to write, and the kit's functions that compute
    the same result (what :func:`hold_references` turns off inside the former)."""
    import sys

    import zg.grappa  # noqa: F401 (loads the modules named below)
    from zg import audit, envelope, optim, sampling
    from zg.grappa import comm
    from zg.kernels import sampling as fused
    from zg_course import hook

    # zg.grappa.coverage and .partition are also functions there: the modules by their names.
    coverage, estimators, gradient, partition = (
        sys.modules[f"zg.grappa.{name}"]
        for name in ("coverage", "estimators", "gradient", "partition")
    )
    return {
        1: (["dynamic_compact", "compact_fewer_syncs"], [sampling.DynamicSampler.sample]),
        2: (
            ["first_occurrence", "compact_hop"],
            # The loop and its two stages (sample, compact), and the fused path. The numba
            # twins of the stages (fused.pick, fused.compact) are compiled dispatchers, not
            # Python functions, so they cannot be held; sample_fused, their one driver, is.
            [
                sampling.EnvelopeSampler.sample_static,
                sampling.EnvelopeSampler._sample_hop,
                sampling.EnvelopeSampler._compact_hop,
                sampling.EnvelopeSampler._sample_static_fused,
                fused.sample_fused,
            ],
        ),
        3: (
            ["envelope_sizes", "overflow_rate", "smallest_margin", "memory_bytes"],
            [
                envelope.Envelope.profile.__func__,
                envelope.Envelope._feasible,
                envelope.Envelope.memory_model,
                envelope.block_bytes,
            ],
        ),
        # DeviceSGD.step(apply=...) is the gated step itself. Its no_grad wrapper is a closure,
        # and so is the profiling wrapper torch.optim puts around a class's step once any
        # instance exists: the function innermost of them all is held.
        4: (
            ["train_with_rewind", "gated_sgd_"],
            [rewind_loop, OverflowPoll, inspect.unwrap(optim.DeviceSGD.step)],
        ),
        5: (
            ["coverage_brute_force", "coverage_propagation", "graph_coverage"],
            [coverage.coverage, coverage.local_coverage, coverage._propagate],
        ),
        6: (
            [
                "stats_of",
                "batch_scales",
                "shrink_scales",
                "scaled_allreduce_hook",
                "bytes_per_iteration",
            ],
            [
                hook.estimator_hook,
                estimators.batch_stats,
                estimators.masked_batch_stats,
                estimators.worker_scales,
                estimators._worker_scales_tensor,
                # the scale arithmetic each estimator class holds (Estimator.scales)
                estimators.BatchEstimator.scales,
                estimators.ShrinkEstimator.scales,
                estimators.UniformEstimator.scales,
                estimators.shrink_lambda,
                estimators._shrink_lambda_tensor,
                # the byte model the tests compare bytes_per_iteration with (CommLedger's):
                # held inside bytes_per_iteration only (_HELD_WITHIN), the hook records bytes
                comm.wire_bytes,
                comm.CommLedger.total_bytes.fget,
            ],
        ),
        7: (
            ["pairs_met", "round_robin"],
            [
                partition.Partition.pair_coverage,
                partition._round_robin,
                partition._greedy_cover,
                partition._fixed_base,
                partition._partner_sweep,
            ],
        ),
        8: (["launches_per_step"], [audit.count_launches]),
        9: (["gradient_error_of"], [gradient.gradient_error, gradient._summarise]),
    }


# References held inside some of a lab's functions only (module.qualname: those names), where
# the lab's other functions need them (Lab 6's hook records its bytes through CommLedger).
_HELD_WITHIN = {
    "zg.grappa.comm.wire_bytes": ("bytes_per_iteration",),
    "zg.grappa.comm.CommLedger.total_bytes": ("bytes_per_iteration",),
}


def _kept_in_worker() -> frozenset[str]:
    """The references the grading worker keeps held rather than absent ("module.qualname"),
    because code that runs there needs them: Lab 1's ``syncs_per_hop`` runs the kit's
    ``DynamicSampler.sample`` (it counts that sampler's syncs), and Lab 6's hook tests run in
    the worker (a DDP communication hook runs in torch.distributed's processes), comparing with
    the kit's hook and estimators, whose byte model the student's hook records through."""
    table = _lab_references()
    kept = {f"{f.__module__}.{f.__qualname__}" for t in table[1][1] for f in _functions_of(t)}
    kept |= {f"{f.__module__}.{f.__qualname__}" for t in table[6][1] for f in _functions_of(t)}
    return frozenset(kept)


# Compiled twins of a reference, which cannot be held (numba dispatchers, not Python
# functions): where the reference is absent, they are taken out of their module too, and
# with them the last object that held their Python source function (``py_func``).
_TWINS = {
    "zg.kernels.sampling.sample_fused": ("zg.kernels.sampling", ("pick", "compact", "sample_all")),
}


def _absent_in_worker(namespace: dict) -> list[str]:
    """What the grading worker calls once the lab's setup has held its references (and after
    each cell of the lab's): :func:`_absent` for the lab's ``namespace``, the few
    :func:`_kept_in_worker` aside, and the compiled twins of those absent (:data:`_TWINS`).
    Returns the names absent."""
    import gc
    import sys

    absent = _absent(namespace, _kept_in_worker())
    if set(absent) <= _SWEPT:
        return absent  # nothing new: the sweep below ran for these already
    for module, names in [_TWINS[name] for name in absent if name in _TWINS]:
        found = sys.modules.get(module)
        for name in names if found is not None else ():
            found.__dict__.pop(name, None)
    # A module's code holds its functions' code (its constants), and a frame of its import
    # holds the module's code: an exception a library keeps (torch 2.2 keeps the
    # ModuleNotFoundError of an optional import) keeps its traceback's frames, and those
    # frames' callers up to the module that imported the library. Stored exceptions lose
    # their tracebacks here, and the garbage in cycles (the dispatchers') goes, before any
    # code of the student's runs.
    for obj in gc.get_objects():
        try:
            if isinstance(obj, BaseException) and obj.__traceback__ is not None:
                obj.__traceback__ = None
        except ReferenceError:  # a weak proxy whose object is gone
            continue
    gc.collect()
    _SWEPT.update(absent)
    return absent


_SWEPT: set[str] = set()  # the names :func:`_absent_in_worker` swept for


def _held_within(lab: int, target) -> list[str]:
    """The student's functions of lab ``lab`` inside which ``target`` refuses."""
    names = _lab_references()[lab][0]
    return list(_HELD_WITHIN.get(f"{target.__module__}.{target.__qualname__}", names))


def hold_references(namespace: dict, lab: int) -> list[str]:
    """A lab's setup cell: ``zg_course.labs.hold_references(globals(), 5)``. The kit's functions that
    compute what lab ``lab`` asks for raise :class:`ForbiddenCall` inside the student's
    functions, however reached (:func:`forbid_within`), and work as before in the lab's own
    setup and tests. Returns the names held, for the lab to print."""
    table = _lab_references()
    if lab not in table:
        raise ValueError(f"lab must be one of {sorted(table)}, got {lab!r}")
    for target in table[lab][1]:
        forbid_within(namespace, _held_within(lab, target), target, lab=f"Lab {lab}")
    return [f"{t.__module__}.{t.__qualname__}" for t in table[lab][1]]


def hold(namespace: dict, lab: int, *targets, within: Sequence[str] | None = None) -> list[str]:
    """Hold ``targets`` too, as :func:`hold_references` holds the kit's: a lab's setup cell
    holds the references its own tests compare with (functions it defines), after defining
    them: ``zg_course.labs.hold(globals(), 1, first_seen)``. They refuse inside the student's
    functions ``within`` (by default those :func:`hold_references` names for the lab). Returns
    the names held."""
    table = _lab_references()
    if lab not in table:
        raise ValueError(f"lab must be one of {sorted(table)}, got {lab!r}")
    if not targets:
        raise TypeError("hold takes the functions (or classes) to hold after the lab number")
    names = table[lab][0] if within is None else [within] if isinstance(within, str) else within
    forbid_within(namespace, names, *targets, lab=f"Lab {lab}")
    return [f"{t.__module__}.{t.__qualname__}" for t in targets]


# ----------------------------------------------------------------------------- Lab 4


@dataclass
class RewindRun:
    """What :func:`rewind_loop` did: executed steps (rewound ones included), rewound steps,
    overflow events, host polls, and the loss of every applied batch (by batch index)."""

    executed: int = 0
    rewound: int = 0
    overflows: int = 0
    polls: int = 0
    losses: dict[int, torch.Tensor] = field(default_factory=dict)

    def mean_loss(self) -> float:
        """One host read for the whole run."""
        return mean_loss(self.losses)


def rewind_loop(
    run_batch: Callable[[int], torch.Tensor],
    start: int,
    end: int,
    guard: OverflowGuard,
    poll_every: int,
    rewind: Callable[[int], None],
) -> RewindRun:
    """Run batches ``start .. end-1`` under the overflow policy.

    ``run_batch(b)`` runs batch ``b`` (its step gated by ``guard``) and returns its loss tensor;
    :class:`zg.step.OverflowPoll` decides when the host looks. On an overflow: ``rewind(first)``
    grows the envelope and rebuilds, the guard is reset, and the loop resumes at ``first``.
    """
    out = RewindRun()
    poll = OverflowPoll(guard, poll_every, start, end)
    b = start
    while b < end:
        out.losses[b] = run_batch(b)
        first = poll.after(b)
        b += 1
        if first is not None:
            out.losses = {k: v for k, v in out.losses.items() if k < first}
            rewind(first)
            guard.reset()
            b = first
    out.executed, out.rewound = poll.executed, poll.rewound
    out.overflows, out.polls = poll.overflows, poll.polls
    return out


# ----------------------------------------------------------------------------- Lab 6


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _rank_input(rank: int) -> torch.Tensor:
    return torch.randn(16, 8, generator=torch.Generator().manual_seed(100 + rank))  # [16, 8]


def _grads_through(ddp: torch.nn.Module, model: torch.nn.Module, rank: int) -> list:
    model.zero_grad()
    ddp(_rank_input(rank)).square().mean().backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def _hook_worker(
    rank: int,
    world_size: int,
    source: str,
    name: str,
    scales: Sequence[float],
    bucket_cap_mb: float,
    seed: int,
    out_dir: str,
) -> None:
    namespace = {"torch": torch, "dist": dist, "__name__": "student_hook"}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    hook = namespace[name]
    # What the gradient must be on every rank: sum over ranks r of scales[r] * (r's local gradient).
    reference = _model(seed)
    expected = None
    for r in range(world_size):
        local = _grads_through(reference, reference, r)
        expected = (
            [scales[r] * g for g in local]
            if expected is None
            else [e + scales[r] * g for e, g in zip(expected, local)]
        )
    model = _model(seed)
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    state = SimpleNamespace(scale=float(scales[rank]), ledger=CommLedger(world_size))
    ddp.register_comm_hook(state, hook)
    # Write it, don't call it: while the student's hook runs, the kit's own (the same scaled
    # all-reduce) raises, however the hook reaches it; the kit's run below is the reference.
    try:
        with forbid(estimator_hook, lab="Lab 6"):
            got = _grads_through(ddp, model, rank)
    except Exception as exc:
        refused = _forbidden_cause(exc)
        if refused is None:
            raise
        raise ForbiddenCall(f"rank {rank}: {refused}") from None
    kit_model = _model(seed)
    kit = DDP(kit_model, bucket_cap_mb=bucket_cap_mb)
    kit_state = HookState(CommLedger(world_size))
    kit_state.scale = float(scales[rank])
    kit.register_comm_hook(kit_state, estimator_hook)
    kit_got = _grads_through(kit, kit_model, rank)
    torch.save(
        {
            "got": got,
            "expected": expected,
            "kit": kit_got,
            "ledger": state.ledger.take(),
            "kit_ledger": kit_state.ledger.take(),
        },
        os.path.join(out_dir, f"{rank}.pt"),
    )


def _forbidden_cause(exc: BaseException) -> ForbiddenCall | None:
    """The :class:`ForbiddenCall` behind ``exc`` (DDP hands a hook's error on as a RuntimeError
    that holds its text), or None."""
    seen = exc
    while seen is not None:
        if isinstance(seen, ForbiddenCall):
            return seen
        seen = seen.__cause__ or seen.__context__
    found = re.search(
        r"(?:rank \d+: )?Lab \d+ asks you to write this yourself: do not call [^\s;]+", str(exc)
    )
    return ForbiddenCall(found.group(0)) if found else None


def hook_on_workers(
    hook: Callable,
    scales: Sequence[float],
    *,
    bucket_cap_mb: float = 25.0,
    seed: int = 0,
    timeout: float = 60.0,
) -> list:
    """Run the communication hook ``hook(state, bucket)`` under DDP on ``len(scales)`` gloo
    processes: rank r has its own input, ``state.scale = scales[r]`` and ``state.ledger`` a
    :class:`zg.grappa.comm.CommLedger`. Returns one dict per rank: ``got`` (the gradients DDP
    left, a list of tensors), ``expected`` (``sum_r scales[r] * grad_r``), ``kit`` (what
    :func:`zg_course.hook.estimator_hook` gives), ``ledger`` and ``kit_ledger`` (``take()`` of
    each ledger). While ``hook`` runs, ``estimator_hook`` raises (:func:`forbid`): a hook that
    hands the work to the kit's raises :class:`ForbiddenCall` here."""
    if not callable(hook) or not hasattr(hook, "__name__"):
        raise TypeError(f"hook must be a function, got {type(hook).__name__}")
    world_size = len(scales)
    if world_size < 2:
        raise ValueError("give at least two scales: one per worker, at least two workers")
    seed = seed_arg(seed)
    if getattr(hook, "__zg_remote__", False):  # the judge's stand-in: spawned in the worker
        from zg_course.remote import NeedsWorker

        raise NeedsWorker("hook_on_workers spawns the hook on real process groups")
    source = textwrap.dedent(inspect.getsource(hook))
    with tempfile.TemporaryDirectory(prefix="zg-lab-hook-") as out_dir:
        try:
            spawn(
                _hook_worker,
                world_size,
                args=(
                    source,
                    hook.__name__,
                    [float(s) for s in scales],
                    bucket_cap_mb,
                    seed,
                    out_dir,
                ),
                timeout=timeout,
                run_timeout=4 * timeout,
                backend="gloo",
            )
        except WorkerFailed as exc:  # zg's launcher raises as themselves only zg's errors
            refused = _forbidden_cause(exc)
            if refused is None:
                raise
            raise refused from None
        return [torch.load(os.path.join(out_dir, f"{r}.pt")) for r in range(world_size)]
