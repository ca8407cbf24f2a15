"""Call a student's function in another process, by value: the judge's half and the worker's.

The sandbox (``zg_course/sandbox.py``) runs a
lab's hidden tests in the **judge**, a process outside the sandbox where no code of the
submission runs, and the submission's cells in the **worker**, inside it. Every name a
solution cell binds is, in the judge's namespace, a :class:`RemoteFunction` (or the value,
read back) and a call sends its arguments to the worker, which calls the student's function
there and sends back what it returned, what became of the arguments and what the contract's
observers saw (:func:`serve`). The tests' expected values, their generators, the references
and the verdict never enter the worker.

The two directions are not trusted alike:

* judge to worker: :mod:`pickle`, as is: the worker runs the submission, so whatever the
  judge sends it may read anyway (the inputs of a call);
* worker to judge: :func:`dumps` and :func:`loads`, a pickle whose only callables are the
  few rebuilders of this module (a tensor, a numpy array or scalar, a dtype, a device) and the
  plain containers (``list``, ``dict``, ``set``, ``frozenset``, ``collections``' ordered,
  default and counting dicts and deque). A tensor travels as its dtype, shape and bytes: no
  ``torch.load``, no class or function of the submission is ever called in the judge. Anything
  else (an object of the notebook's own class, a function, a generator) is refused by name:
  the call then fails with a message saying what came back.

What the worker observes for :func:`zg_course.contract.check` (the ``observe`` request) is what
the check observes of a local call: the process-wide settings changed, the host syncs, the
numpy functions used, the storage a result shares with an argument or an earlier result, and
the function's and the notebook's state. The judge compares the values.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import itertools
import pickle
import types
from collections.abc import Mapping

import numpy as np
import torch

from zg_course.sandbox import RESULT_LIMIT  # bytes of one answer of the worker the judge reads


class RemoteError(AssertionError):
    """A call to the student's function in the worker failed, or came back unreadable."""


class NeedsWorker(BaseException):
    """A test the judge cannot run against the worker by value (a DDP hook spawned on real
    process groups, an asynchronous collective): the judge runs that cell in the worker, as
    the sandbox did before it had a judge, and the report names it (``judged_inside``). A
    BaseException, so that a test's ``except Exception`` does not swallow it."""


# ----------------------------------------------------------------------------- by value, back


def _post_hooks(t):
    return getattr(t, "_post_accumulate_grad_hooks", None) if t.is_leaf else None


def _set_hooks(dst: torch.Tensor, want: tuple) -> None:
    """Make the judge's tensor carry as many hooks as the worker's did (see :func:`_no_change`)."""
    for hooks, n, register in (
        (dst._backward_hooks, want[0], dst.register_hook),
        (_post_hooks(dst), want[1], getattr(dst, "register_post_accumulate_grad_hook", None)),
    ):
        have = len(hooks or {})
        with contextlib.suppress(RuntimeError, TypeError):
            for _ in range(n - have):
                register(_no_change)
        while hooks is not None and len(hooks) > n:
            hooks.popitem()


def _with_grad(t, grad, hooks=(0, 0)):
    """In the worker: the judge's tensor with its gradient and as many (inert) hooks."""
    t.grad = grad
    _set_hooks(t, hooks)
    return t


def _grad_of(t):
    return t.grad if t.is_leaf else None


def _no_change(*args):
    """What stands in the judge for a hook the student's call left on an argument (hooks do not
    travel): it changes nothing, and the contract counts it."""
    return None


