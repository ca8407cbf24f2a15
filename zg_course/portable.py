"""numpy with a 32-bit default integer, as on Windows with numpy 1.x: what the contracts'
``portable`` clause runs a function under.

numpy 1.x makes Python ints into its C ``long``: 64 bits on Linux and macOS, 32 on Windows. So
``int(np.array([n, 4]).prod())`` is right on Linux and wraps past 2**31 on Windows, where many
students run their notebooks. While :func:`narrow_ints` is active, and only for calls made from
outside the kit, numpy and the installed libraries (a student's cell):

* ``np.array``, ``asarray``, ``asanyarray``, ``fromiter``, ``arange`` and ``full`` give ``int32``
  where numpy inferred its default integer from Python ints and every value fits in 32 bits
  (numpy 1.x on Windows moves to 64 bits for a value that does not fit);
* ``dtype=int`` (or ``"int"``, ``np.int_``) in those and in ``zeros``, ``ones``, ``empty`` is
  ``int32``; ``np.int_`` is ``np.int32``;
* the arrays they make (:class:`Long32`) sum and multiply in 32 bits (``sum``, ``prod``,
  ``cumsum``, ``cumprod``, as methods and as functions), as numpy does in ``long``; so do
  ``np.sum`` and its kin on any integer array of 32 bits or less, or on a list of Python ints.

Only where numpy 1.x is installed (:data:`SIMULATED`; the reference environment pins it): numpy
2 made the default integer 64 bits on Windows too. Not simulated: the arithmetic of two numpy scalars (``np.int32(a) * b``), C extensions, and
torch, whose default integer is int64 everywhere. :func:`watched` records whether a call used
numpy's constructors at all, so the clause runs the function again only where it could differ.
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig

import numpy as np

__all__ = ["Long32", "SIMULATED", "narrow_ints", "watched", "plain", "patched"]

# Only under numpy 1.x, whose promotion rules it keeps: numpy 2 made the default integer 64 bits
# on Windows too, and its rules for a Python int beside a 32-bit array differ from 1.x's.
SIMULATED = int(np.__version__.split(".")[0]) < 2

CONSTRUCTORS = ("array", "asarray", "asanyarray", "fromiter", "arange", "full")
TYPED = ("zeros", "ones", "empty")  # int only with dtype=int
REDUCTIONS = ("sum", "prod", "cumsum", "cumprod")
_INT32_MAX = 2**31 - 1
_SCAN_LIMIT = 100_000  # elements looked at to tell Python ints from numpy's 64-bit ones


def _library_dirs() -> tuple[str, ...]:
    here = os.path.dirname(os.path.abspath(__file__))
    kit = os.path.join(os.path.dirname(here), "zg")
    paths = {here, kit, os.path.dirname(os.path.abspath(np.__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            paths.add(os.path.abspath(path))
    paths.update(os.path.abspath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))
    return tuple(p.rstrip(os.sep) + os.sep for p in paths)


_LIBRARIES = _library_dirs()


def _from_outside(frame) -> bool:
    """Whether the call comes from a student's code: not the kit, numpy or a library (this
    module's own wrappers, one inside the other, are looked through)."""
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return False
    name = frame.f_code.co_filename
    if name.startswith("<") and not name.startswith("<frozen"):
        return True  # a cell: <lab-cell ...>, <ipython-input-...>, <string>
    return not os.path.abspath(name).startswith(_LIBRARIES)


def _python_ints(obj, budget: list) -> bool:
    """Whether ``obj`` is (nested lists and tuples of) Python ints only, as numpy would infer
    its default integer from: no numpy array or scalar, no bool, nothing else."""
    if budget[0] <= 0:
        return True
    budget[0] -= 1
    if isinstance(obj, bool) or isinstance(obj, np.generic):
        return False
    if isinstance(obj, int):
        return True
    if isinstance(obj, (list, tuple)):
        return all(_python_ints(x, budget) for x in obj)
    return False


def _fits(a: np.ndarray) -> bool:
    return a.size == 0 or (int(a.min()) >= -_INT32_MAX - 1 and int(a.max()) <= _INT32_MAX)


def _is_default_int(dtype) -> bool:
    # Not np.int_ itself: on Linux it is np.int64, which a student may name on purpose. While
    # narrow_ints runs, the name np.int_ is np.int32, so code that says np.int_ gets 32 bits.
    return dtype is int or (isinstance(dtype, str) and dtype == "int")


_ORIGINAL_INT = np.int_


