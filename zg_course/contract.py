"""The whole contract of a graded function, and one harness that checks every clause of it.

Where it sits: in the course package (``zg_course``, beside ``zg``), outside the training flow; the labs' hidden tests call it (labs/, Labs 1-9).

A lab exercise states more than what its function returns: which arguments it may change
(by default none), that the tensors it makes follow its inputs' device, the dtype of what it
returns, that it keeps no state between calls and leaves the notebook's globals alone, how
many host syncs it may make, and whether it returns before its collective completes. A test
that compares outputs alone passes an answer that sorts its caller's list in place, caches a
result across a change of setting, or makes a tensor on the default device (which only fails
off the CPU). :func:`check` runs the function on every generated case and checks each clause
the :class:`Contract` declares, on a fresh copy of the inputs, against a reference run on
another copy::

    contract = zg_course.contract.Contract("first_occurrence", part="Lab 2 Part A",
                                    host_syncs=0, boundaries=("empty", "duplicates"))
    cases = [zg_course.contract.Case((cand, marker), label="seed 3", kinds={"duplicates"}), ...]
    zg_course.contract.check(first_occurrence, contract, cases, reference=brute, namespace=globals())

The clauses (:attr:`Contract.clauses` lists those a contract has):

* ``runs``: the call returns without an exception.
* ``returns``: the value equals the reference's (exactly for integers and booleans; within
  ``rtol``/``atol`` for floats), with the same structure and shape, the same container types
  (a list where the reference returns a list, a plain ``dict`` where it returns one: not a
  ``Counter``, a ``defaultdict`` or an ``OrderedDict``), contiguous where the reference's tensor is, and
  in memory of its own: a returned tensor that shares its storage with an argument (the input
  itself, or a view of it) fails, unless the reference's result shares its input's too.
* ``dtype``: every returned tensor has the reference's dtype; a Python number has exactly the
  reference's type (an ``int`` where the contract says ``int``, not ``numpy.int64``; a
  ``float``, not an ``int``; a ``bool``, not ``numpy.bool_``).
* ``device``: every tensor the function makes follows its inputs' device. Checked by running
  it again with its inputs on another device: each input tensor (in lists, tuples, dicts; a
  parameter and its ``.grad``; a module's parameters, buffers and tensor attributes; an
  optimizer's parameters and state; the attributes of an object of the kit's, the course's or
  the notebook's own class, a ``zg.Graph``, a ``Partition``, a state object) is tagged as on a
  device that is not the CPU, and a dispatch mode follows every op: what an op makes from tagged tensors is tagged,
  a factory call with ``device=`` an input's device makes a tagged tensor, and one on the CPU
  (no ``device=``, an explicit ``device="cpu"``, ``torch.from_numpy``, a legacy constructor,
  ``.cpu()``) a plain one. An op that mixes the two fails as it would on a GPU (a 0-d CPU
  tensor may meet a tagged one in an elementwise op, as PyTorch allows, not in ``torch.stack``
  or an index); so does ``.numpy()`` on a tagged tensor, and a returned tensor that is not
  tagged; and PyTorch's own refusal of a CPU tensor beside a tagged one (a CPU gradient
  assigned to a tagged parameter). The kit's own code (``zg/``, ``zg_course/``) called from the
  function is not judged. Where the inputs hold tensors the check cannot tag (an object of a
  library's class holding one, a tensor subclass, a non-leaf tensor: see ``_elsewhere``), or
  the function reaches an op the mode cannot follow, or no input holds a tensor, it runs the
  function with every factory call without ``device=`` redirected to the ``meta`` device
  instead: a tensor made there and mixed with the inputs, or returned, fails. On a machine with CUDA the case also runs on CUDA tensors.
* ``inputs unchanged``: every argument not in ``may_change`` is deep-compared before and after
  (tensor values, dtype, shape, ``requires_grad``, strides, storage offset, the hooks on it and
  the Python attributes set on it, so a memo kept as ``x.memo = ...`` fails;
  lists, dicts and objects' attributes, private ones included; a module's parameters, buffers,
  gradients and hooks; an optimizer's state).
* ``updates``: every argument in ``may_change`` ends as the reference left its own copy (its
  values, and what it carries besides: hooks, ``requires_grad``, the names of an object's
  attributes, so a private marker added and left fails), and those in ``in_place`` keep their
  storage (the same address).
* ``others unchanged``: the objects ``watch`` returns (not arguments: module settings, shared
  objects) are the same after the call, and so is the whole process: every setting torch and
  numpy offer a getter and a setter for, read from the libraries themselves (not a list: the
  float32 matmul precision, the TF32 and cuDNN switches, default dtype, thread counts,
  determinism, grad, anomaly and autocast modes, numpy's error handling and print options...),
  the flags of ``torch.backends``' modules and torch's print options, every random generator
  (torch's, numpy's, Python's), the global module hooks, the environment and the working
  directory. Every call
  (the reference's and the student's) starts from the same known settings and generators (a
  few draws past a seed, so a reseed shows whatever seed it names); what the reference itself
  leaves changed the student may change too; the harness puts everything back after each call.
* ``no state``: the notebook's globals (``namespace``) are not rebound or added to; after every
  case ran, their dicts, lists and sets keep their whole contents, and so do the notebook's own
  functions (closure cells, defaults, attributes, an ``lru_cache``'s size) and classes (their
  attributes); the function keeps nothing between calls on itself (its attributes, mutable
  defaults, closure cells), and no call returns a tensor an earlier call returned. Every case
  is also checked against its own reference in turn, so a cache that ignores a later change of
  a setting fails ``returns`` on the case after the change; and the function is called on one
  case's objects, which are then refilled in place with the next case's values (the same
  objects) and called again, so a result kept by the objects' identity fails too.
* ``deterministic``: the same call, on fresh copies of the same inputs, from the same
  settings and generators, returns the same value (within ``rtol``/``atol``): an answer that
  draws from a generator of its own (an unseeded ``random.Random()``, numpy's
  ``default_rng()``, the clock) differs from call to call, even where ``compare`` accepts any
  valid answer. Every case is called twice (only the first, for a contract with
  ``refill=False``: a function too slow to call twice per case).
* ``portable``: where numpy's default integer is 32 bits (Windows with numpy 1.x), the same
  answer: a call that used numpy's constructors (``np.array``, ``np.arange``, ``np.sum``, ...)
  runs again under :func:`zg_course.portable.narrow_ints`, and an answer that wraps past 2**31
  there (``int(np.array([n, 4]).prod())``) fails. Checked where numpy 1.x is installed (the
  reference environment); numpy 2 made the default 64 bits everywhere.
* ``host syncs``: at most ``host_syncs`` under :class:`zg.audit.SyncAudit` ``(strict=True)``.
* ``asynchronous``: every collective (``torch.distributed.all_reduce``, ...) is started with
  ``async_op=True``, nothing waits on it before the function returns, and what it returns is a
  :class:`torch.futures.Future` still pending then (the harness completes the collectives only
  after the return, so a blocking collective dressed as an asynchronous one, or a completed
  future, fails).

A failure raises :class:`ContractFailure` (an ``AssertionError``, so nbgrader counts it) that
names the part, the clause, the case (its label and a short form of its inputs), what was
expected and what came back. A contract whose cases miss a declared boundary kind raises
:class:`ContractSetupError` instead: that is the lab's fault, not the student's.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import inspect
import math
import numbers
import os
import re
import sys
import sysconfig
import types
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import zg
from zg.errors import ZgError
from zg_course import portable
from zg_course.portable import patched as _patched
from zg_course.remote import session as remote_session
from zg_course.remote import write_back as remote_write_back

__all__ = ["Contract", "Case", "check", "ContractFailure", "ContractSetupError", "CLAUSES"]

CLAUSES = (
    "runs",
    "returns",
    "dtype",
    "device",
    "inputs unchanged",
    "updates",
    "others unchanged",
    "no state",
    "deterministic",
    "portable",
    "host syncs",
    "asynchronous",
)


class ContractFailure(ZgError, AssertionError):
    """The student's function broke a clause of its contract (the message says which). The
    message never holds an object's memory address (it says nothing to a student and differs
    from run to run): whatever built it, the addresses are taken out here."""

    def __init__(self, message: str = "", *args):
        super().__init__(_ADDRESS.sub("", str(message)), *args)


class ContractSetupError(ZgError, ValueError):
    """A lab's contract or cases are malformed (the lab's fault, not the submission's)."""