def _span(shape, stride) -> int:
    """Elements of storage a tensor of ``shape`` and ``stride`` (from its offset) reaches."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def _tensor(dtype: str, shape, data: bytes, requires_grad: bool, parameter: bool, attrs: dict,
            grad=None, hooks=(0, 0), stride=None):  # fmt: skip
    dt = getattr(torch, dtype, None)
    if not isinstance(dt, torch.dtype):
        raise pickle.UnpicklingError(f"no torch dtype {dtype!r}")
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise pickle.UnpicklingError("a tensor of negative size")
    if stride is None:  # contiguous
        stride, step = [], 1
        for s in reversed(shape):
            stride.insert(0, step)
            step *= max(s, 1)
    stride = tuple(int(s) for s in stride)
    if len(stride) != len(shape) or any(s < 0 for s in stride):
        raise pickle.UnpicklingError("a tensor whose strides do not match its shape")
    n = _span(shape, stride)
    if len(data) != n * torch.empty((), dtype=dt).element_size():
        raise pickle.UnpicklingError("a tensor whose bytes do not match its shape")
    base = torch.frombuffer(bytearray(data), dtype=dt) if n else torch.empty(0, dtype=dt)
    t = base.as_strided(shape, stride)  # the worker's strides: a view stays a view
    if parameter:
        t = torch.nn.Parameter(t, requires_grad=requires_grad)
    elif requires_grad:
        t.requires_grad_(True)
    for k, v in attrs.items():
        if not str(k).startswith("__"):
            setattr(t, str(k), v)
    if grad is not None:
        if not isinstance(grad, torch.Tensor) or grad.shape != t.shape:
            raise pickle.UnpicklingError("a gradient that is not a tensor of its shape")
        t.grad = grad
    hooks = (min(int(hooks[0]), 1000), min(int(hooks[1]), 1000))
    if any(hooks):
        t.__dict__["_zg_hooks"] = hooks  # read by write_back, never left on the judge's tensor
    return t


def _ndarray(dtype: str, shape, data: bytes):
    dt = np.dtype(dtype)
    if dt.hasobject:
        raise pickle.UnpicklingError("a numpy array of objects")
    return np.frombuffer(bytearray(data), dtype=dt).reshape(tuple(int(s) for s in shape)).copy()


def _npscalar(dtype: str, data: bytes):
    return _ndarray(dtype, (), data)[()]


def _dtype(name: str):
    return _tensor_dtype(name)


def _tensor_dtype(name: str):
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise pickle.UnpicklingError(f"no torch dtype {name!r}")
    return dt


def _device(name: str):
    return torch.device(name)


def _size(dims):
    return torch.Size([int(d) for d in dims])


_REBUILDERS = {
    "_tensor": _tensor,
    "_ndarray": _ndarray,
    "_npscalar": _npscalar,
    "_dtype": _dtype,
    "_device": _device,
    "_size": _size,
    "_unsent": lambda: UNSENT,
    "_closure": lambda cells, names: _Closure(list(cells), dict(names)),
    "_object": lambda module, qualname, attrs: _object(module, qualname, attrs),
}


def _of_data(kind, allowed: tuple, most: int = 1, rest: tuple = (int, type(None))):
    """``kind`` called only on values the stream itself holds (a list it built, a string): never
    on a number or a range it would expand (``bytes(10**12)``, ``list(range(10**12))``), so what
    the judge allocates is bounded by what it read. At most ``most`` arguments: the first of
    ``allowed`` types, the others of ``rest``."""

    def make(*args):
        if (
            len(args) > most
            or not all(isinstance(a, allowed) for a in args[:1])
            or not all(isinstance(a, rest) for a in args[1:])
        ):
            raise pickle.UnpicklingError(f"{kind.__name__} of {[type(a).__name__ for a in args]}")
        return kind(*args)

    return make


_SAFE = {
    ("builtins", "set"): _of_data(set, (list, tuple)),
    ("builtins", "frozenset"): _of_data(frozenset, (list, tuple)),
    ("builtins", "complex"): _of_data(complex, (float, int), 2, (float, int)),
    ("builtins", "slice"): _of_data(slice, (int, type(None)), 3),
    ("builtins", "bytearray"): _of_data(bytearray, (bytes,)),
    ("builtins", "int"): _of_data(int, (int,)),
    ("builtins", "float"): _of_data(float, (float,)),
    ("builtins", "list"): _of_data(list, (list, tuple)),
    ("builtins", "dict"): _of_data(dict, (dict, list)),
    ("builtins", "str"): _of_data(str, (str,)),
    ("builtins", "bytes"): _of_data(bytes, (bytes,)),
    ("builtins", "tuple"): _of_data(tuple, (tuple, list)),
    ("collections", "OrderedDict"): _of_data(collections.OrderedDict, (dict, list)),
    ("collections", "Counter"): _of_data(collections.Counter, (dict,)),
    ("collections", "deque"): _of_data(collections.deque, (list, tuple), 2),
    ("collections", "defaultdict"): lambda factory=None: collections.defaultdict(
        factory if factory in (None, list, dict, set, int, float, str) else None
    ),
}


class _Writer(pickle.Pickler):
    """The worker's pickler: tensors, numpy values, dtypes and devices as data."""

    def reducer_override(self, obj):
        if isinstance(obj, torch.Tensor):
            t = obj.detach()
            if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
                raise pickle.PicklingError(f"a {t.layout} tensor on {t.device}")
            shape, stride = list(t.shape), list(t.stride())
            if any(s < 0 for s in stride):  # not a layout this reads back: made contiguous
                t, stride = t.contiguous(), list(t.contiguous().stride())
            span = _span(shape, stride)
            flat = torch.empty(span, dtype=t.dtype)  # the storage the view reaches, in order
            flat.copy_(t.as_strided((span,), (1,)) if span else flat)
            data = flat.view(torch.uint8).numpy().tobytes()
            attrs = dict(getattr(obj, "__dict__", {}))
            return _rebuild, (
                "_tensor",
                str(t.dtype).replace("torch.", ""),
                list(t.shape),
                data,
                bool(obj.requires_grad),
                isinstance(obj, torch.nn.Parameter),
                attrs,
                _grad_of(obj),
                (len(obj._backward_hooks or {}), len(_post_hooks(obj) or {})),
                stride,
            )
        if isinstance(obj, np.ndarray):
            a = np.ascontiguousarray(obj)
            if a.dtype.hasobject:
                raise pickle.PicklingError("a numpy array of objects")
            return _rebuild, ("_ndarray", a.dtype.str, list(a.shape), a.tobytes())
        if isinstance(obj, np.generic):
            a = np.asarray(obj)
            return _rebuild, ("_npscalar", a.dtype.str, a.tobytes())
        if isinstance(obj, torch.dtype):
            return _rebuild, ("_dtype", str(obj).replace("torch.", ""))
        if isinstance(obj, torch.device):
            return _rebuild, ("_device", str(obj))
        if isinstance(obj, torch.Size):
            return _rebuild, ("_size", list(obj))
        if obj is UNSENT:
            return _rebuild, ("_unsent",)
        for base in (str, int, float, complex, bytes, tuple):  # a library's subclass: its value
            if isinstance(obj, base) and type(obj) is not base and not isinstance(obj, bool):
                return base, (base(obj),)
        if isinstance(obj, _Closure):
            return _rebuild, ("_closure", obj.cells, obj.names)
        cls = type(obj)
        if (
            (
                cls.__module__ == "zg"
                or cls.__module__.startswith("zg.")
                or cls.__module__ == "__main__"
            )
            and isinstance(getattr(obj, "__dict__", None), dict)
            and not isinstance(obj, (type, types.FunctionType, types.ModuleType, torch.nn.Module))
            and not hasattr(cls, "__slots__")
        ):
            return _rebuild, ("_object", cls.__module__, cls.__qualname__, dict(vars(obj)))
        return NotImplemented