class Long32(np.ndarray):
    """An integer array made where numpy's default integer is 32 bits: its sums and products
    accumulate in 32 bits (numpy's ``long`` on Windows) unless a dtype is given."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(x.view(np.ndarray) if isinstance(x, Long32) else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(
                o.view(np.ndarray) if isinstance(o, Long32) else o for o in kwargs["out"]
            )
        if (
            method in ("reduce", "accumulate")
            and ufunc in (np.add, np.multiply)
            and kwargs.get("dtype") is None
            and isinstance(inputs[0], np.ndarray)
            and inputs[0].dtype.kind in "biu"
            and inputs[0].dtype.itemsize <= 4
        ):
            kwargs["dtype"] = np.uint32 if inputs[0].dtype.kind == "u" else np.int32
        result = getattr(ufunc, method)(*inputs, **kwargs)
        return _wrap(result)


def _wrap(x):
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if type(x) is np.ndarray and x.dtype.kind in "iu":
        return x.view(Long32)
    return x


def plain(x, depth: int = 0):
    """``x`` with every :class:`Long32` array a plain ``ndarray`` (in lists, tuples, dicts)."""
    if isinstance(x, Long32):
        return x.view(np.ndarray)
    if depth > 8:
        return x
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(plain(v, depth + 1) for v in x)
    if type(x) is dict:
        return {k: plain(v, depth + 1) for k, v in x.items()}
    return x


# Where each one takes its dtype positionally.
_DTYPE_AT = {"array": 1, "asarray": 1, "asanyarray": 1, "fromiter": 1, "arange": 3, "full": 2,
             "zeros": 1, "ones": 1, "empty": 1, "sum": 2, "prod": 2, "cumsum": 2, "cumprod": 2}  # fmt: skip


def _narrowed(name, original):
    at = _DTYPE_AT[name]

    def made(*args, **kwargs):
        if not _from_outside(sys._getframe(1)):
            return original(*args, **kwargs)
        if len(args) > at:
            dtype = args[at]
            if _is_default_int(dtype):
                args = (*args[:at], np.int32, *args[at + 1 :])
                return _wrap(original(*args, **kwargs))
        else:
            dtype = kwargs.get("dtype")
            if _is_default_int(dtype):
                kwargs["dtype"] = np.int32
                return _wrap(original(*args, **kwargs))
        if name in REDUCTIONS:
            if args and dtype is None:
                a = args[0]
                if not isinstance(a, np.ndarray) and _python_ints(a, [_SCAN_LIMIT]):
                    a = np.asarray(a)
                    a = a.astype(np.int32) if a.dtype.kind == "i" and _fits(a) else a
                if isinstance(a, np.ndarray) and not isinstance(a, Long32):
                    if a.dtype.kind in "biu" and a.dtype.itemsize <= 4:
                        a = a.view(Long32) if a.dtype.kind != "b" else a.astype(np.int32)
                args = (a, *args[1:])
            return original(*args, **kwargs)
        result = original(*args, **kwargs)
        if dtype is not None or not isinstance(result, np.ndarray) or result.dtype != np.int64:
            return result
        if name == "full":
            source = [args[1] if len(args) > 1 else kwargs.get("fill_value")]
        elif name == "arange":
            source = [a for a in args if a is not None] + [
                kwargs[k] for k in ("start", "stop", "step") if kwargs.get(k) is not None
            ]
        elif name in TYPED:
            source = [None]  # only with dtype=int, above
        else:
            source = args[0] if args else kwargs.get("object", kwargs.get("a"))
        if _python_ints(source, [_SCAN_LIMIT]) and _fits(result):
            return result.astype(np.int32).view(Long32)
        return result

    return made


def _spied(used: list):
    def wrap(name, original):
        def spy(*args, **kwargs):
            if not used and _from_outside(sys._getframe(1)):
                used.append(name)
            return original(*args, **kwargs)

        return spy

    return wrap


@contextlib.contextmanager
def patched(module, names, wrap):
    """While active, ``module.<name>`` is ``wrap(name, original)`` for each of ``names`` the
    module has; every original is put back after."""
    saved = {name: getattr(module, name) for name in names if hasattr(module, name)}
    try:
        for name, original in saved.items():
            setattr(module, name, wrap(name, original))
        yield
    finally:
        for name, original in saved.items():
            setattr(module, name, original)


@contextlib.contextmanager
def narrow_ints():
    """While active: numpy's default integer is 32 bits for a student's calls (see above)."""
    with patched(np, CONSTRUCTORS + TYPED + REDUCTIONS, _narrowed):
        np.int_ = np.int32
        try:
            yield
        finally:
            np.int_ = _ORIGINAL_INT


@contextlib.contextmanager
def watched(used: list):
    """While active: the name of the first numpy constructor or reduction a student's code
    calls is appended to ``used`` (the call itself is untouched)."""
    with patched(np, CONSTRUCTORS + TYPED + REDUCTIONS, _spied(used)):
        yield