@dataclass(frozen=True)
class Contract:
    """What a graded function promises, beyond its return value.

    Args:
        function: the student's function name, as the lab states it (for messages).
        part: the graded part, e.g. ``"Lab 2 Part A"``.
        may_change: argument names the function may leave changed; they must end as the
            reference leaves its own copy (``updates``). Every other argument must be left
            exactly as given (``inputs unchanged``).
        in_place: of ``may_change``, the tensors (or modules: every parameter; or lists of
            them) that must be updated in place, keeping their storage.
        scratch: argument names the function may use as scratch space: any contents on exit,
            but the same type, shape, dtype and device, and the same storage.
        dtype: check the dtype of every returned tensor and the type of returned numbers.
        device: check that the tensors it makes follow its inputs' device.
        stateless: check the globals and the function's own state (``no state``).
        host_syncs: the most host syncs a call may make (``SyncAudit(strict=True)``); ``None``
            leaves them unchecked.
        asynchronous: ``True``: the function starts its collectives asynchronously and returns
            a pending future (``asynchronous``).
        rtol, atol: the tolerance for floating-point values.
        boundaries: the kinds of boundary case (``"empty"``, ``"one element"``, ``"duplicates"``,
            ``"ties"``, ``"all padding"``, ``"rounding boundary"``, ...) the cases must cover;
            :func:`check` refuses cases that miss one.
        extra_keys: a returned mapping may hold keys besides the reference's (those are not
            compared); by default its keys must be the reference's.
        compare: ``compare(expected, got) -> str | None``, a comparison of the returned value
            that replaces the default one (for answers that may differ, e.g. in order); it
            returns what is wrong, or ``None``.
        deterministic: check that the same call twice gives the same answer
            (``deterministic``); ``False`` for a function whose answer is a measurement (a
            time).
        portable: check that a call using numpy gives the same answer where numpy's default
            integer is 32 bits (``portable``).
        refill: with ``stateless``, also call the function twice on the same objects, refilled
            in place with the next case's values between the calls (a result kept between
            calls, keyed on the objects' identity, fails ``no state``); ``False`` for a
            function too slow to call twice per case.
    """

    function: str
    part: str
    may_change: tuple[str, ...] = ()
    in_place: tuple[str, ...] = ()
    scratch: tuple[str, ...] = ()
    dtype: bool = True
    device: bool = True
    stateless: bool = True
    host_syncs: int | None = None
    asynchronous: bool = False
    rtol: float = 1e-5
    atol: float = 1e-8
    boundaries: tuple[str, ...] = ()
    extra_keys: bool = False
    compare: Callable | None = field(default=None, compare=False)
    refill: bool = True
    deterministic: bool = True
    portable: bool = True

    def __post_init__(self):
        for name in ("function", "part"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ContractSetupError(
                    f"{name} must be a non-empty str, got {getattr(self, name)!r}"
                )
        for name in ("may_change", "in_place", "scratch", "boundaries"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ContractSetupError(f"{name} must be a tuple of str, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not set(self.in_place) <= set(self.may_change):
            raise ContractSetupError(
                f"in_place {self.in_place} must be a subset of may_change {self.may_change}"
            )
        if set(self.scratch) & set(self.may_change):
            raise ContractSetupError(
                f"scratch {self.scratch} and may_change {self.may_change} must not overlap"
            )
        if self.host_syncs is not None and (
            isinstance(self.host_syncs, bool)
            or not isinstance(self.host_syncs, int)
            or self.host_syncs < 0
        ):
            raise ContractSetupError(
                f"host_syncs must be None or an int >= 0, got {self.host_syncs!r}"
            )

    @property
    def clauses(self) -> tuple[str, ...]:
        """The clauses this contract checks, in :data:`CLAUSES` order."""
        have = {"runs", "returns", "inputs unchanged"}
        if self.dtype:
            have.add("dtype")
        if self.device:
            have.add("device")
        if self.may_change or self.scratch:
            have.add("updates")
        if self.stateless:
            have.update(("no state", "others unchanged"))
        if self.deterministic and not self.asynchronous:
            have.add("deterministic")
        if self.portable and not self.asynchronous:
            have.add("portable")
        if self.host_syncs is not None:
            have.add("host syncs")
        if self.asynchronous:
            have.add("asynchronous")
        return tuple(c for c in CLAUSES if c in have)

    def describe(self) -> str:
        """The contract in one paragraph, for a student (a lab prints it under the exercise)."""
        changes = ", ".join(f"`{n}`" for n in self.may_change) or "none of its arguments"
        lines = [
            f"{self.part}, `{self.function}`: returns the reference's value"
            + (", dtype" if self.dtype else "")
            + " and shape",
            f"may change {changes}"
            + (f" (in place: {', '.join(self.in_place)})" if self.in_place else ""),
        ]
        if self.scratch:
            lines.append(
                "may use "
                + ", ".join(f"`{n}`" for n in self.scratch)
                + " as scratch (any contents on exit, the same tensor)"
            )
        if self.device:
            lines.append("makes its tensors on its inputs' device")
        if self.stateless:
            lines.append("keeps no state between calls and leaves globals alone")
        if self.deterministic and not self.asynchronous:
            lines.append("gives the same answer to the same call")
        if self.portable and not self.asynchronous:
            lines.append("gives the same answer where numpy's default integer is 32 bits")
        if self.host_syncs is not None:
            lines.append(f"makes at most {self.host_syncs} host syncs")
        if self.asynchronous:
            lines.append("returns a pending future of an asynchronous collective")
        return "; ".join(lines) + "."


@dataclass
class Case:
    """One generated input: positional ``args``, ``kwargs``, a ``label`` for messages, the
    boundary ``kinds`` it covers, an optional precomputed ``expected`` value (else the
    reference is run), and ``watch``: a function returning ``{name: object}`` of objects the
    call must leave unchanged although they are not arguments."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    label: str = ""
    kinds: frozenset = frozenset()
    expected: object = None
    watch: Callable[[], Mapping[str, object]] | None = None

    def __post_init__(self):
        if not isinstance(self.args, tuple):
            self.args = tuple(self.args)
        self.kinds = frozenset([self.kinds] if isinstance(self.kinds, str) else self.kinds)


# ----------------------------------------------------------------------------- describing


def _short(x, depth: int = 0) -> str:
    """A short form of a value for a message: tensors as dtype[shape] and their first items."""
    if isinstance(x, torch.Tensor):
        head = ""
        if x.device.type != "meta":
            flat = x.detach().reshape(-1)[:6].tolist()
            head = " " + str(flat)[:-1] + (", ...]" if x.numel() > 6 else "]")
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}{head}"
    if isinstance(x, (list, tuple)) and depth < 2:
        inner = ", ".join(_short(v, depth + 1) for v in x[:5]) + (", ..." if len(x) > 5 else "")
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    if isinstance(x, dict) and depth < 2:
        items = list(x.items())[:5]
        return "{" + ", ".join(f"{k!r}: {_short(v, depth + 1)}" for k, v in items) + "}"
    if isinstance(x, set | frozenset) and depth < 2:
        inner = ", ".join(_short(v, depth + 1) for v in sorted(x, key=repr)[:5])
        return f"{type(x).__name__}({{{inner}{', ...' if len(x) > 5 else ''}}})"
    try:
        text = repr(x)
    except Exception:  # a student's __repr__ that raises: the type still names it
        text = f"<{type(x).__name__}>"
    # An object's memory address says nothing to a student and differs from run to run.
    text = _ADDRESS.sub("", text)
    return text if len(text) <= 80 else text[:77] + "..."


_ADDRESS = re.compile(r"\s+at\s+0x[0-9a-fA-F]+|\bid=0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")


def _describe_case(case: Case, names: Sequence[str]) -> str:
    parts = [f"{n}={_short(v)}" for n, v in zip(names, case.args)]
    parts += [f"{k}={_short(v)}" for k, v in case.kwargs.items()]
    label = f"'{case.label}' " if case.label else ""
    return f"{label}({', '.join(parts)})"


# ----------------------------------------------------------------------------- comparing


def compare_values(
    expected,
    got,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    dtype: bool = True,
    path: str = "the result",
):
    """What differs between ``expected`` and ``got`` as ``(clause, message)``, or ``None``."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return (
                "returns",
                f"{path}: expected a tensor {_short(expected)}, got {type(got).__name__} {_short(got)}",
            )
        if got.device.type == "meta" or got.device != expected.device:
            return (
                "device",
                f"{path}: expected a tensor on {expected.device}, got one on {got.device}",
            )
        if tuple(got.shape) != tuple(expected.shape):
            return (
                "returns",
                f"{path}: expected shape {list(expected.shape)}, got {list(got.shape)}",
            )
        if dtype and got.dtype != expected.dtype:
            return "dtype", f"{path}: expected dtype {expected.dtype}, got {got.dtype}"
        if (
            expected.layout == got.layout == torch.strided
            and expected.is_contiguous()
            and not got.is_contiguous()
        ):
            return (
                "returns",
                f"{path}: expected a contiguous tensor (as the reference returns), got a "
                f"non-contiguous view with strides {list(got.stride())}: return a fresh tensor "
                "(.contiguous(), or build it in place)",
            )
        e, g = expected.detach(), got.detach()
        if e.is_floating_point() or g.is_floating_point() or e.is_complex():
            g = g.to(e.dtype) if not dtype else g
            same = (
                bool(torch.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True))
                if e.numel()
                else True
            )
        else:
            same = bool(torch.equal(g.to(e.dtype), e))
        if not same:
            diff = (
                (g.to(e.dtype) != e)
                if not e.is_floating_point()
                else ~torch.isclose(g.to(e.dtype), e, rtol=rtol, atol=atol, equal_nan=True)
            )
            where = diff.nonzero()[0].tolist() if diff.any() else []
            at = tuple(where)
            return "returns", (
                f"{path}: {int(diff.sum())} of {e.numel()} entries differ, first at {list(at)}: "
                f"expected {e[at].item() if at or e.dim() == 0 else e}, got {g[at].item() if at or g.dim() == 0 else g}"
            )
        return None
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            return "returns", f"{path}: expected a numpy array, got {type(got).__name__}"
        return compare_values(
            torch.from_numpy(expected), torch.from_numpy(np.asarray(got)), rtol, atol, dtype, path
        )
    if isinstance(expected, (list, tuple)):
        if isinstance(got, (list, tuple)) and type(got) is not type(expected):
            return (
                "returns",
                f"{path}: expected a {type(expected).__name__}, got a {type(got).__name__} "
                f"{_short(got)}",
            )
        if not isinstance(got, (list, tuple)):
            return (
                "returns",
                f"{path}: expected a {type(expected).__name__} of {len(expected)}, got {type(got).__name__} {_short(got)}",
            )
        if len(got) != len(expected):
            first = next(
                (
                    i
                    for i, (e, g) in enumerate(zip(expected, got))
                    if compare_values(e, g, rtol, atol, False, "")
                ),
                min(len(got), len(expected)),
            )
            return (
                "returns",
                f"{path}: expected {len(expected)} items, got {len(got)}, first differing at "
                f"[{first}]: expected {_short(list(expected[first : first + 5]))}, got "
                f"{_short(list(got[first : first + 5]))} (expected {_short(expected)}, got "
                f"{_short(got)})",
            )
        for i, (e, g) in enumerate(zip(expected, got)):
            found = compare_values(e, g, rtol, atol, dtype, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return "returns", f"{path}: expected a mapping, got {type(got).__name__}"
        if type(got) is not type(expected):
            # a Counter answers 0 for a missing key, a defaultdict adds it: not a plain dict
            return (
                "returns",
                f"{path}: expected a {type(expected).__name__}, got a "
                f"{type(got).__module__}.{type(got).__qualname__} {_short(got)}",
            )
        if set(got) != set(expected):
            return (
                "returns",
                f"{path}: expected keys {sorted(map(str, expected))}, got {sorted(map(str, got))}",
            )
        for k in expected:
            found = compare_values(expected[k], got[k], rtol, atol, dtype, f"{path}[{k!r}]")
            if found:
                return found
        return None
    if isinstance(expected, bool) or expected is None:
        if got is not expected and not (
            isinstance(got, (bool, np.bool_)) and bool(got) == expected
        ):
            return "returns", f"{path}: expected {_short(expected)}, got {_short(got)}"
        if dtype and isinstance(expected, bool) and type(got) is not bool:
            return (
                "dtype",
                f"{path}: expected a Python bool {_short(expected)}, got {type(got).__name__} {_short(got)}",
            )
        return None
    if isinstance(expected, numbers.Number):
        if (
            isinstance(got, torch.Tensor)
            or not isinstance(got, numbers.Number)
            or isinstance(got, bool)
        ):
            return "dtype" if dtype else "returns", (
                f"{path}: expected a Python {type(expected).__name__} {_short(expected)}, got {type(got).__name__} {_short(got)}"
            )
        if (
            dtype
            and isinstance(expected, numbers.Integral)
            and not isinstance(got, numbers.Integral)
        ):
            return (
                "dtype",
                f"{path}: expected an int {_short(expected)}, got {type(got).__name__} {_short(got)}",
            )
        if dtype and type(expected) in (int, float, complex) and type(got) is not type(expected):
            # a Python number where the contract says one: not numpy's scalar, not an int for
            # a float (they differ in division, in JSON and in every later sum)
            return (
                "dtype",
                f"{path}: expected a Python {type(expected).__name__} {_short(expected)}, got "
                f"{type(got).__module__}.{type(got).__name__} {_short(got)}",
            )
        if isinstance(expected, numbers.Integral) and isinstance(got, numbers.Integral):
            same = int(got) == int(expected)
        else:
            same = (math.isnan(float(expected)) and math.isnan(float(got))) or math.isclose(
                float(got), float(expected), rel_tol=rtol, abs_tol=atol
            )
        return (
            None if same else ("returns", f"{path}: expected {_short(expected)}, got {_short(got)}")
        )
    try:
        same = bool(got == expected)
    except Exception:
        same = False
    return None if same else ("returns", f"{path}: expected {_short(expected)}, got {_short(got)}")


# ----------------------------------------------------------------------------- snapshots

_ATOMS = (int, float, complex, str, bytes, bool, type(None), torch.dtype, torch.device)


def _snapshot(x, depth: int = 0, seen: set | None = None):
    """A deep, comparable copy of what ``x`` holds (see :func:`_changed`)."""
    seen = set() if seen is None else seen
    if isinstance(x, _ATOMS) or isinstance(x, np.generic):
        return ("atom", x)
    if id(x) in seen or depth > 6:
        return ("same", id(x))
    seen = seen | {id(x)}
    if isinstance(x, torch.Tensor):
        grad = x.grad if x.is_leaf and x.requires_grad else None
        return (
            "tensor",
            x.detach().clone() if x.device.type != "meta" else None,
            x.dtype,
            tuple(x.shape),
            x.device,
            None if grad is None else grad.detach().clone(),
            x.data_ptr() if x.device.type != "meta" else None,
            _tensor_meta(x),
        )
    if isinstance(x, np.ndarray):
        return ("ndarray", x.copy())
    if isinstance(x, torch.nn.Module):
        return (
            "module",
            {k: _snapshot(v, depth + 1, seen) for k, v in x.state_dict(keep_vars=True).items()},
            x.training,
            {k: _snapshot(v, depth + 1, seen) for k, v in vars(x).items() if not k.startswith("_")},
            _module_hooks(x),
        )
    if isinstance(x, torch.optim.Optimizer):
        return ("optimizer", _snapshot(x.state_dict(), depth + 1, seen))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_snapshot(v, depth + 1, seen) for v in x])
    if isinstance(x, (set, frozenset)):
        return ("set", set(x) if all(isinstance(v, _ATOMS) for v in x) else {id(v) for v in x})
    if isinstance(x, Mapping):
        return ("mapping", {k: _snapshot(v, depth + 1, seen) for k, v in x.items()})
    if inspect.isroutine(x) or inspect.isclass(x) or inspect.ismodule(x):
        return ("same", id(x))
    state = getattr(x, "__dict__", None)
    slots = [s for c in type(x).__mro__ for s in getattr(c, "__slots__", ()) if hasattr(x, s)]
    if state is not None or slots:
        fields = dict(state or {})
        fields.update({s: getattr(x, s) for s in slots})
        return ("object", type(x), {k: _snapshot(v, depth + 1, seen) for k, v in fields.items()})
    return ("same", id(x))


_MODULE_HOOKS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


def _hook_keys(hooks) -> tuple:
    return tuple(hooks) if isinstance(hooks, Mapping) else ()


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit the same values, a NaN equal to a NaN (``torch.equal`` says NaN != NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all())
    return bool(torch.equal(a, b))


def _tensor_meta(x: torch.Tensor) -> dict:
    """A tensor's layout and autograd state, beyond its values: ``requires_grad``, strides,
    storage offset, the hooks registered on it and the names of the Python attributes set on it
    (``x.memo = ...``)."""
    meta = {"requires_grad": x.requires_grad}
    if x.layout == torch.strided and x.device.type != "meta":
        meta["stride"] = tuple(x.stride())
        meta["storage_offset"] = x.storage_offset()
    meta["hooks"] = _hook_keys(getattr(x, "_backward_hooks", None))
    meta["grad_accumulation_hooks"] = _hook_keys(getattr(x, "_post_accumulate_grad_hooks", None))
    meta["attributes"] = tuple(sorted(getattr(x, "__dict__", {})))
    return meta


def _module_hooks(m: torch.nn.Module) -> dict:
    """The hooks registered on ``m`` and its submodules, by submodule name and kind."""
    return {
        (name, kind): _hook_keys(getattr(sub, kind, None))
        for name, sub in m.named_modules()
        for kind in _MODULE_HOOKS
        if _hook_keys(getattr(sub, kind, None))
    }


def _meta_change(before: dict, now: dict, path: str) -> str | None:
    for key, was in before.items():
        if now.get(key) != was:
            if key == "attributes":
                return (
                    f"{path}'s Python attributes were {list(was)}, are now "
                    f"{list(now.get(key, ()))} (a value kept on a tensor is state)"
                )
            what = {
                "requires_grad": f"{path}.requires_grad was {was}, is now {now.get(key)}",
                "stride": f"{path}'s strides were {was}, are now {now.get(key)} (a layout change)",
                "storage_offset": f"{path}'s storage offset was {was}, is now {now.get(key)}",
                "hooks": f"{path} gained or lost a gradient hook (register_hook) and kept it",
                "grad_accumulation_hooks": f"{path} gained or lost a gradient-accumulation hook",
            }
            return what[key]
    return None