def _object(module: str, qualname: str, attrs: dict):
    """An object of a kit class, or of a class a cell both processes ran defined: made with
    ``object.__new__`` (no constructor of the class runs) and given the attributes read."""
    import sys

    if module == "__main__":
        cls = SHARED.get(qualname)
    elif module == "zg" or module.startswith("zg."):
        cls = sys.modules.get(module)
        for part in qualname.split("."):
            cls = getattr(cls, part, None)
    else:
        cls = None
    if not isinstance(cls, type) or cls.__module__ != module or hasattr(cls, "__slots__"):
        raise pickle.UnpicklingError(f"{module}.{qualname} is not a class the judge reads")
    if issubclass(cls, (torch.Tensor, torch.nn.Module, BaseException)):
        raise pickle.UnpicklingError(f"{module}.{qualname} is not a class the judge reads")
    obj = object.__new__(cls)
    obj.__dict__.update({str(k): v for k, v in attrs.items() if not str(k).startswith("__")})
    return obj


def _rebuild(kind: str, *args):
    return _REBUILDERS[kind](*args)


class _Reader(pickle.Unpickler):
    """The judge's unpickler: only this module's rebuilders and the plain containers."""

    def find_class(self, module, name):
        if module == __name__ and name == "_rebuild":
            return _rebuild
        if (module, name) in _SAFE:
            return _SAFE[(module, name)]
        raise pickle.UnpicklingError(f"{module}.{name} is not a value the judge reads")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("no persistent ids")


def dumps(obj) -> bytes:
    """``obj`` as the worker sends it (RemoteError: not a value of the kinds above)."""
    buf = io.BytesIO()
    try:
        _Writer(buf, protocol=4).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError, ValueError) as exc:
        raise RemoteError(f"{_kind(obj)}, which the grader cannot read ({exc})") from None
    return buf.getvalue()


def loads(data: bytes):
    """What the worker sent, read with :class:`_Reader` only."""
    if len(data) > RESULT_LIMIT:
        raise RemoteError(f"an answer of {len(data)} bytes, over the {RESULT_LIMIT} allowed")
    try:
        return _Reader(io.BytesIO(data)).load()
    except RecursionError:
        raise RemoteError("an answer nested too deep to read") from None
    except Exception as exc:  # any malformed stream: refused
        raise RemoteError(f"an answer the grader does not read ({exc})") from None