def _changed(before, x, path: str) -> str | None:
    """What in ``x`` differs from ``before`` (a :func:`_snapshot`), or ``None``."""
    kind = before[0]
    if kind == "atom":
        return (
            None
            if type(x) is type(before[1]) and x == before[1] or x is before[1]
            else (f"{path} was {before[1]!r}, is now {_short(x)}")
        )
    if kind == "same":
        return None if id(x) == before[1] else f"{path} was replaced by another object"
    if kind == "tensor":
        _, value, dtype, shape, device, grad, _ptr, meta = before
        if not isinstance(x, torch.Tensor):
            return f"{path} is no longer a tensor"
        if x.dtype != dtype or tuple(x.shape) != shape or x.device != device:
            return f"{path} was {str(dtype).replace('torch.', '')}{list(shape)}, is now {_short(x)}"
        if value is not None and not torch.equal(x.detach(), value):
            if value.is_floating_point():
                diff = ~torch.isclose(x.detach(), value, rtol=0, atol=0, equal_nan=True)
            else:
                diff = x.detach() != value
            if diff.any():
                at = tuple(diff.nonzero()[0].tolist())
                return (
                    f"{path} was changed in place: {int(diff.sum())} of {value.numel()} entries "
                    f"differ, first at {list(at)}: was {value[at].item()}, now {x.detach()[at].item()}"
                )
        now = x.grad if x.is_leaf and x.requires_grad else None
        if (grad is None) != (now is None):
            return f"{path}.grad was {'set' if grad is None else 'cleared'}"
        if grad is not None and not _same_values(now.detach(), grad):
            return f"{path}.grad was changed (for example scaled and left so)"
        return _meta_change(meta, _tensor_meta(x), path)
    if kind == "ndarray":
        if (
            not isinstance(x, np.ndarray)
            or x.shape != before[1].shape
            or not np.array_equal(x, before[1], equal_nan=True)
        ):
            return f"{path} (a numpy array) was changed in place"
        return None
    if kind == "module":
        _, state, training, attrs, hooks = before
        if not isinstance(x, torch.nn.Module):
            return f"{path} is no longer a module"
        now = x.state_dict(keep_vars=True)
        if set(now) != set(state):
            return f"{path}'s parameters and buffers changed names"
        for k, snap in state.items():
            found = _changed(snap, now[k], f"{path}.{k}")
            if found:
                return found
        if x.training != training:
            return f"{path} was switched to {'training' if x.training else 'eval'} mode"
        if _module_hooks(x) != hooks:
            return f"{path} gained or lost a module hook (register_forward_hook, ...) and kept it"
        return _changed(
            ("mapping", attrs), {k: v for k, v in vars(x).items() if not k.startswith("_")}, path
        )
    if kind == "optimizer":
        return _changed(before[1], x.state_dict(), f"{path}'s state")
    if kind in ("list", "tuple"):
        items = before[1]
        if not isinstance(x, (list, tuple)) or len(x) != len(items):
            return f"{path} was {_short_len(kind, len(items))}, is now {_short(x)}"
        for i, (snap, v) in enumerate(zip(items, x)):
            found = _changed(snap, v, f"{path}[{i}]")
            if found:
                return found
        return None
    if kind == "set":
        now = set(x) if all(isinstance(v, _ATOMS) for v in x) else {id(v) for v in x}
        return None if now == before[1] else f"{path} (a set) was changed"
    if kind == "mapping":
        items = before[1]
        if not isinstance(x, Mapping):
            return f"{path} is no longer a mapping"
        if set(x) != set(items):
            added, removed = set(x) - set(items), set(items) - set(x)
            return (
                f"{path} gained keys {sorted(map(str, added))} and lost {sorted(map(str, removed))}"
            )
        for k, snap in items.items():
            found = _changed(snap, x[k], f"{path}[{k!r}]")
            if found:
                return found
        return None
    if kind == "object":
        _, cls, fields = before
        if type(x) is not cls:
            return f"{path} was replaced by a {type(x).__name__}"
        now = dict(getattr(x, "__dict__", {}) or {})
        now.update(
            {
                s: getattr(x, s)
                for c in cls.__mro__
                for s in getattr(c, "__slots__", ())
                if hasattr(x, s)
            }
        )
        if set(now) != set(fields):
            return f"{path} gained attributes {sorted(set(now) - set(fields))}"
        for k, snap in fields.items():
            found = _changed(snap, now[k], f"{path}.{k}")
            if found:
                return found
        return None
    raise AssertionError(kind)


def _short_len(kind: str, n: int) -> str:
    return f"a {kind} of {n}"


def _storage_kept(before, x) -> bool:
    """Whether a tensor (or every parameter of a module) kept its storage."""
    if before[0] == "tensor":
        return isinstance(x, torch.Tensor) and (before[6] is None or x.data_ptr() == before[6])
    if before[0] == "module":
        now = x.state_dict(keep_vars=True)
        return all(_storage_kept(snap, now[k]) for k, snap in before[1].items() if k in now)
    if before[0] in ("list", "tuple"):
        return isinstance(x, (list, tuple)) and all(
            _storage_kept(snap, v) for snap, v in zip(before[1], x)
        )
    if before[0] in ("object", "mapping"):
        return _moved(before, x, "") is None
    return True


def _moved(before, x, path: str) -> str | None:
    """The first tensor (by its path) held by ``x`` that no longer has the storage it had in
    ``before`` (a :func:`_snapshot`), or ``None``: an object's attributes, a mapping's values,
    a list's items and a module's parameters and buffers, recursively."""
    kind = before[0]
    if kind == "tensor":
        return None if _storage_kept(before, x) else path
    if kind == "module":
        if not isinstance(x, torch.nn.Module):
            return path
        now = x.state_dict(keep_vars=True)
        for k, snap in before[1].items():
            found = _moved(snap, now[k], f"{path}.{k}") if k in now else f"{path}.{k}"
            if found:
                return found
        return None
    if kind in ("list", "tuple"):
        if not isinstance(x, (list, tuple)) or len(x) != len(before[1]):
            return path
        for i, (snap, v) in enumerate(zip(before[1], x)):
            found = _moved(snap, v, f"{path}[{i}]")
            if found:
                return found
        return None
    if kind == "mapping":
        if not isinstance(x, Mapping):
            return path
        for k, snap in before[1].items():
            found = _moved(snap, x[k], f"{path}[{k!r}]") if k in x else f"{path}[{k!r}]"
            if found:
                return found
        return None
    if kind == "object":
        fields = before[2]
        for k, snap in fields.items():
            found = _moved(snap, getattr(x, k), f"{path}.{k}") if hasattr(x, k) else f"{path}.{k}"
            if found:
                return found
        return None
    return None


def _own_state(fn) -> dict:
    """What the function keeps on itself: through partials, bound methods and wrappers, its
    attributes, defaults and closure cells, or a callable object's attributes."""
    import functools

    own = {}
    target = fn
    for _ in range(8):
        if callable(getattr(target, "cache_info", None)):  # functools.lru_cache / cache
            with contextlib.suppress(Exception):
                own[f"cache of {getattr(target, '__name__', 'a function')}"] = (
                    target.cache_info().currsize
                )
        if isinstance(target, functools.partial):
            own[f"partial {id(target)}"] = (target.args, dict(target.keywords))
            target = target.func
        elif inspect.ismethod(target):
            own[f"bound to {id(target)}"] = target.__self__
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        else:
            break
    if inspect.isfunction(target):
        own["__defaults__"] = target.__defaults__
        own["__kwdefaults__"] = target.__kwdefaults__
        own["__dict__"] = dict(vars(target))
        own["closure"] = [c.cell_contents for c in (target.__closure__ or ()) if _cell_full(c)]
    elif callable(target) and not inspect.isroutine(target):
        own["object"] = target
    return own


_IPYTHON_HISTORY = re.compile(
    r"^(_+|_i+|_i?\d+|_oh|_ih|_dh|_exit_code|__builtins?__|__name__|__doc__|__package__|__loader__|__spec__)$"
)


def _state_of(fn, namespace: Mapping | None, deep: bool = True):
    """What a call may not change: the function's own state (:func:`_own_state`) and the
    namespace's bindings: the whole contents of its dicts, lists and sets, and for every
    function and class the notebook itself defined, the function's own state (closure cells,
    defaults, attributes, an ``lru_cache``'s size) and the class's attributes."""
    binding = {}
    home = (namespace or {}).get("__name__", "__main__")
    for k, v in (namespace or {}).items():
        if _IPYTHON_HISTORY.match(k) or k in ("In", "Out", "exit", "quit", "get_ipython"):
            binding[k] = (id(v), None)  # IPython's own names: its history changes every cell
            continue
        content = None
        if not deep:
            content = _ids(v) if isinstance(v, (dict, list, set)) else None
        elif isinstance(v, (dict, list, set)):
            content = _snapshot(v)
        elif getattr(v, "__module__", None) == home and v is not fn:
            if inspect.isclass(v):
                content = _snapshot(
                    {
                        a: x
                        for a, x in vars(v).items()
                        if not (a.startswith("__") and a.endswith("__"))
                        and not inspect.isroutine(x)
                    }
                )
            elif callable(v):
                content = _snapshot(_own_state(v))
        binding[k] = (id(v), content)
    return _snapshot(_own_state(fn)), binding


def _current(v, namespace, fn):
    """The value :func:`_state_of` snapshots for one global, read again now."""
    if isinstance(v, (dict, list, set)):
        return v
    if inspect.isclass(v):
        return {
            a: x
            for a, x in vars(v).items()
            if not (a.startswith("__") and a.endswith("__")) and not inspect.isroutine(x)
        }
    return _own_state(v)


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _ids(v):
    """The identities of a container's items (a cheap check, every call, of what a call put in
    or took out of a global dict, list or set)."""
    if isinstance(v, dict):
        return ("ids", {k: id(x) for k, x in v.items()})
    if isinstance(v, list):
        return ("ids", [id(x) for x in v])
    return ("ids", {id(x) for x in v})


def _state_changes(before, fn, namespace, deep: bool = True) -> str | None:
    """What changed since ``before`` (:func:`_state_of` with the same ``deep``): the function's
    own state, and the namespace's bindings (``deep``: the whole contents of its containers and
    of the notebook's own functions and classes; else the items' identities)."""
    own_before, binding_before = before
    _, binding_now = _state_of(fn, namespace, deep=False)
    found = _changed(own_before, _own_state(fn), "the function's own state")
    if found:
        return found + " (a function must keep nothing between calls)"
    if namespace is not None:
        added = sorted(set(binding_now) - set(binding_before))
        if added:
            return f"the call added global {added[0]!r} to the notebook"
        for k, (ident, content) in binding_before.items():
            if k not in binding_now:
                return f"the call deleted global {k!r}"
            if binding_now[k][0] != ident:
                return f"the call rebound global {k!r}"
            if content is not None and not deep:
                if binding_now[k][1] != content:
                    return f"the call changed the contents of global {k!r}"
            elif content is not None:
                found = _changed(content, _current(namespace[k], namespace, fn), f"global {k!r}")
                if found:
                    return f"the call changed the contents of global {k!r}: {found}"
    return None


# ----------------------------------------------------------------------------- process state


def _paired(module, label: str) -> list[tuple[str, object, object]]:
    """The settings ``module`` offers a setter and a getter for, found by their names:
    ``set_X`` / ``setX`` / ``_set_X`` beside ``get_X`` / ``getX`` / ``_get_X`` / ``is_X`` /
    ``is_X_enabled`` / ``are_X_enabled``, the getter one that takes no argument and warns of
    nothing (a deprecated alias of another). As (name, getter, setter)."""
    names = set(dir(module))
    out = []
    for name in sorted(names):
        for prefix, getters in (
            ("_set_", ("_get_{}",)),
            ("set_", ("get_{}", "is_{}", "is_{}_enabled", "are_{}_enabled")),
            ("set", ("get{}",)),
        ):
            if not name.startswith(prefix):
                continue
            x = name[len(prefix) :]
            for getter in (g.format(x) for g in getters):
                if getter in names and "rng_state" not in getter:
                    out.append(
                        (f"{label}.{getter}()", getattr(module, getter), getattr(module, name))
                    )
            break
    found = []
    for key, getter, setter in out:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                getter()
            except Exception:  # it takes arguments: not a process-wide setting
                continue
        if not warned:
            found.append((key, getter, setter))
    return found


def _find_settings() -> tuple[tuple[str, object, object], ...]:
    """Every process-wide setting torch and numpy offer a getter and a setter for (``_paired``
    over ``torch``, ``torch._C`` and ``numpy``: the matmul precision, the TF32 and cuDNN
    switches, default dtype and device, determinism, autocast, numpy's error handling and print
    options...), each getter once; as (name, getter, setter)."""
    seen, found = set(), []
    for module, label in ((torch, "torch"), (torch._C, "torch._C"), (np, "numpy")):
        for key, getter, setter in _paired(module, label):
            if id(getter) not in seen:
                seen.add(id(getter))
                found.append((key, getter, setter))
    return tuple(found)


# Found once, when the grader is imported (before any submission runs: a global that changed
# later would read as tampering, zg_course/integrity.py), and held as a tuple.
_SETTINGS = _find_settings()


def _library_settings() -> tuple[tuple[str, object, object], ...]:
    """The settings :func:`_find_settings` found when the grader was imported."""
    return _SETTINGS