def _kind(obj) -> str:
    t = type(obj)
    return f"a {t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else f"a {t.__name__}"


# ----------------------------------------------------------------------------- write-back


def write_back(dst, src, depth: int = 0) -> None:
    """Make the judge's argument ``dst`` what the worker's call left of it (``src``), in place:
    values, shape, ``requires_grad`` and attributes of tensors; items of lists, dicts and sets;
    attributes of objects. The check compares its snapshot of the argument with ``dst``."""
    if depth > 40 or dst is src or src is UNSENT:
        return
    if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
        with torch.no_grad():
            if dst.shape == src.shape and dst.dtype == src.dtype:
                if not torch.equal(dst.detach().cpu(), src):
                    dst.copy_(src)
            else:
                try:
                    dst.set_(src.to(dst.device).detach().clone())
                except RuntimeError:
                    dst.data = src.to(dst.device)
        if dst.is_leaf and dst.requires_grad != src.requires_grad:
            dst.requires_grad_(src.requires_grad)
        if dst.is_leaf:
            grad = src.grad
            if grad is None:
                dst.grad = None
            elif dst.grad is not None and dst.grad.shape == grad.shape:
                with torch.no_grad():
                    dst.grad.copy_(grad)
            else:
                dst.grad = grad.to(dst.device)
        mine, theirs = getattr(dst, "__dict__", {}), dict(getattr(src, "__dict__", {}))
        _set_hooks(dst, theirs.pop("_zg_hooks", (0, 0)))
        for k in set(mine) - set(theirs):
            with contextlib.suppress(AttributeError):
                delattr(dst, k)
        for k, v in theirs.items():
            with contextlib.suppress(AttributeError):
                setattr(dst, k, v)
        return
    if isinstance(dst, list) and isinstance(src, list):
        if len(dst) == len(src):
            for i, (a, b) in enumerate(zip(dst, src)):
                if _same_kind(a, b):
                    write_back(a, b, depth + 1)
                elif b is not UNSENT and not isinstance(b, _Closure):
                    dst[i] = b
        elif not any(v is UNSENT or isinstance(v, _Closure) for v in src):
            dst[:] = src
        return
    if isinstance(dst, tuple) and isinstance(src, tuple) and len(dst) == len(src):
        for a, b in zip(dst, src):
            write_back(a, b, depth + 1)
        return
    if isinstance(dst, dict) and isinstance(src, Mapping):
        for k in [k for k in dst if k not in src]:
            del dst[k]
        for k, v in src.items():
            if k in dst and _same_kind(dst[k], v):
                write_back(dst[k], v, depth + 1)
            elif v is not UNSENT and not isinstance(v, _Closure):
                dst[k] = v
            elif k not in dst:  # a function the call added (a module's hook): counted, inert
                dst[k] = _no_change
        return
    if isinstance(dst, set) and isinstance(src, (set, frozenset)):
        dst.clear()
        dst.update(src)
        return
    if isinstance(dst, types.FunctionType) and isinstance(src, _Closure):
        for name, v in src.names.items():  # in place only: a global is never rebound
            now = dst.__globals__.get(name)
            if _same_kind(now, v):
                write_back(now, v, depth + 1)
        cells = dst.__closure__ or ()
        if len(cells) != len(src.cells):
            return
        for cell, v in zip(cells, src.cells):
            try:
                now = cell.cell_contents
            except ValueError:
                continue
            if _same_kind(now, v):
                write_back(now, v, depth + 1)
            elif v is not UNSENT and not isinstance(v, _Closure) and now is not v:
                cell.cell_contents = v
        return
    if _plain_object(dst) and isinstance(src, dict):
        write_back(vars(dst), src, depth + 1)


def _plain_object(x) -> bool:
    return isinstance(getattr(x, "__dict__", None), dict) and not (
        isinstance(x, (type, types.FunctionType, types.MethodType, types.ModuleType))
    )


def _same_kind(a, b) -> bool:
    """Whether ``a`` is written back in place from ``b`` (else replaced by it)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor)
    if isinstance(a, (list, set)):
        return type(a) is type(b)
    if isinstance(a, dict):
        return isinstance(b, Mapping)
    if isinstance(a, types.FunctionType):
        return isinstance(b, _Closure)
    return _plain_object(a) and isinstance(b, dict)


class _Closure:
    """What a function the judge sent holds after the call (a test's callback that records):
    its closure cells and the globals it names (cloudpickle sent those with it)."""

    def __init__(self, cells: list, names: dict | None = None):
        self.cells = cells
        self.names = names or {}


class _Unsent:
    def __repr__(self) -> str:
        return "UNSENT"


UNSENT = _Unsent()  # what of an argument does not travel back (a function, a generator): kept


def _state(obj, depth: int = 0):
    """What of an argument travels back: containers and tensors as they are, an object of
    another class as its attributes (``write_back`` puts them back on the judge's object), and
    :data:`UNSENT` for what cannot travel (the judge keeps its own)."""
    if depth > 16:
        return UNSENT
    if isinstance(obj, (torch.Tensor, np.ndarray, np.generic, str, bytes, int, float, complex,
                        bool, type(None), torch.dtype, torch.device)):  # fmt: skip
        return obj
    if isinstance(obj, list):
        return [_state(v, depth + 1) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_state(v, depth + 1) for v in obj)
    if isinstance(obj, (dict, collections.OrderedDict)):
        return {k: _state(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return obj
    if isinstance(obj, types.FunctionType):
        cells = []
        for cell in obj.__closure__ or ():
            try:
                cells.append(_state(cell.cell_contents, depth + 1))
            except ValueError:  # an empty cell
                cells.append(UNSENT)
        names = {}
        if obj.__globals__ is not _NAMESPACE[0]:  # sent by the judge: its own copy of them
            for name in obj.__code__.co_names:
                v = obj.__globals__.get(name)
                if isinstance(v, (list, dict, set, torch.Tensor)):
                    names[name] = _state(v, depth + 1)
        return _Closure(cells, names)
    if _plain_object(obj):
        return {k: _state(v, depth + 1) for k, v in vars(obj).items()}
    return UNSENT


# ----------------------------------------------------------------------------- the judge's half


class Channel:
    """The judge's end of the socket to the worker: one request, one answer, in order."""

    def __init__(self, sock, on_event=None):
        self.sock = sock
        self.on_event = on_event  # messages that are not the answer (a cell's output)

    def send(self, header: dict, blob: bytes = b"") -> None:
        send_frame(self.sock, header, blob)

    def recv(self) -> tuple[dict, bytes]:
        return recv_frame(self.sock, RESULT_LIMIT)

    def request(self, header: dict, blob: bytes = b"") -> tuple[dict, bytes]:
        self.send(header, blob)
        return self.recv()


def send_frame(sock, header: dict, blob: bytes = b"") -> None:
    from zg_course.sandbox import send_frame as send

    send(sock, header, blob)


def recv_frame(sock, limit: int) -> tuple[dict, bytes]:
    from zg_course.sandbox import recv_frame as recv

    try:
        return recv(sock, limit)
    except ValueError as exc:
        raise RemoteError(str(exc)) from None


_CHANNEL: list[Channel] = []  # the judge's channel to the worker (one per judge process)
_TOKENS = itertools.count(1)


def connect(channel: Channel) -> None:
    _CHANNEL[:] = [channel]


SHARED: dict[str, object] = {}  # the judge's: what cells both processes ran bound, by name


def shared(namespace: dict, names) -> None:
    """In the judge: ``names`` were bound by a cell the worker ran too (its own of each)."""
    for name in names:
        SHARED[name] = namespace.get(name)


def _sender(buf):
    """The judge's pickler: a class or function that a cell both ran bound travels by name
    (the worker has its own); one a test defined travels by value (cloudpickle)."""
    import cloudpickle

    class _Sender(cloudpickle.Pickler):
        def reducer_override(self, obj):
            if (
                isinstance(obj, torch.Tensor)
                and obj.is_leaf
                and type(obj) in (torch.Tensor, torch.nn.Parameter)
            ):
                hooks = (len(obj._backward_hooks or {}), len(_post_hooks(obj) or {}))
                if obj.grad is not None or any(hooks):
                    if isinstance(obj, torch.nn.Parameter):
                        base = torch.nn.Parameter(obj.data, obj.requires_grad)
                    else:
                        base = obj.data.requires_grad_(obj.requires_grad)
                    return _with_grad, (base, obj.grad, hooks)
            return super().reducer_override(obj)

        def persistent_id(self, obj):
            if (
                isinstance(obj, (type, types.FunctionType))
                and getattr(obj, "__module__", None) == "__main__"
            ):
                name = obj.__qualname__
                if SHARED.get(name) is obj:
                    return ("notebook", name)
            return None

    return _Sender(buf, protocol=4)


class _Receiver(pickle.Unpickler):
    """The worker's unpickler of the judge's requests (trusted: the judge sends inputs)."""

    def persistent_load(self, pid):
        kind, name = pid
        value = _NAMESPACE[0].get(name)
        if value is None:
            raise RemoteError(f"the notebook in the worker has no {name!r}")
        return value


def _request_bytes(fields: dict) -> bytes:
    buf = io.BytesIO()
    try:
        _sender(buf).dump(fields)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise RemoteError(f"the test's arguments cannot be sent to the worker: {exc}") from None
    return buf.getvalue()


def _ask(op: str, after=None, **fields):
    """One request to the worker; its answer's value (RemoteError when it reports none). The
    judge's active modes are suspended while it waits (they count the worker's call, mirrored)."""
    from torch.utils._python_dispatch import _disable_current_modes

    if not _CHANNEL:
        raise RemoteError("no worker to call")
    pairs = _active_modes()
    fields["modes"] = [spec for _, spec in pairs]
    with _disable_current_modes(), _no_function_modes():
        header, blob = _CHANNEL[0].request({"op": op}, _request_bytes(fields))
        if header.get("op") != "answer":
            raise RemoteError(f"the worker answered {str(header.get('op'))[:40]!r} to a call")
        if header.get("tampered"):
            raise AssertionError(str(header["tampered"])[:2000])
        if header.get("error"):
            raise RemoteError(str(header["error"])[:4000])
        value, states = loads(blob)
        if after is not None:
            value = after(value)  # the arguments written back: not the student's to count
    if len(states) == len(pairs):
        _apply_counts(pairs, states)
    return value


# ---- the test's measuring contexts, mirrored: every torch dispatch or function mode active in
# the judge when it calls a student's function (a SyncAudit, a LaunchCount, a mode a lab's cell
# defines) is made again in the worker from the arguments it was made with and the counts it
# holds, entered around the call, and its counts come back to the judge's mode.

_DATA = (int, float, bool, str, type(None))


def _data(x, depth: int = 0) -> bool:
    if isinstance(x, _DATA):
        return True
    if depth > 4:
        return False
    if isinstance(x, (list, tuple, set, frozenset)):
        return all(_data(v, depth + 1) for v in x)
    if isinstance(x, dict):
        return all(_data(k, depth + 1) and _data(v, depth + 1) for k, v in x.items())
    return False


def _counts(mode) -> dict:
    """The plain data a mode holds (its counts and settings): what travels both ways."""
    return {k: v for k, v in vars(mode).items() if k != "_zg_init" and _data(v)}


def _recording_new(cls, *args, **kwargs):
    obj = object.__new__(cls)
    obj.__dict__["_zg_init"] = (args, kwargs)
    return obj


def _plain_new(cls, *args, **kwargs):
    return object.__new__(cls)


def record_mode_arguments(on: bool = True) -> None:
    """In the judge: every torch mode made from now on keeps the arguments it was made with
    (``on=False``: no longer; a ``__new__`` that takes them stays, because CPython cannot give
    the classes back the slot they had once one was set)."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    for base in (TorchDispatchMode, TorchFunctionMode):
        base.__new__ = _recording_new if on else _plain_new


def _class_ref(cls):
    if cls.__module__ == "__main__":
        return ["__main__", cls.__qualname__]
    return [cls.__module__, cls.__qualname__]


def _active_modes() -> list:
    """In the judge: the modes to make again in the worker, outermost first."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    modes = list(_get_current_dispatch_mode_stack())
    modes += [
        m
        for m in torch.overrides._get_current_function_mode_stack()
        if not type(m).__name__.startswith("_")  # a mode's own helper (SyncAudit's watch)
    ]
    specs = []
    for m in modes:
        init = vars(m).get("_zg_init")
        if init is None:
            raise RemoteError(
                f"a {type(m).__name__} is active, made before the judge recorded its arguments"
            )
        specs.append((m, [_class_ref(type(m)), init[0], init[1], _counts(m)]))
    return specs


@contextlib.contextmanager
def _no_function_modes():
    """Torch's function modes popped while the judge waits, pushed back in order after."""
    popped = []
    while torch._C._len_torch_function_stack():
        popped.append(torch._C._pop_torch_function_stack())
    try:
        yield
    finally:
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)


def _apply_counts(pairs, states) -> None:
    for (mode, _), state in zip(pairs, states):
        vars(mode).update(state)


@contextlib.contextmanager
def _mirrored(specs: list, namespace: dict, states: list):
    """In the worker: the judge's modes made again, entered (outermost first), their counts
    put in ``states`` on the way out."""
    import importlib

    made = []
    for (module, qualname), args, kwargs, counts in specs:
        if module == "__main__":
            cls = namespace.get(qualname)
        else:
            cls = importlib.import_module(module)
            for part in qualname.split("."):
                cls = getattr(cls, part)
        if not isinstance(cls, type):
            raise RemoteError(f"no class {qualname} in the worker to count with")
        mode = cls(*args, **kwargs)
        vars(mode).update(counts)
        made.append(mode)
    with contextlib.ExitStack() as stack:
        for mode in made:
            stack.enter_context(mode)
        try:
            yield
        finally:
            stack.close()
            states[:] = [_counts(m) for m in made]


class RemoteFunction:
    """The judge's stand-in for a function a solution cell defined: a call runs it in the
    worker on copies of the arguments, writes back what the call did to them, and returns what
    it returned (read with :func:`loads`). An exception it raised is raised again here as
    :class:`StudentError` with its type and message."""

    __zg_remote__ = True

    def __init__(self, name: str, parameters: list, source: str | None = None):
        self.__name__ = self.__qualname__ = name
        self.__module__ = "__main__"
        if source:  # inspect.getsource works on it (it unwraps): the student's text, not run
            self.__wrapped__ = _source_only(name, source)
        import inspect

        params = []
        for pname, kind, has_default in parameters:
            params.append(inspect.Parameter(
                str(pname), getattr(inspect.Parameter, str(kind), inspect.Parameter.POSITIONAL_OR_KEYWORD),
                default=None if has_default else inspect.Parameter.empty,
            ))  # fmt: skip
        try:
            self.__signature__ = inspect.Signature(params)
        except (ValueError, TypeError):
            self.__signature__ = inspect.Signature()

    def __repr__(self) -> str:
        return f"<function {self.__name__} (in the worker)>"

    def __reduce__(self):
        return (_named, (self.__name__,))

    def __call__(self, *args, **kwargs):
        answer = _ask(
            "call", after=lambda a: _settle(a, args, kwargs), name=self.__name__, args=args,
            kwargs=kwargs,
        )  # fmt: skip
        if answer.get("raised"):
            raise _again_here(answer.get("exception") or {}, answer["raised"])
        return answer["result"]

    def ask(self, op: str, **fields):
        """A request of :func:`zg_course.contract.check` about this function (see :func:`serve`)."""
        return _ask(op, name=self.__name__, **fields)


def _source_only(name: str, source: str):
    """A function that does nothing, whose code points at ``source`` in ``linecache`` (under a
    file name of its own): what ``inspect.getsource`` reads for a stand-in. Nothing of the
    source is compiled or run in the judge."""
    import linecache

    filename = f"<student function {name}>"
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    code = compile("def _():\n    pass\n", filename, "exec").co_consts[0]
    stub = types.FunctionType(code.replace(co_name=name, co_filename=filename), {})
    stub.__name__ = name
    return stub


def _settle(answer: dict, args, kwargs):
    write_back(list(args), list(answer["args"]))
    write_back(kwargs, answer["kwargs"])
    return answer


class StudentError(Exception):
    """What the student's function raised in the worker, as ``Type: message``."""


_RAISED_AS: dict = {}


def _again_here(exc: dict, text: str) -> BaseException:
    """The student's exception, raised again in the judge: of a class that is both
    :class:`StudentError` and the nearest of the standard or kit exception classes the
    original derived from (``except ValueError`` in a test catches a ValueError raised in the
    worker), with the original's message."""
    import builtins
    import sys

    base = None
    module, qualname = str(exc.get("module")), str(exc.get("qualname"))
    if module == "zg" or module.startswith("zg."):
        cls = sys.modules.get(module)
        for part in qualname.split("."):
            cls = getattr(cls, part, None)
        base = cls if isinstance(cls, type) and issubclass(cls, Exception) else None
    for name in [] if base is not None else exc.get("bases") or []:
        cls = getattr(builtins, str(name), None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            base = cls
            break
    if base is None or base is Exception:
        return StudentError(text)
    if base not in _RAISED_AS:
        _RAISED_AS[base] = type(
            base.__name__, (base, StudentError), {"__module__": base.__module__}
        )
    try:
        return _RAISED_AS[base](str(exc.get("message", text)))
    except Exception:
        return StudentError(text)


def _named(name: str):
    """In the worker: the function of the notebook bound to ``name`` (a RemoteFunction sent as
    an argument)."""
    return _NAMESPACE[0][name]


_NAMESPACE: list[dict] = [{}]


def session() -> int:
    return next(_TOKENS)


# ----------------------------------------------------------------------------- the worker's half


def serve(namespace: dict, header: dict, blob: bytes) -> tuple[dict, bytes]:
    """Answer one request of the judge in the worker: ``({"op": "answer", "error": ...}, blob)``."""
    _NAMESPACE[0] = namespace
    op = header.get("op")
    from zg_course import contract

    if not contract._ALIVE:  # what the judge's cell sends, kept until it ends (contract._ALIVE)
        contract._ALIVE.append([])
    try:
        fields = contract._kept(_Receiver(io.BytesIO(blob)).load())
        modes = fields.pop("modes", [])
        if op == "value":
            return {"op": "answer"}, dumps((namespace[fields["name"]], []))
        name = fields.pop("name")
        fn = namespace.get(name)
        if not callable(fn):
            raise RemoteError(f"no function {name!r} in the notebook")
        states: list = []
        around = functools.partial(_mirrored, modes, namespace, states)
        if op == "call":
            value = _op_call(fn, namespace, around=around, **fields)
        else:
            with around():
                value = _OPS[op](fn, namespace, **fields)
        data = dumps((value, states))
        if len(data) > RESULT_LIMIT:
            raise RemoteError(f"an answer of {len(data)} bytes, over the {RESULT_LIMIT} allowed")
    except Exception as exc:
        return {"op": "answer", "error": f"{type(exc).__name__}: {exc}"}, b""
    return {"op": "answer"}, data


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _op_call(fn, namespace, args, kwargs, around=contextlib.nullcontext):
    try:
        with around():
            result = fn(*args, **kwargs)
        raised = None
    except Exception as exc:
        result, raised = None, _raised(exc)
        kind = type(exc)
        info = {"module": kind.__module__, "qualname": kind.__qualname__, "message": str(exc),
                "bases": [c.__name__ for c in kind.__mro__ if c.__module__ == "builtins"]}  # fmt: skip
    answer = {"result": result, "raised": raised}
    if raised:
        answer["exception"] = info
    answer["args"], answer["kwargs"] = [_state(a) for a in args], _state(kwargs)
    try:
        dumps(answer["result"])
    except RemoteError as exc:
        answer["result"], answer["raised"] = None, f"RemoteError: it returned {exc}"
    return answer


_STATES: dict[int, object] = {}
_SEEN: dict[int, list] = collections.defaultdict(list)


def _op_state(fn, namespace, token, deep):
    from zg_course import contract

    _STATES[token] = contract._state_of(fn, namespace, deep=deep)
    return None


def _op_state_changes(fn, namespace, token, deep):
    from zg_course import contract

    before = _STATES.pop(token, None)
    if before is None:
        return None
    return contract._state_changes(before, fn, namespace, deep=deep)


def _op_observe(fn, namespace, args, kwargs, function, host_syncs, stateless, session):
    from zg_course import contract

    return contract._observed_call(
        fn, namespace, args, kwargs, function=function, host_syncs=host_syncs,
        stateless=stateless, earlier=_SEEN[session],
    )  # fmt: skip


def _op_again(fn, namespace, args, kwargs, function, narrow):
    from zg_course import contract

    return contract._again(fn, args, kwargs, function, narrow)


def _op_device(fn, namespace, args, kwargs, function):
    from zg_course import contract

    return contract._device_findings(fn, args, kwargs, function)


def _op_refill(fn, namespace, first, then, function):
    from zg_course import contract

    return contract._refill_pair(fn, first, then, function)


_OPS = {
    "call": _op_call,
    "state": _op_state,
    "state_changes": _op_state_changes,
    "observe": _op_observe,
    "again": _op_again,
    "device": _op_device,
    "refill": _op_refill,
}


def describe(namespace: dict, names) -> list[dict]:
    """In the worker, after a solution cell: what each name it bound is, for the judge."""
    import inspect

    out = []
    for name in names:
        v = namespace[name]
        if inspect.isfunction(v) or (callable(v) and not isinstance(v, type)):
            try:
                sig = inspect.signature(v)
                params = [
                    [p.name, p.kind.name, p.default is not p.empty] for p in sig.parameters.values()
                ]
            except (TypeError, ValueError):
                params = []
            try:
                source = inspect.getsource(v)[:100_000]
            except (OSError, TypeError):
                source = None
            out.append({"name": name, "kind": "function", "parameters": params, "source": source})
        elif isinstance(v, types.ModuleType):
            out.append({"name": name, "kind": "module", "module": v.__name__})
        else:
            out.append({"name": name, "kind": "value"})
    return out