def _backend_flags() -> dict[str, object]:
    """The flags of ``torch.backends``' modules (``torch.backends.cudnn.benchmark``,
    ``torch.backends.opt_einsum.strategy``, ...): each module's public attributes that hold a
    plain value; and torch's print options (``torch.set_printoptions``, which has no getter)."""
    flags = {}
    for mod_name, mod in sorted(vars(torch.backends).items()):
        if mod_name.startswith("_") or not isinstance(mod, types.ModuleType):
            continue
        for name in dir(mod):
            if name.startswith("_"):
                continue
            try:
                value = getattr(mod, name)
            except Exception:
                continue
            if isinstance(value, (bool, int, float, str, type(None))):
                flags[f"torch.backends.{mod_name}.{name}"] = value
    from torch._tensor_str import PRINT_OPTS

    flags["torch's print options (torch.set_printoptions)"] = dict(vars(PRINT_OPTS))
    return flags


def _process_state() -> dict:
    """What a call can leave changed for the whole process, not through its arguments: every
    setting torch and numpy offer a getter and a setter for (:func:`_library_settings`), the
    flags of ``torch.backends`` and torch's print options (:func:`_backend_flags`), every random
    generator (torch's CPU and CUDA ones, numpy's and Python's global ones), the global module
    hooks, the environment variables and the working directory."""
    import random

    import torch.nn.modules.module as module_hooks

    state = {}
    for key, getter, _ in _library_settings():
        try:
            state[key] = getter()
        except Exception as exc:  # a getter that fails now: what it says is its state
            state[key] = f"{type(exc).__name__}: {exc}"
    state.update(_backend_flags())
    state.update(
        {
            "torch.get_default_dtype()": torch.get_default_dtype(),
            "torch.get_num_threads()": torch.get_num_threads(),
            "torch.get_num_interop_threads()": torch.get_num_interop_threads(),
            "torch.are_deterministic_algorithms_enabled()": (
                torch.are_deterministic_algorithms_enabled()
            ),
            "torch.is_deterministic_algorithms_warn_only_enabled()": (
                torch.is_deterministic_algorithms_warn_only_enabled()
            ),
            "torch.is_grad_enabled()": torch.is_grad_enabled(),
            "torch.is_inference_mode_enabled()": torch.is_inference_mode_enabled(),
            "torch.is_anomaly_enabled()": torch.is_anomaly_enabled(),
            "torch.backends.cudnn.deterministic": torch.backends.cudnn.deterministic,
            "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
            "torch's random generator (torch.manual_seed, torch.rand, ...)": bytes(
                torch.random.get_rng_state().numpy().tobytes()
            ),
            "numpy's global random generator (np.random.seed, np.random.rand, ...)": repr(
                np.random.get_state()
            ),
            "Python's random module (random.seed, random.random, ...)": repr(random.getstate()),
            "the global module hooks (torch.nn.modules.module.register_module_*_hook)": tuple(
                (name, tuple(getattr(module_hooks, name)))
                for name in sorted(dir(module_hooks))
                if name.startswith("_global_") and name.endswith("hooks")
            ),
            "os.environ": dict(os.environ),
            "the working directory (os.chdir)": os.getcwd(),
        }
    )
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch's CUDA random generators"] = tuple(
            bytes(t.cpu().numpy().tobytes()) for t in torch.cuda.get_rng_state_all()
        )
    return state


def _process_changes(before: dict, after: dict) -> list[str]:
    """The names of the process-wide settings that differ between two :func:`_process_state`."""
    return [k for k in before if before[k] != after.get(k)] + [k for k in after if k not in before]


def _restore_process(state: dict) -> None:
    """Put back the settings a call changed (so one bad call does not fail every later test)."""
    import random

    torch.set_default_dtype(state["torch.get_default_dtype()"])
    torch.set_num_threads(state["torch.get_num_threads()"])
    torch.use_deterministic_algorithms(
        state["torch.are_deterministic_algorithms_enabled()"],
        warn_only=state["torch.is_deterministic_algorithms_warn_only_enabled()"],
    )
    torch.set_grad_enabled(state["torch.is_grad_enabled()"])
    torch.set_anomaly_enabled(state["torch.is_anomaly_enabled()"])
    torch.backends.cudnn.deterministic = state["torch.backends.cudnn.deterministic"]
    torch.backends.cudnn.benchmark = state["torch.backends.cudnn.benchmark"]
    if os.environ != state["os.environ"]:
        os.environ.clear()
        os.environ.update(state["os.environ"])
    if os.getcwd() != state["the working directory (os.chdir)"]:
        os.chdir(state["the working directory (os.chdir)"])
    del random  # the generators are restored by _keep_generators
    for key, getter, setter in _library_settings():
        if key not in state or key in _RESTORED:
            continue
        try:
            if getter() != state[key]:
                value = state[key]
                setter(**value) if isinstance(value, dict) else setter(value)
        except Exception:  # a setting torch allows to set once only (interop threads)
            pass
    for key, value in _backend_flags().items():
        if state.get(key, value) == value:
            continue
        if key.startswith("torch.backends."):
            mod_name, name = key[len("torch.backends.") :].split(".", 1)
            with contextlib.suppress(Exception):
                setattr(getattr(torch.backends, mod_name), name, state[key])
        else:
            from torch._tensor_str import PRINT_OPTS

            for name, was in state[key].items():
                setattr(PRINT_OPTS, name, was)


_RESTORED = frozenset(  # put back by name above (a setter with other arguments)
    (
        "torch.get_default_dtype()",
        "torch.get_num_threads()",
        "torch.are_deterministic_algorithms_enabled()",
        "torch.is_grad_enabled()",
        "torch.is_anomaly_enabled()",
    )
)


_MID_STREAM = 20261204


_SETTERS = {
    "set_num_threads": "torch.get_num_threads()",
    "set_num_interop_threads": "torch.get_num_interop_threads()",
    "set_default_dtype": "torch.get_default_dtype()",
    "set_default_tensor_type": "torch.get_default_dtype()",
    "use_deterministic_algorithms": "torch.are_deterministic_algorithms_enabled()",
    "manual_seed": "torch's random generator (torch.manual_seed, torch.rand, ...)",
    "seed": "torch's random generator (torch.manual_seed, torch.rand, ...)",
    "set_rng_state": "torch's random generator (torch.manual_seed, torch.rand, ...)",
}


@contextlib.contextmanager
def _settings_calls_recorded(calls: list):
    """While active, a call from outside the kit to one of torch's process-wide setters
    (``torch.set_num_threads``, ``torch.set_default_dtype``, ``torch.manual_seed``, ...) is
    recorded by the setting it changes, even when the value it sets is the one already there
    (on another machine, or after another cell, it would not be)."""

    def recorded(name, original):
        def setter(*args, **kwargs):
            if not _made_by_the_kit(sys._getframe(1)):
                calls.append(_SETTERS[name])
            return original(*args, **kwargs)

        return setter

    with _patched(torch, _SETTERS, recorded):
        yield


@contextlib.contextmanager
def _keep_generators():
    """Run a block from known settings and generators (torch's defaults, a mid-stream state of
    every random generator) and put back, after it, every setting and generator as it was."""
    import random

    torch_state = torch.random.get_rng_state()
    cuda = (
        torch.cuda.get_rng_state_all()
        if torch.cuda.is_available() and torch.cuda.is_initialized()
        else None
    )
    numpy_state, python_state = np.random.get_state(), random.getstate()
    settings = _process_state()
    # Every call starts from the same known settings, whatever an earlier call or cell left
    # (so a setting a call changes shows even when an earlier call already changed it):
    # torch's defaults. (The thread count is left as it is: a forked grader runs one thread,
    # and OpenMP hangs in a forked child that starts more; a call to torch.set_num_threads is
    # seen by _settings_calls_recorded instead.)
    torch.set_default_dtype(torch.float32)
    torch.use_deterministic_algorithms(False)
    torch.set_grad_enabled(True)
    torch.set_anomaly_enabled(False)
    # Every call starts from one state a few draws past a seed, the same for the reference and
    # the student: a reseed (torch.manual_seed(0), ...) changes it whatever seed it names.
    torch.random.manual_seed(_MID_STREAM)
    torch.rand(7)
    np.random.seed(_MID_STREAM % 2**32)
    np.random.rand(7)
    random.seed(_MID_STREAM)
    random.random()
    try:
        yield
    finally:
        _restore_process(settings)
        torch.random.set_rng_state(torch_state)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        np.random.set_state(numpy_state)
        random.setstate(python_state)


# ----------------------------------------------------------------------------- device


def _constructors() -> frozenset:
    try:
        from torch.utils._device import _device_constructors

        return frozenset(_device_constructors())
    except Exception:
        return frozenset(
            getattr(torch, n)
            for n in (
                "zeros",
                "ones",
                "empty",
                "full",
                "arange",
                "linspace",
                "logspace",
                "eye",
                "tensor",
                "rand",
                "randn",
                "randint",
                "randperm",
                "empty_strided",
                "as_tensor",
                "scalar_tensor",
                "range",
            )
            if hasattr(torch, n)
        )


class _DefaultDeviceElsewhere(TorchFunctionMode):
    """While active, a factory call without ``device=`` that makes a tensor of one or more
    dimensions makes it on ``meta`` instead: the default device is not the inputs' device."""

    def __init__(self):
        super().__init__()
        self.constructors = _constructors()
        self.made = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if (
            func in self.constructors
            and kwargs.get("device") is None
            and not (args and isinstance(args[0], torch.Tensor))
            and isinstance(out, torch.Tensor)
            and out.dim() > 0
            and not _made_by_the_kit(sys._getframe(1))
        ):
            self.made += 1
            return out.to("meta")
        return out


class _NoMetaMixing(TorchDispatchMode):
    """While active, an op whose operands mix a ``meta`` tensor (one :class:`_DefaultDeviceElsewhere`
    made) with a tensor of another device raises, as a CPU tensor meeting a CUDA one does:
    PyTorch runs some CPU kernels on a meta operand (an index, a scatter's source) and reads
    garbage instead of refusing. A 0-d tensor may meet any device, as in PyTorch."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        devices = {t.device.type for t in _tensors_in((args, kwargs)) if t.dim() > 0}
        if "meta" in devices and len(devices) > 1:
            other = sorted(devices - {"meta"})[0]
            raise RuntimeError(
                f"{func}: expected its tensors on one device, but a tensor on device meta "
                f"(made without device=) met one on device {other}"
            )
        return func(*args, **kwargs)


def _tensors_in(x, depth: int = 0):
    """The tensors in ``x`` (nested lists, tuples and dicts), for the device check."""
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)) and depth < 3:
        for v in x:
            yield from _tensors_in(v, depth + 1)
    elif isinstance(x, dict) and depth < 3:
        for v in x.values():
            yield from _tensors_in(v, depth + 1)


# The kit's code (zg/) and the course's (zg_course/: the labs' helpers, this harness).
_KIT_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep for path in (zg.__file__, __file__)
)


def _made_by_the_kit(frame) -> bool:
    """Whether the factory call comes from the kit's own code (``zg/``, or the course's
    ``zg_course/``), which a student's function may call (``part.local_graph``, ``zg.Graph``):
    the kit's host-side bookkeeping is tested on its own, and the clause judges the tensors the
    student's code makes."""
    return frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_KIT_DIRS)


def _device_error(exc: BaseException) -> bool:
    text = str(exc)
    return "meta" in text and ("device" in text or "same device" in text)


def _has_meta(x) -> bool:
    if isinstance(x, torch.Tensor):
        return x.device.type == "meta"
    if isinstance(x, (list, tuple)):
        return any(_has_meta(v) for v in x)
    if isinstance(x, Mapping):
        return any(_has_meta(v) for v in x.values())
    return False


def _to_device(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, list):
        return [_to_device(v, device) for v in x]
    if isinstance(x, tuple):
        return tuple(_to_device(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to_device(v, device) for k, v in x.items()}
    if isinstance(x, torch.nn.Module):
        return x.to(device)
    return x


# ----------------------------------------------------------------------------- asynchrony

_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "all_to_all_single",
    "reduce",
)


class _PendingFuture(torch.futures.Future):
    """A collective's future the harness completes only after the function returned; a wait
    on it before then is recorded (and completes it, so nothing hangs)."""

    def __init__(self, value, notes: list):
        super().__init__()
        self._pending_value = value
        self._notes = notes

    def settle(self):
        if not self.done():
            self.set_result(self._pending_value)

    def wait(self):
        self._notes.append("waited on a collective's future before returning")
        self.settle()
        return super().wait()


class _PendingWork:
    def __init__(self, future: _PendingFuture, notes: list):
        self._future = future
        self._notes = notes

    def wait(self, *args, **kwargs):
        self._notes.append("called wait() on a collective before returning")
        self._future.settle()
        return True

    def is_completed(self):
        return self._future.done()

    def get_future(self):
        return self._future


@contextlib.contextmanager
def _collectives_deferred(notes: list, futures: list):
    """Wrap ``torch.distributed``'s collectives: each still runs (through whatever the
    attribute is now, the lab's stand-in included), but an asynchronous one hands back a work
    whose future completes only when the harness says so; a blocking one is noted."""
    import torch.distributed as dist

    def wrap(name, original):
        def deferred(*args, async_op=False, **kwargs):
            if not async_op:
                notes.append(f"called dist.{name} without async_op=True (a blocking collective)")
                return original(*args, **kwargs)
            work = original(*args, async_op=True, **kwargs)
            if work is not None and hasattr(work, "wait"):
                work.wait()
            tensors = [a for a in args if isinstance(a, torch.Tensor)][:1]
            future = _PendingFuture(tensors, notes)
            futures.append(future)
            return _PendingWork(future, notes)

        return deferred

    with _patched(dist, _COLLECTIVES, wrap):
        yield


# ----------------------------------------------------------------------------- the harness


def _student(function: str | None = None):
    """``zg_course.labs.as_student``, told which student's function runs where it takes the name (a
    kit function held only within other exercises' functions may then run: Lab 1's
    ``syncs_per_hop`` measures the sampler that ``dynamic_compact`` may not call)."""
    from zg_course.labs import as_student

    return as_student(function)


def _parameter_names(fn, reference, n: int) -> list[str]:
    for f in (reference, fn):
        try:
            params = list(inspect.signature(f).parameters.values())
        except (TypeError, ValueError):
            continue
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(names) >= n:
            return names[:n]
    return [f"argument {i}" for i in range(n)]


# The inputs and copies :func:`check` makes, kept until it ends (the innermost check's list;
# in the worker, until the judge's cell ends): no object's id is reused within a check, so a
# memo keyed by ``id`` meets the same clause whatever the allocator did before.
_ALIVE: list[list] = []


def _kept(x):
    if _ALIVE:
        _ALIVE[-1].append(x)
    return x


def _copy(x):
    """A fresh deep copy of a case's inputs (a module and its parameters included, with their
    gradients: ``copy.deepcopy`` of a ``torch.nn.Parameter`` drops its ``.grad``), kept alive
    while the check runs (:data:`_ALIVE`)."""
    memo: dict = {}
    for p in _parameters_in(x):
        if id(p) not in memo:
            q = copy.deepcopy(p, memo)
            if p.grad is not None and q.grad is None:
                q.grad = copy.deepcopy(p.grad, memo)
    return _kept(copy.deepcopy(x, memo))


def _parameters_in(x, depth: int = 0):
    """The parameters held by ``x``: in lists, tuples, dicts, modules and objects' attributes."""
    if isinstance(x, torch.nn.Parameter):
        yield x
    elif depth > 6:
        return
    elif isinstance(x, torch.nn.Module):
        yield from x.parameters()
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _parameters_in(v, depth + 1)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _parameters_in(v, depth + 1)
    elif isinstance(getattr(x, "__dict__", None), dict) and not (
        inspect.isroutine(x) or inspect.isclass(x) or inspect.ismodule(x)
    ):
        for v in vars(x).values():
            yield from _parameters_in(v, depth + 1)


class _Observed(Exception):
    """The call ran in the worker (zg_course.remote): nothing to run here."""


@dataclass
class _Counted:
    """A host-sync count the worker's ``SyncAudit`` made (as the audit's own fields)."""

    host_syncs: int
    pairs: list

    @property
    def per_op(self):
        return collections.Counter(dict(self.pairs))


def _observing(stack, function, host_syncs, asynchronous, process_changes, notes, futures,
               numpy_used):  # fmt: skip
    """Enter what :func:`check` watches a call with; the sync audit, or None."""
    stack.enter_context(_keep_generators())
    process_before = _process_state()  # the generators at their mid-stream state
    stack.callback(_restore_process, process_before)
    stack.callback(
        lambda changes=process_changes, was=process_before: changes.extend(
            _process_changes(was, _process_state())
        )
    )
    stack.enter_context(_settings_calls_recorded(process_changes))
    if asynchronous:
        stack.enter_context(_collectives_deferred(notes, futures))
    audit = None
    if host_syncs:
        from zg_course.labs import checks

        audit = stack.enter_context(checks().SyncAudit(strict=True))
    stack.enter_context(portable.watched(numpy_used))
    stack.enter_context(_student(function))
    return audit


def _observed_call(fn, namespace, args, kwargs, *, function, host_syncs, stateless, earlier):
    """In the worker (``zg_course.remote``): one call of :func:`check`, observed as a local one
    is; what it returned and what was seen, for the judge to compare."""
    from zg_course.remote import RemoteError, _state, dumps

    state_before = _state_of(fn, namespace, deep=False) if stateless else None
    process_changes: list[str] = []
    numpy_used: list[str] = []
    try:
        with contextlib.ExitStack() as stack:
            audit = _observing(stack, function, host_syncs, False, process_changes, [], [],
                               numpy_used)  # fmt: skip
            got = fn(*args, **kwargs)
    except ContractFailure as exc:
        return {"contract_failure": str(exc), "args": [], "kwargs": {}}
    except Exception as exc:
        return {"raised": f"{type(exc).__name__}: {exc}", "args": [_state(a) for a in args],
                "kwargs": _state(kwargs)}  # fmt: skip
    seen = {
        "result": got,
        "process_changes": process_changes,
        "numpy_used": numpy_used,
        "host_syncs": None if audit is None else int(audit.host_syncs),
        "per_op": [] if audit is None else [list(p) for p in audit.per_op.most_common(3)],
        "shares": _shares_storage(got, (args, kwargs), None, (None, None)),
        "kept": _kept_result(got, earlier) if stateless else None,
        "state": (
            _state_changes(state_before, fn, namespace, deep=False)
            if state_before is not None
            else None
        ),
        "args": [_state(a) for a in args],
        "kwargs": _state(kwargs),
    }
    earlier.append(got)
    try:
        dumps(got)
    except RemoteError as exc:
        seen["result"], seen["unreadable"] = None, f"it returned {exc}"
    return seen


def _again(fn, args, kwargs, function, narrow: bool) -> dict:
    """In the worker: the call again (``deterministic``), under numpy's narrow integers when
    ``narrow`` (``portable``)."""
    answer: dict = {}

    def fail(clause, case, names, message):
        answer["raised"] = message.split(" raised ", 1)[-1]

    case = Case(tuple(args), dict(kwargs))
    stub = Contract(function, part="the worker")
    contexts = (portable.narrow_ints(),) if narrow else ()
    got = _call_again(fn, stub, case, [], fail, "", "", *contexts)
    if got is not _RAISED:
        answer["result"] = portable.plain(got) if narrow else got
    return answer


def _device_findings(fn, args, kwargs, function) -> list:
    """In the worker: what the device check (:func:`_check_device`) found, as
    ``[(clause, message)]``."""
    found: list = []
    stub = Contract(function, part="the worker")
    _check_device(
        fn, stub, Case(tuple(args), dict(kwargs)), [], None,
        lambda clause, case, names, message: found.append((clause, message)), cuda=False,
    )  # fmt: skip
    return found


def check(
    fn: Callable,
    contract: Contract,
    cases: Iterable[Case],
    reference: Callable | None = None,
    *,
    namespace: dict | None = None,
) -> int:
    """Run ``fn`` on every case and check every clause of ``contract``; returns the number of
    cases checked. Raises :class:`ContractFailure` naming each failed clause with its first
    failing case (the input, what was expected, what came back)."""
    _ALIVE.append([])
    try:
        return _check(fn, contract, cases, reference, namespace=namespace)
    finally:
        _ALIVE.pop()


def _check(fn, contract, cases, reference, *, namespace) -> int:
    if not isinstance(contract, Contract):
        raise ContractSetupError(
            f"contract must be a zg_course.contract.Contract, got {type(contract).__name__}"
        )
    if not callable(fn):
        raise ContractFailure(
            f"{contract.part}: `{contract.function}` must be a function, got {type(fn).__name__}"
        )
    cases = list(cases)
    if not cases:
        raise ContractSetupError("cases must not be empty")
    if not all(isinstance(c, Case) for c in cases):
        raise ContractSetupError("every case must be a zg_course.contract.Case")
    missing = set(contract.boundaries) - set().union(*(c.kinds for c in cases))
    if missing:
        raise ContractSetupError(
            f"{contract.part}: the cases cover no {sorted(missing)} case, which the contract declares"
        )
    if reference is None and any(c.expected is None for c in cases):
        raise ContractSetupError("give a reference, or an expected value on every case")

    failures: dict[str, str] = {}
    remote = fn if getattr(fn, "__zg_remote__", False) else None
    session = remote_session() if remote is not None else None
    # the whole contents of the namespace, once before every call and once after them all
    if remote is not None:
        deep_before = session if contract.stateless else None
        if deep_before is not None:
            fn.ask("state", token=session, deep=True)
    else:
        deep_before = _state_of(fn, namespace, deep=True) if contract.stateless else None
    results_seen: list = []  # every call's result, kept alive so no storage is reused
    expecteds: list = []

    def fail(clause: str, case: Case, names, message: str):
        if clause not in failures:
            failures[clause] = f"on input {_describe_case(case, names)}: {message}"

    for case in cases:
        names = _parameter_names(fn, reference, len(case.args))
        ref_changes: set = set()
        if case.expected is None:
            ref_args, ref_kwargs = _copy(case.args), _copy(case.kwargs)
            ref_calls: list[str] = []
            with _keep_generators():
                process_before = _process_state()
                with _settings_calls_recorded(ref_calls):
                    expected = reference(*ref_args, **ref_kwargs)
                ref_changes = set(_process_changes(process_before, _process_state()))
                ref_changes |= set(ref_calls)
            _restore_process(process_before)
        else:
            ref_args, ref_kwargs, expected = None, None, case.expected
        args, kwargs = _copy(case.args), _copy(case.kwargs)
        before = [_snapshot(a) for a in args]
        before_kw = {k: _snapshot(v) for k, v in kwargs.items()}
        watched = dict(case.watch()) if case.watch is not None else {}
        watched_before = {k: _snapshot(v) for k, v in watched.items()}
        state_before = (
            _state_of(fn, namespace, deep=False) if contract.stateless and remote is None else None
        )
        notes: list[str] = []
        futures: list[_PendingFuture] = []
        audit = None
        process_changes: list[str] = []
        numpy_used: list[str] = []
        if remote is not None:  # the student's function runs in the worker (zg_course.remote)
            if contract.asynchronous:  # a pending future does not travel: checked in the worker
                from zg_course.remote import NeedsWorker

                raise NeedsWorker(f"{contract.function}'s contract is asynchronous")
            seen = fn.ask(
                "observe", args=args, kwargs=kwargs, function=contract.function,
                host_syncs=contract.host_syncs is not None, stateless=contract.stateless,
                session=session,
            )  # fmt: skip
            remote_write_back(list(args), list(seen["args"]))
            remote_write_back(kwargs, seen["kwargs"])
            if seen.get("contract_failure"):
                raise ContractFailure(seen["contract_failure"])
            if seen.get("raised"):
                fail("runs", case, names, f"raised {seen['raised']}")
                continue
            got = seen["result"]
            process_changes = list(seen["process_changes"])
            numpy_used = list(seen["numpy_used"])
            if seen.get("host_syncs") is not None:
                audit = _Counted(seen["host_syncs"], seen["per_op"])
        try:
            if remote is not None:
                raise _Observed
            with contextlib.ExitStack() as stack:
                audit = _observing(
                    stack, contract.function, contract.host_syncs is not None,
                    contract.asynchronous, process_changes, notes, futures, numpy_used,
                )  # fmt: skip
                got = fn(*args, **kwargs)
        except _Observed:
            pass
        except ContractFailure:
            raise
        except Exception as exc:
            fail("runs", case, names, f"raised {type(exc).__name__}: {exc}")
            continue
        left = list(dict.fromkeys(k for k in process_changes if k not in ref_changes))
        if contract.stateless and left:
            fail(
                "others unchanged",
                case,
                names,
                f"the call changed {left[0]} and left it so: a process-wide setting is not the "
                "function's to change (the reference leaves it as it was); the harness put it "
                "back",
            )
        if contract.asynchronous:
            pending = isinstance(got, torch._C.Future) and not got.done()
            if notes:
                fail("asynchronous", case, names, notes[0])
            elif not futures:
                fail("asynchronous", case, names, "started no asynchronous collective")
            elif not pending:
                fail(
                    "asynchronous",
                    case,
                    names,
                    "returned "
                    + (
                        "a future already completed"
                        if isinstance(got, torch._C.Future)
                        else type(got).__name__
                    )
                    + " instead of the pending future of its collective",
                )
            for f in futures:
                f.settle()
            if isinstance(got, torch._C.Future):
                got = got.wait()
        if audit is not None and audit.host_syncs > contract.host_syncs:
            ops = ", ".join(f"{op} x{n}" for op, n in audit.per_op.most_common(3))
            fail(
                "host syncs",
                case,
                names,
                f"expected at most {contract.host_syncs} host syncs, got {audit.host_syncs} ({ops})",
            )
        answer = got  # as returned, for the call again (deterministic)
        if contract.extra_keys and isinstance(expected, Mapping) and isinstance(got, Mapping):
            got = {k: v for k, v in got.items() if k in expected}  # the keys the contract names
        if contract.compare is not None:
            found = contract.compare(expected, got)
            if found:
                fail("returns", case, names, found)
        else:
            found = compare_values(expected, got, contract.rtol, contract.atol, contract.dtype)
            if found:
                fail(found[0], case, names, found[1])
        if remote is not None:
            found = seen.get("unreadable")
            if found:
                fail("returns", case, names, found)
            found = seen.get("shares")
            if (
                found
                and ref_args is not None
                and set(_storages(expected)) & set(_storages((ref_args, ref_kwargs)))
            ):
                found = None  # the reference returns a view of its input too
        else:
            found = _shares_storage(got, (args, kwargs), expected, (ref_args, ref_kwargs))
        if found:
            fail("returns", case, names, found)
        if contract.stateless:
            found = seen.get("kept") if remote is not None else _kept_result(got, results_seen)
            if found:
                fail("no state", case, names, found)
        results_seen.append(got)
        expecteds.append(expected)
        for i, (snap, a) in enumerate(zip(before, args)):
            name = names[i] if i < len(names) else f"argument {i}"
            _check_argument(
                contract, case, names, name, snap, a, ref_args[i] if ref_args else None, fail
            )
        for k, snap in before_kw.items():
            _check_argument(
                contract,
                case,
                names,
                k,
                snap,
                kwargs[k],
                ref_kwargs[k] if ref_kwargs else None,
                fail,
            )
        for k, snap in watched_before.items():
            found = _changed(snap, watched[k], k)
            if found:
                fail("others unchanged", case, names, found)
        if remote is not None and contract.stateless:
            found = seen.get("state")
            if found:
                fail("no state", case, names, found)
        elif state_before is not None:
            found = _state_changes(state_before, fn, namespace, deep=False)
            if found:
                fail("no state", case, names, found)
        if (
            contract.deterministic
            and not contract.asynchronous
            and "deterministic" not in failures
            and (contract.refill or case is cases[0])
        ):
            _check_deterministic(fn, contract, case, names, answer, fail)
        if (
            contract.portable
            and numpy_used
            and portable.SIMULATED
            and not contract.asynchronous
            and "portable" not in failures
        ):
            _check_portable(fn, contract, case, names, expected, numpy_used[0], fail)
        if contract.device and "device" not in failures and not contract.asynchronous:
            _check_device(fn, contract, case, names, expected, fail)
    if (
        contract.stateless
        and contract.refill
        and not contract.asynchronous
        and len(expecteds) == len(cases)
        and "no state" not in failures
    ):
        _check_refilled(fn, contract, cases, expecteds, reference, fail)
    if deep_before is not None and "no state" not in failures:
        if remote is not None:
            found = fn.ask("state_changes", token=deep_before, deep=True)
        else:
            found = _state_changes(deep_before, fn, namespace, deep=True)
        if found:
            last = cases[-1]
            fail(
                "no state",
                last,
                _parameter_names(fn, reference, len(last.args)),
                found.replace("the call ", "the calls ", 1) + " (found after every case ran)",
            )
    if failures:
        lines = [f"{contract.part}: `{contract.function}` broke its contract:"]
        lines += [f"  - clause '{clause}' {text}" for clause, text in failures.items()]
        raise ContractFailure("\n".join(lines))
    return len(cases)


def _check_argument(contract, case, names, name, snap, now, ref_now, fail):
    if name in contract.scratch:
        if snap[0] == "tensor":
            _, _value, dtype, shape, device, _grad, ptr, _meta = snap
            if (
                not isinstance(now, torch.Tensor)
                or (now.dtype, tuple(now.shape), now.device) != (dtype, shape, device)
                or (ptr is not None and now.data_ptr() != ptr)
            ):
                fail(
                    "updates",
                    case,
                    names,
                    f"argument `{name}` is scratch space: any contents, but the same tensor "
                    f"({str(dtype).replace('torch.', '')}{list(shape)} on {device}, its storage "
                    f"kept); it is now {_short(now)}",
                )
        return
    if name not in contract.may_change:
        found = _changed(snap, now, f"argument `{name}`")
        if found:
            fail(
                "inputs unchanged",
                case,
                names,
                found
                + f" (the contract lets it change only {list(contract.may_change) or 'nothing'})",
            )
        return
    if ref_now is not None:
        found = compare_values(
            _as_value(ref_now),
            _as_value(now),
            contract.rtol,
            contract.atol,
            contract.dtype,
            f"argument `{name}` after the call",
        )
        if found:
            fail("updates", case, names, found[1])
        want, have = _extras(ref_now), _extras(now)
        if want != have:
            fail(
                "updates",
                case,
                names,
                f"argument `{name}` after the call: {_extras_difference(want, have)} (the "
                "reference leaves its own copy without it)",
            )
    if name in contract.in_place and not _storage_kept(snap, now):
        fail(
            "updates",
            case,
            names,
            f"{_moved(snap, now, f'argument `{name}`') or f'argument `{name}`'} was replaced, "
            "not updated in place (its storage moved)",
        )


def _as_value(x):
    """A comparable value of an argument after a call (a module: its state; a leaf tensor that
    requires grad: its value and its gradient; lists, tuples and dicts item by item)."""
    if isinstance(x, torch.nn.Module):
        return {k: v.detach() for k, v in x.state_dict().items()}
    if isinstance(x, torch.optim.Optimizer):
        return x.state_dict()["state"]
    if isinstance(x, torch.Tensor) and x.is_leaf and x.requires_grad:
        return {"value": x.detach(), "grad": None if x.grad is None else x.grad.detach()}
    if isinstance(x, (list, tuple)):
        return type(x)(_as_value(v) for v in x)
    if isinstance(x, dict):
        return {k: _as_value(v) for k, v in x.items()}
    if _plain_object(x):
        # an object without an __eq__ of its own: the values of its public attributes (an
        # object met again inside itself compares as its class name)
        if id(x) in _VALUE_OF:
            return f"<{type(x).__name__} again>"
        _VALUE_OF.add(id(x))
        try:
            return {k: _as_value(v) for k, v in vars(x).items() if not k.startswith("_")}
        finally:
            _VALUE_OF.discard(id(x))
    return x


_VALUE_OF: set = set()  # the objects _as_value is inside of (a cycle ends there)


def _plain_object(x) -> bool:
    """An instance of a class of its own (not a tensor, container, routine, class or module)
    that compares by identity: compared after a call by the values of its attributes."""
    return (
        not isinstance(x, (torch.Tensor, np.ndarray, Mapping, list, tuple, set, frozenset))
        and not (inspect.isroutine(x) or inspect.isclass(x) or inspect.ismodule(x))
        and isinstance(getattr(x, "__dict__", None), dict)
        and type(x).__eq__ is object.__eq__
    )


# ----------------------------------------------------------------------------- results and extras


def _storages(x, depth: int = 0) -> dict[int, str]:
    """{storage address: path} of the tensors ``x`` holds (nested lists, tuples, dicts,
    modules' parameters and buffers, objects' attributes)."""
    out: dict[int, str] = {}

    def walk(v, path, d):
        if d > 6:
            return
        if isinstance(v, torch.Tensor):
            if v.layout == torch.strided and v.device.type != "meta" and v.numel():
                out.setdefault(v.untyped_storage().data_ptr(), path)
        elif isinstance(v, torch.nn.Module):
            for k, t in v.state_dict(keep_vars=True).items():
                walk(t, f"{path}.{k}", d + 1)
        elif isinstance(v, (list, tuple)):
            for i, item in enumerate(v):
                walk(item, f"{path}[{i}]", d + 1)
        elif isinstance(v, Mapping):
            for k, item in v.items():
                walk(item, f"{path}[{k!r}]", d + 1)
        elif _plain_object(v):
            for k, item in vars(v).items():
                walk(item, f"{path}.{k}", d + 1)

    walk(x, "", depth)
    return out


def _shares_storage(got, inputs, expected, ref_inputs) -> str | None:
    """A returned tensor that shares its storage with an argument, where the reference's result
    shares none with its own arguments (a view or the input itself returned: a later change of
    either changes the other)."""
    if not isinstance(got, (torch.Tensor, list, tuple, Mapping)):
        return None
    mine = _storages(inputs)
    shared = {ptr: path for ptr, path in _storages(got).items() if ptr in mine}
    if not shared:
        return None
    if ref_inputs[0] is not None and set(_storages(expected)) & set(_storages(ref_inputs)):
        return None  # the reference returns a view of its input too
    ptr, path = next(iter(shared.items()))
    return (
        f"the result{path} shares its memory with the argument{mine[ptr]} (a view, or the "
        "input itself, returned): return a new tensor (.clone(), or build it)"
    )


def _kept_result(got, earlier: list) -> str | None:
    """A returned tensor whose storage an earlier call's result also holds: a result kept and
    handed out again between calls."""
    now = _storages(got)
    if not now:
        return None
    for i, old in enumerate(earlier):
        common = set(now) & set(_storages(old))
        if common:
            return (
                f"the result{now[next(iter(common))]} is the same tensor memory as the result of "
                f"an earlier call (call {i + 1}): a result kept between calls"
            )
    return None


def _extras(x, depth: int = 0):
    """What an argument carries besides its values, as the reference's copy is compared to the
    student's: hooks on modules and tensors, ``requires_grad``, and an object's attribute
    names (a private attribute added and left is state kept on the caller's object)."""
    if depth > 6:
        return None
    if isinstance(x, torch.Tensor):
        meta = _tensor_meta(x)
        return (
            "tensor",
            meta["requires_grad"],
            len(meta["hooks"]),
            len(meta["grad_accumulation_hooks"]),
        )
    if isinstance(x, torch.nn.Module):
        return (
            "module",
            {k: len(v) for k, v in _module_hooks(x).items()},
            {k: _extras(v, depth + 1) for k, v in x.named_parameters()},
        )
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_extras(v, depth + 1) for v in x])
    if isinstance(x, Mapping):
        return ("mapping", {k: _extras(v, depth + 1) for k, v in x.items()})
    if _plain_object(x):
        return ("object", {k: _extras(v, depth + 1) for k, v in vars(x).items()})
    return None


def _extras_difference(want, have, path: str = "") -> str:
    if want == have:
        return ""
    if type(want) is not type(have) or not isinstance(want, tuple) or want[0] != have[0]:
        return f"{path or 'it'} differs in kind"
    kind = want[0]
    if kind == "tensor":
        if want[1] != have[1]:
            return f"{path or 'the tensor'}.requires_grad is {have[1]}"
        return f"{path or 'the tensor'} has {have[2] + have[3]} hooks left on it"
    if kind == "module":
        if want[1] != have[1]:
            return f"module hooks left registered: {sorted(set(have[1]) - set(want[1])) or have[1]}"
        for k in want[2]:
            if want[2][k] != have[2].get(k):
                return _extras_difference(want[2][k], have[2].get(k), f"{path}.{k}")
        return f"{path or 'the module'}'s parameters differ"
    if kind == "object":
        added = sorted(set(have[1]) - set(want[1]))
        if added:
            return f"attribute(s) {added} added to it and left"
        for k in want[1]:
            if want[1][k] != have[1].get(k):
                return _extras_difference(want[1][k], have[1].get(k), f"{path}.{k}")
        return f"{path or 'the object'} lost attributes"
    if kind == "mapping":
        for k in want[1]:
            if want[1][k] != have[1].get(k):
                return _extras_difference(want[1][k], have[1].get(k), f"{path}[{k!r}]")
        return f"{path or 'the mapping'} differs"
    for i, (a, b) in enumerate(zip(want[1], have[1])):
        if a != b:
            return _extras_difference(a, b, f"{path}[{i}]")
    return f"{path or 'it'} differs"


# ----------------------------------------------------------------------------- refilled inputs


def _refill(dst, src, depth: int = 0) -> bool:
    """Put ``src``'s values into ``dst`` in place, keeping every object's identity (a tensor is
    set to a copy of ``src``'s values, a list's items replaced, a dict cleared and updated, an
    object's attributes refilled); False where that cannot be done."""
    if depth > 6:
        return False
    if isinstance(dst, torch.Tensor):
        if not isinstance(src, torch.Tensor) or dst.dtype != src.dtype or dst.device != src.device:
            return False
        if dst.requires_grad or not dst.is_leaf or isinstance(dst, torch.nn.Parameter):
            return False
        try:
            with torch.no_grad():
                # the same tensor object on a storage of its own (resizing in place could grow
                # into another argument that views the same storage)
                dst.set_(src.detach().clone())
        except RuntimeError:
            return False
        return True
    if isinstance(dst, list) and isinstance(src, list):
        if len(dst) == len(src) and all(_refill(a, b, depth + 1) for a, b in zip(dst, src)):
            return True
        dst[:] = src
        return True
    if isinstance(dst, tuple) and isinstance(src, tuple):
        return len(dst) == len(src) and all(_refill(a, b, depth + 1) for a, b in zip(dst, src))
    if isinstance(dst, dict) and isinstance(src, dict):
        dst.clear()
        dst.update(src)
        return True
    if isinstance(dst, _ATOMS) or isinstance(src, _ATOMS):
        return type(dst) is type(src) and dst == src
    if _plain_object(dst) and type(dst) is type(src):
        mine, theirs = vars(dst), vars(src)
        if set(mine) != set(theirs):
            return False
        for k, v in theirs.items():
            if not _refill(mine[k], v, depth + 1):
                if isinstance(mine[k], (torch.Tensor, torch.nn.Module)):
                    return False
                mine[k] = v
        return True
    return False


_NOT_REFILLED = object()


def _refilled(dst, src):
    """``dst`` refilled in place with ``src``'s values (the same object), or ``src`` itself for
    a value passed by value (a number, a string), or :data:`_NOT_REFILLED`."""
    if _refill(dst, src):
        return dst
    if isinstance(src, _ATOMS) or isinstance(src, np.generic):
        return src
    return _NOT_REFILLED


def _refill_pair(fn, first, then, function) -> dict:
    """Call ``fn`` on the objects of ``first`` (``(args, kwargs)``), refill them in place with
    ``then``'s values, call again: ``{"result": ...}``, ``{"raised": "Type: message"}`` or
    ``{"skip": True}`` (inputs that cannot be refilled apart, or a first call that raised)."""
    args, kwargs = _copy(first[0]), _copy(first[1])
    new_args, new_kwargs = _copy(then[0]), _copy(then[1])
    objects = [a for a in [*args, *kwargs.values()] if not isinstance(a, _ATOMS)]
    storages = [
        t.untyped_storage().data_ptr()
        for t in _tensors_in(objects)
        if t.layout == torch.strided and t.numel()
    ]
    if len({id(a) for a in objects}) < len(objects) or len(set(storages)) < len(storages):
        return {
            "skip": True
        }  # arguments that are one object (or share memory) cannot be refilled apart
    process_before = _process_state()
    try:
        with _keep_generators(), _student(function):
            try:
                fn(*args, **kwargs)
            except Exception:
                return {"skip": True}
            args = [_refilled(a, b) for a, b in zip(args, new_args)]
            kwargs = {k: _refilled(kwargs[k], new_kwargs[k]) for k in kwargs}
            if any(a is _NOT_REFILLED for a in [*args, *kwargs.values()]):
                return {"skip": True}
            return {"result": fn(*args, **kwargs)}
    except Exception as exc:
        return {"raised": f"{type(exc).__name__}: {exc}"}
    finally:
        _restore_process(process_before)


def _check_refilled(fn, contract, cases, expecteds, reference, fail) -> None:
    """Call ``fn`` on one case's objects, refill them in place with the next case's values,
    call again: the second result must be the next case's (``no state``)."""
    pairs = 0
    for i in range(len(cases) - 1):
        if pairs >= 2:
            return
        first, then = cases[i], cases[i + 1]
        if len(first.args) != len(then.args) or set(first.kwargs) != set(then.kwargs):
            continue
        names = _parameter_names(fn, reference, len(then.args))
        pair = ((first.args, first.kwargs), (then.args, then.kwargs))
        if getattr(fn, "__zg_remote__", False):
            answer = fn.ask("refill", first=pair[0], then=pair[1], function=contract.function)
        else:
            answer = _refill_pair(fn, *pair, contract.function)
        if answer.get("skip"):
            continue
        pairs += 1
        if "raised" in answer:
            fail(
                "no state",
                then,
                names,
                f"called again on the objects of the input before, refilled in place with this "
                f"input's values, it raised {answer['raised']}",
            )
            return
        got = answer["result"]
        want = expecteds[i + 1]
        if contract.extra_keys and isinstance(want, Mapping) and isinstance(got, Mapping):
            got = {k: v for k, v in got.items() if k in want}
        found = compare_values(want, got, contract.rtol, contract.atol, contract.dtype)
        if contract.compare is not None:
            message = contract.compare(expecteds[i + 1], got)
            found = ("returns", message) if message else None
        if found:
            fail(
                "no state",
                then,
                names,
                "called again on the objects of the input before, refilled in place with this "
                f"input's values: {found[1]} (a result kept between calls, keyed on the objects?)",
            )
            return


_LEGACY_CONSTRUCTORS = (
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "ShortTensor",
    "CharTensor",
    "ByteTensor",
    "BoolTensor",
)


@contextlib.contextmanager
def _host_constructors_elsewhere():
    """While active, the constructors that always make a CPU tensor whatever the default
    device (``torch.from_numpy``, ``torch.LongTensor(...)`` and the other legacy types) make it
    on ``meta`` when called from outside the kit: on a GPU their tensor would sit on the CPU."""

    def elsewhere(name, original):
        def made(*args, **kwargs):
            out = original(*args, **kwargs)
            if (
                isinstance(out, torch.Tensor)
                and out.dim() > 0
                and not _made_by_the_kit(sys._getframe(1))
            ):
                return out.to("meta")
            return out

        return made

    with _patched(torch, ("from_numpy", *_LEGACY_CONSTRUCTORS), elsewhere):
        yield


_RAISED = object()


def _call_again(fn, contract, case, names, fail, clause: str, what: str, *contexts):
    """The case's call once more, on fresh copies of its inputs, from the same settings and
    generators as the first, under ``contexts``: its answer, or :data:`_RAISED` after failing
    ``clause`` ("<what> raised ...") when it raised."""
    if getattr(fn, "__zg_remote__", False):
        answer = fn.ask(
            "again", args=case.args, kwargs=case.kwargs, function=contract.function,
            narrow=bool(contexts),
        )  # fmt: skip
        if answer.get("contract_failure"):
            raise ContractFailure(answer["contract_failure"])
        if answer.get("raised"):
            fail(clause, case, names, f"{what} raised {answer['raised']}")
            return _RAISED
        return answer["result"]
    args, kwargs = _copy(case.args), _copy(case.kwargs)
    process_before = _process_state()
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_keep_generators())
            stack.enter_context(_student(contract.function))
            for context in contexts:
                stack.enter_context(context)
            return fn(*args, **kwargs)
    except ContractFailure:
        raise
    except Exception as exc:
        fail(clause, case, names, f"{what} raised {type(exc).__name__}: {exc}")
        return _RAISED
    finally:
        _restore_process(process_before)


def _check_deterministic(fn, contract, case, names, first, fail):
    """The same call again, on fresh copies of the case's inputs and from the same settings
    and generators as the first: its answer must be the first's."""
    again = _call_again(
        fn, contract, case, names, fail, "deterministic", "the same call a second time"
    )
    if again is _RAISED:
        return
    found = compare_values(first, again, contract.rtol, contract.atol, contract.dtype)
    if found:
        fail(
            "deterministic",
            case,
            names,
            "the same call twice, on equal inputs and from the same generators, gave two "
            f"answers ({found[1].replace('the result', 'the second', 1)}): draw from the "
            "generators the lab names (torch's, seeded by the caller), never from one of the "
            "function's own or the clock",
        )


def _check_portable(fn, contract, case, names, expected, used: str, fail):
    """The same call again where numpy's default integer is 32 bits (Windows with numpy 1.x):
    its answer must still be the reference's."""
    where = "where numpy's default integer is 32 bits (Windows, numpy 1.x)"
    again = _call_again(
        fn, contract, case, names, fail, "portable", f"{where}, the call", portable.narrow_ints()
    )
    if again is _RAISED:
        return
    found = compare_values(
        expected, portable.plain(again), contract.rtol, contract.atol, contract.dtype
    )
    if found:
        fail(
            "portable",
            case,
            names,
            f"{where}, the answer differs ({found[1]}): the call used np.{used}, whose integers "
            "are then 32 bits and wrap past 2**31; give numpy a dtype (np.int64) or count in "
            "Python ints",
        )


# ---- the inputs on another device: every tensor tagged with the device it was made or
# received on, and an op that mixes the two refused, as a CUDA tensor meeting a CPU one is


class _MixedDevices(RuntimeError):
    """An op met a tensor on the inputs' device and one on the CPU (as on a GPU)."""


class _Unjudged(Exception):
    """A tensor reached an op on the tagged device without its values (a route the check does
    not follow): the device check by redirection judges the case instead."""


class _NotWrappable(Exception):
    """The case's inputs hold tensors inside objects the check cannot move."""


_ELSEWHERE = torch.device("meta")  # the device the tagged tensors report (no memory, no init)
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
# Ops that take their value as a 0-d tensor: PyTorch lets a CPU one fill a tensor of another
# device (it reads the number), as in x[idx] = torch.tensor(v) on a GPU.
_SCALAR_VALUE_OPS = frozenset(
    packet
    for packet in (
        getattr(torch.ops.aten, name, None)
        for name in (
            "index_put",
            "index_put_",
            "_index_put_impl_",
            "masked_fill",
            "masked_fill_",
            "fill",
            "fill_",
            "index_fill",
            "index_fill_",
        )
    )
    if packet is not None
)
# What torch.tensor([...]) calls on the tensor it built on the CPU.
_LIFTS = frozenset(
    op
    for op in (
        getattr(torch.ops.aten.lift_fresh, "default", None),
        getattr(torch.ops.aten.lift_fresh_copy, "default", None),
    )
    if op is not None
)
# Ops that move or copy between devices by design.
_MOVES = frozenset(
    op
    for op in (
        getattr(torch.ops.aten._to_copy, "default", None),
        getattr(torch.ops.aten.copy_, "default", None),
        getattr(torch.ops.aten.copy, "default", None),
    )
    if op is not None
)


class _Elsewhere(torch.Tensor):
    """A CPU tensor that says it is on another device (``meta``: nothing is allocated there and
    nothing is initialised): what a graded function receives in the device check. Its values
    live in ``elem``; every op on it runs under :class:`_ElsewhereMode`."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor, requires_grad: bool = False):
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=_ELSEWHERE,
            requires_grad=requires_grad,
        )
        out.elem = elem
        return out

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # only under the mode
        raise _MixedDevices(f"{func}: a tensor on the inputs' device used after the call")

    def __repr__(self):
        return f"{self.elem!r} (on the inputs' device)"

    def tolist(self):  # a copy to the host, as on a GPU
        return self.elem.tolist()

    def numpy(self, *args, **kwargs):
        if _made_by_the_kit(sys._getframe(1)):  # the kit's own host-side bookkeeping
            return self.elem.numpy(*args, **kwargs)
        raise TypeError(
            "can't convert a tensor on the inputs' device to numpy (on a GPU: cuda:0); "
            "use Tensor.cpu() to copy the tensor to host memory first"
        )


def _from_the_kit() -> bool:
    """Whether the innermost frame outside torch belongs to the kit (``zg/``, ``zg_course/``):
    its host-side bookkeeping is tested on its own (:func:`_made_by_the_kit`)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith(_TORCH_DIR) and name != os.path.abspath(__file__):
            return name.startswith(_KIT_DIRS)
        frame = frame.f_back
    return False


class _ElsewhereMode(TorchDispatchMode):
    """While active: an op on tagged tensors (:class:`_Elsewhere`) runs on their values and
    tags what it makes; a factory call on the inputs' device (``device=x.device``) makes a
    tagged tensor; one on the CPU (no ``device=``, ``device="cpu"``, ``torch.from_numpy``, a
    legacy constructor) makes a plain one; an op that mixes a tagged tensor with a plain one
    raises :class:`_MixedDevices`, except where PyTorch allows it on a GPU: a 0-d CPU tensor in
    an elementwise op or as the value that fills (``index_put_``, ``masked_fill``, ``fill_``,
    ``index_fill``), a copy between devices. (Indexing with a CPU index is refused although
    PyTorch copies it over: the contract says every tensor the function makes is on its inputs'
    device.)"""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = [
            t
            for t in torch.utils._pytree.tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor)
        ]
        tagged = any(isinstance(t, _Elsewhere) for t in flat)
        if any(t.device.type == _ELSEWHERE.type and not isinstance(t, _Elsewhere) for t in flat):
            raise _Unjudged(str(func))
        if tagged and func not in _MOVES:
            # (PyTorch would move CPU indices to the device: the contract does not, since
            # every tensor the function makes must be on its inputs' device.)
            plain = [t for t in flat if not isinstance(t, _Elsewhere)]
            scalar_ok = torch.Tag.pointwise in getattr(func, "tags", ()) or (
                getattr(func, "overloadpacket", None) in _SCALAR_VALUE_OPS
            )
            if plain and not (scalar_ok and all(t.dim() == 0 for t in plain)):
                if not _from_the_kit():
                    shapes = ", ".join(
                        f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in plain[:2]
                    )
                    raise _MixedDevices(
                        f"{func} met a tensor on the inputs' device and a CPU tensor ({shapes})"
                    )

        def unwrap(t):
            return t.elem if isinstance(t, _Elsewhere) else t

        args_, kwargs_ = torch.utils._pytree.tree_map(unwrap, (args, kwargs))
        asked = kwargs_.get("device")
        if asked is not None and torch.device(asked).type == _ELSEWHERE.type:
            kwargs_["device"] = torch.device("cpu")  # made on, or moved to, the inputs' device
            elsewhere = True
        elif func in _MOVES:
            elsewhere = tagged and asked is None  # .float() keeps the device; .cpu() does not
        elif tagged:
            elsewhere = True  # an op on the inputs' tensors
        else:  # made on the CPU: by the student's code, or (as on the device) by the kit's
            elsewhere = ("device" in kwargs_ or func in _LIFTS) and _from_the_kit()
        out = func(*args_, **kwargs_)
        returns = func._schema.returns
        if (
            len(returns) == 1
            and returns[0].alias_info is not None
            and returns[0].alias_info.is_write
            and args
            and isinstance(args[0], torch.Tensor)
        ):
            return args[0]  # in place: the same tensor, tagged or not

        def wrap(t):
            return _Elsewhere(t) if isinstance(t, torch.Tensor) and elsewhere else t

        return torch.utils._pytree.tree_map(wrap, out)


class _MadeElsewhere(TorchFunctionMode):
    """While active, a call with ``device=`` the inputs' device (``torch.tensor(data,
    device=x.device)``, ``torch.as_tensor``...) makes its tensor on the CPU and tags it: a
    constructor from data puts the values on the device below the dispatch modes, where the
    tagged device (``meta``) would keep none."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        asked = kwargs.get("device")
        if (
            func is torch.Tensor.new_tensor
            and args
            and isinstance(args[0], _Elsewhere)
            and (asked is None or str(asked) == _ELSEWHERE.type)
        ):  # x.new_tensor(data): on x's device
            kwargs = {k: v for k, v in kwargs.items() if k != "device"}
            out = args[0].elem.new_tensor(*args[1:], **kwargs)
            return _Elsewhere(out.detach(), requires_grad=out.requires_grad)
        if asked is None or isinstance(asked, int):
            return func(*args, **kwargs)
        try:
            elsewhere = torch.device(asked).type == _ELSEWHERE.type
        except (TypeError, RuntimeError):
            elsewhere = False
        if not elsewhere:
            return func(*args, **kwargs)
        out = func(*args, **{**kwargs, "device": torch.device("cpu")})
        return torch.utils._pytree.tree_map(
            lambda t: (
                _Elsewhere(t.detach(), requires_grad=t.requires_grad)
                if type(t) is torch.Tensor
                else t
            ),
            out,
        )


def _own_class(x) -> bool:
    """Whether ``x`` is an instance of a class of the kit's, the course's, a notebook's or a
    test's own (not a library's): plain Python objects whose whole state is in their
    ``__dict__``, so a copy with every attribute tagged stands for them on the device."""
    if (
        not isinstance(getattr(x, "__dict__", None), dict)
        or inspect.isroutine(x)
        or inspect.isclass(x)
        or inspect.ismodule(x)
    ):
        return False
    for cls in type(x).__mro__[:-1]:  # every class it inherits from, but object
        if "__slots__" in vars(cls) or not cls.__flags__ & _HEAPTYPE:
            return False  # state outside __dict__ (slots, a C type's fields)
        name = cls.__module__
        if name == "__main__" or name.split(".")[0] in ("zg", "zg_course"):
            continue  # a notebook's or a script's, the kit's, the course's
        file = getattr(sys.modules.get(name), "__file__", None)
        if not file or os.path.abspath(file).startswith(_LIBRARY_DIRS):
            return False  # a library's (or the standard library's): it may keep state elsewhere
    return True


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python, not in C
_LIBRARY_DIRS = tuple(
    os.path.abspath(p) + os.sep
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def _holds_tensor(x, depth: int = 0) -> bool:
    """Whether ``x`` holds a tensor: itself, in a list, tuple or dict, or in an attribute."""
    if isinstance(x, torch.Tensor):
        return True
    if depth > 6 or inspect.isroutine(x) or inspect.isclass(x) or inspect.ismodule(x):
        return False
    if isinstance(x, (list, tuple, set, frozenset)):
        return any(_holds_tensor(v, depth + 1) for v in x)
    if isinstance(x, Mapping):
        return any(_holds_tensor(v, depth + 1) for v in x.values())
    if isinstance(getattr(x, "__dict__", None), dict):
        return any(_holds_tensor(v, depth + 1) for v in vars(x).values())
    return False


# A module's own bookkeeping (its parameters, buffers and children are tagged one by one)
_MODULE_DICTS = frozenset({"_parameters", "_buffers", "_modules"})


def _elsewhere(x, depth: int = 0, memo: dict | None = None):
    """``x`` with every tensor tagged (:class:`_Elsewhere`), for the device check's own copy of
    a case's inputs: tensors (a parameter stays a parameter, a ``.grad`` is tagged with it);
    lists, tuples and dicts of them; modules (their parameters, buffers and tensor attributes,
    swapped in place: the device check runs on a deep copy of its own, so the call that the
    returns, ``may_change`` and ``in_place`` clauses judge never sees a tag); optimizers (their parameter groups and state);
    objects of the kit's, the course's, a notebook's or a test's own classes (a copy with every
    attribute tagged). ``memo`` keeps one tagged tensor per tensor, so that what the inputs
    shared (a module's parameters in an optimizer) stays shared. Raises
    :class:`_NotWrappable` where a tensor sits where a tag cannot reach it (the check by
    redirection judges then):

    * a tensor subclass other than a parameter, a sparse tensor, or a tensor inside an autograd
      graph (a non-leaf): a wrapper would drop what makes it so;
    * an object of a library's class (a learning-rate scheduler, a DGL graph, a
      ``SimpleNamespace``...) other than a module or an optimizer: it may keep tensors out of
      sight (in C, in slots, in closures), so a copy with its attributes tagged might still
      hold CPU tensors, and the check would blame the student for them;
    * anything nested deeper than six levels.

    (An optimizer is tagged here, but the main call's clauses compare its state by parameter,
    which differs between the reference's copy and the function's: no lab passes one.)
    """
    if memo is None:
        memo = {}
    if id(x) in memo:
        return memo[id(x)][1]
    if isinstance(x, torch.Tensor):
        if isinstance(x, _Elsewhere):
            return x
        parameter = type(x) is torch.nn.Parameter
        if not (parameter or type(x) is torch.Tensor) or x.layout != torch.strided or not x.is_leaf:
            raise _NotWrappable(type(x).__name__)
        # the values without autograd (autograd runs on the tagged tensor, above the mode)
        out = _Elsewhere(x.detach(), requires_grad=x.requires_grad)
        if parameter:
            out._is_param = True  # isinstance(out, torch.nn.Parameter), as for a subclass's
        memo[id(x)] = (x, out)
        if x.grad is not None:
            out.grad = _elsewhere(x.grad, depth + 1, memo)
        return out
    if type(x) in (list, tuple) and depth < 6:
        return type(x)(_elsewhere(v, depth + 1, memo) for v in x)
    if isinstance(x, tuple) and hasattr(type(x), "_fields") and depth < 6:  # a namedtuple
        return type(x)(*(_elsewhere(v, depth + 1, memo) for v in x))
    if isinstance(x, dict) and type(x) is dict and depth < 6:
        return {k: _elsewhere(v, depth + 1, memo) for k, v in x.items()}
    if x is None or isinstance(x, (numbers.Number, str, bytes, torch.dtype, torch.device, range)):
        return x
    if isinstance(x, np.ndarray) or isinstance(
        x, (types.FunctionType, types.BuiltinFunctionType, type)
    ):
        return x  # a function argument, or host data: nothing to move
    if depth >= 6:
        raise _NotWrappable(type(x).__name__)
    if isinstance(x, torch.nn.Module):
        memo[id(x)] = (x, x)
        for mod in x.modules():
            for table in (mod._parameters, mod._buffers):
                for k, t in list(table.items()):
                    if t is not None:
                        table[k] = _elsewhere(t, depth + 1, memo)
            for k, v in list(vars(mod).items()):
                if k not in _MODULE_DICTS and _holds_tensor(v):
                    mod.__dict__[k] = _elsewhere(v, depth + 1, memo)
        return x
    if isinstance(x, torch.optim.Optimizer):
        memo[id(x)] = (x, x)
        for group in x.param_groups:
            for k, v in list(group.items()):
                if _holds_tensor(v):
                    group[k] = _elsewhere(v, depth + 1, memo)
        state = (
            type(x.state)(x.state.default_factory) if hasattr(x.state, "default_factory") else {}
        )
        for p, values in x.state.items():
            state[_elsewhere(p, depth + 1, memo)] = {
                # the step count stays a 0-d CPU tensor, as PyTorch keeps it for a GPU's
                # parameters (unless capturable or fused)
                k: v
                if k == "step" and isinstance(v, torch.Tensor) and v.dim() == 0
                else _elsewhere(v, depth + 2, memo)
                for k, v in values.items()
            }
        x.state = state
        for k, v in list(vars(x).items()):
            if k not in ("param_groups", "state") and _holds_tensor(v):
                raise _NotWrappable(type(x).__name__)  # tensors the optimizer keeps elsewhere
        return x
    if _own_class(x):  # a kit object (a Graph, a Partition), a notebook's: a copy, tagged
        moved = copy.copy(x)
        memo[id(x)] = (x, moved)
        for k, v in vars(x).items():
            moved.__dict__[k] = _elsewhere(v, depth + 1, memo)
        return moved
    raise _NotWrappable(type(x).__name__)


def _plain_tensors_in(x, path: str = "the result", depth: int = 0):
    """Where ``x`` (a result of the device check) holds a tensor that is not tagged."""
    if isinstance(x, _Elsewhere):
        return
    if isinstance(x, torch.Tensor):
        yield path, x
    elif isinstance(x, (list, tuple)) and depth < 4:
        for i, v in enumerate(x):
            yield from _plain_tensors_in(v, f"{path}[{i}]", depth + 1)
    elif isinstance(x, Mapping) and depth < 4:
        for k, v in x.items():
            yield from _plain_tensors_in(v, f"{path}[{k!r}]", depth + 1)


def _cpu_met_elsewhere(exc: BaseException) -> bool:
    """Whether PyTorch itself refused a CPU tensor beside a tagged one (a gradient of another
    device assigned to a parameter, ``torch.cat`` of the two...): the error a GPU gives, with
    ``meta`` for ``cuda``."""
    text = str(exc)
    return not isinstance(exc, _Unjudged) and bool(
        re.search(r"\bmeta\b", text) and re.search(r"\bcpu\b", text) and "device" in text
    )


def _check_device_elsewhere(fn, contract, case, names, fail) -> bool:
    """The device check with the inputs tagged as on another device (:class:`_ElsewhereMode`).
    Returns False where it cannot judge (inputs it cannot move, or an error that is not a
    device's): the check by redirection (:func:`_check_device`) judges then."""
    memo: dict = {}
    try:
        args, kwargs = _kept(_elsewhere(_copy((case.args, case.kwargs)), memo=memo))
    except _NotWrappable:
        return False
    if not any(isinstance(tagged, _Elsewhere) for _, tagged in memo.values()):
        return False  # no tensor given: the default device is the only one there is
    process_before = _process_state()
    try:
        with _keep_generators(), _MadeElsewhere(), _ElsewhereMode(), _student(contract.function):
            got = fn(*args, **kwargs)
    except ContractFailure:
        raise
    except _MixedDevices as exc:
        fail(
            "device",
            case,
            names,
            "expected every tensor it makes on its inputs' device; with the inputs on another "
            f"device (a GPU's), a tensor it made on the CPU met them: {exc}. Make new tensors with device=<an input>.device (not device='cpu', not "
            "without device=, not torch.from_numpy), or torch.zeros_like / x.new_zeros",
        )
        return True
    except TypeError as exc:
        if "inputs' device to numpy" not in str(exc):
            return False
        fail(
            "device",
            case,
            names,
            "expected its work on its inputs' device; with the inputs on another device (a "
            "GPU's) it called .numpy() on one (on a GPU that raises): keep the work in torch on the inputs' device",
        )
        return True
    except RuntimeError as exc:
        if not _cpu_met_elsewhere(exc):
            return False  # not a device's error: the other check judges
        fail(
            "device",
            case,
            names,
            "expected every tensor it makes on its inputs' device; with the inputs on another "
            f"device (a GPU's), PyTorch refused a CPU tensor among them: {str(exc)[:200]}. Make "
            "new tensors with device=<an input>.device (not device='cpu', not without device=), "
            "or torch.zeros_like / x.new_zeros",
        )
        return True
    except Exception:  # _Unjudged, or not a device's error: the other check judges
        return False
    finally:
        _restore_process(process_before)
    for path, t in _plain_tensors_in(got):
        fail(
            "device",
            case,
            names,
            f"expected {path} on its inputs' device; with the inputs on another device (a "
            f"GPU's), it came back on the CPU "
            f"({str(t.dtype).replace('torch.', '')}{list(t.shape)}): return it on the inputs' "
            "device (no .cpu(), no device='cpu')",
        )
        break
    return True


def _check_device(fn, contract, case, names, expected, fail, cuda: bool = True):
    if getattr(fn, "__zg_remote__", False):
        for clause, message in fn.ask(
            "device", args=case.args, kwargs=case.kwargs, function=contract.function
        ):
            fail(clause, case, names, message)
        return
    if _check_device_elsewhere(fn, contract, case, names, fail):
        return
    args, kwargs = _copy(case.args), _copy(case.kwargs)
    mode = _DefaultDeviceElsewhere()
    process_before = _process_state()
    try:
        with (
            _keep_generators(),
            _host_constructors_elsewhere(),
            mode,
            _NoMetaMixing(),
            _student(contract.function),
        ):
            got = fn(*args, **kwargs)
    except Exception as exc:
        _restore_process(process_before)
        if _device_error(exc):
            fail(
                "device",
                case,
                names,
                "a tensor made without device= (on the default device, or by torch.from_numpy / "
                "a legacy constructor, on the CPU) met the inputs: it would "
                f"fail on a GPU ({type(exc).__name__}: {str(exc)[:160]}); make new tensors with "
                "device=<an input>.device, or torch.zeros_like / x.new_zeros",
            )
        return
    _restore_process(process_before)
    if _has_meta(got):
        fail(
            "device",
            case,
            names,
            "a returned tensor was made on the default device (or on the CPU by "
            "torch.from_numpy / a legacy constructor), not the inputs' (make it with "
            "device=<an input>.device)",
        )
        return
    if cuda and torch.cuda.is_available():
        args, kwargs = (
            _kept(_to_device(_copy(case.args), "cuda")),
            _kept(_to_device(_copy(case.kwargs), "cuda")),
        )
        try:
            with _student(contract.function):
                got = fn(*args, **kwargs)
        except Exception as exc:
            fail("device", case, names, f"on CUDA inputs it raised {type(exc).__name__}: {exc}")
            return
        found = compare_values(
            _to_device(expected, "cuda"), got, contract.rtol, contract.atol, contract.dtype
        )
        if found:
            fail("device", case, names, "on CUDA inputs: " + found[1])
