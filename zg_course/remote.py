"""Call a student's function in another process, by value: the judge's half and the worker's.

The sandbox's judged mode (``zg_course/sandbox.py``, :data:`zg_course.sandbox.JUDGED`) runs a
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
import io
import itertools
import pickle
import struct
from collections.abc import Mapping

import numpy as np
import torch

RESULT_LIMIT = 256 << 20  # bytes of one answer of the worker the judge reads


class RemoteError(AssertionError):
    """A call to the student's function in the worker failed, or came back unreadable."""


# ----------------------------------------------------------------------------- by value, back


def _tensor(dtype: str, shape, data: bytes, requires_grad: bool, parameter: bool, attrs: dict):
    dt = getattr(torch, dtype, None)
    if not isinstance(dt, torch.dtype):
        raise pickle.UnpicklingError(f"no torch dtype {dtype!r}")
    shape = tuple(int(s) for s in shape)
    n = 1
    for s in shape:
        n *= s
    if len(data) != n * torch.empty((), dtype=dt).element_size():
        raise pickle.UnpicklingError("a tensor whose bytes do not match its shape")
    t = torch.frombuffer(bytearray(data), dtype=dt) if n else torch.empty(0, dtype=dt)
    t = t.reshape(shape).clone()
    if parameter:
        t = torch.nn.Parameter(t, requires_grad=requires_grad)
    elif requires_grad:
        t.requires_grad_(True)
    for k, v in attrs.items():
        setattr(t, str(k), v)
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
}
_SAFE = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "slice"): slice,
    ("builtins", "range"): range,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "int"): int,
    ("builtins", "float"): float,
    ("builtins", "list"): list,
    ("builtins", "dict"): dict,
    ("builtins", "str"): str,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "defaultdict"): collections.defaultdict,
    ("collections", "Counter"): collections.Counter,
    ("collections", "deque"): collections.deque,
}


class _Writer(pickle.Pickler):
    """The worker's pickler: tensors, numpy values, dtypes and devices as data."""

    def reducer_override(self, obj):
        if isinstance(obj, torch.Tensor):
            t = obj.detach()
            if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
                raise pickle.PicklingError(f"a {t.layout} tensor on {t.device}")
            data = t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            attrs = dict(getattr(obj, "__dict__", {}))
            return _rebuild, (
                "_tensor",
                str(t.dtype).replace("torch.", ""),
                list(t.shape),
                data,
                bool(obj.requires_grad),
                isinstance(obj, torch.nn.Parameter),
                attrs,
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
        return NotImplemented


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
    if depth > 8 or dst is src:
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
        mine, theirs = getattr(dst, "__dict__", {}), getattr(src, "__dict__", {})
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
                else:
                    dst[i] = b
        else:
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
            else:
                dst[k] = v
        return
    if isinstance(dst, set) and isinstance(src, (set, frozenset)):
        dst.clear()
        dst.update(src)
        return
    if hasattr(dst, "__dict__") and isinstance(src, dict) and not isinstance(dst, type):
        write_back(vars(dst), src, depth + 1)


def _same_kind(a, b) -> bool:
    mutable = (torch.Tensor, list, dict, set)
    return (
        isinstance(a, mutable)
        and type(a) is type(b)
        or (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor))
    )


def _state(obj, depth: int = 0):
    """What of an argument travels back: containers and tensors as they are, an object of
    another class as its attributes (``write_back`` puts them back on the judge's object)."""
    if depth > 8:
        return None
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
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict) and not callable(obj):
        return {k: _state(v, depth + 1) for k, v in d.items()}
    return None


# ----------------------------------------------------------------------------- the judge's half

_FRAME = struct.Struct("!II")


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
    import json

    head = json.dumps(header).encode()
    sock.sendall(_FRAME.pack(len(head), len(blob)) + head + blob)


def _exactly(sock, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the other process closed the socket")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_frame(sock, limit: int) -> tuple[dict, bytes]:
    import json

    n_head, n_blob = _FRAME.unpack(_exactly(sock, _FRAME.size))
    if n_head > (1 << 20) or n_blob > limit:
        raise RemoteError(f"a message of {n_head} + {n_blob} bytes, over the limit")
    header = json.loads(_exactly(sock, n_head))
    if not isinstance(header, dict):
        raise RemoteError("a message that is not an object")
    return header, _exactly(sock, n_blob)


_CHANNEL: list[Channel] = []  # the judge's channel to the worker (one per judge process)
_TOKENS = itertools.count(1)


def connect(channel: Channel) -> None:
    _CHANNEL[:] = [channel]


def _ask(op: str, **fields):
    """One request to the worker; its answer's value (RemoteError when it reports none)."""
    if not _CHANNEL:
        raise RemoteError("no worker to call")
    header, blob = _CHANNEL[0].request({"op": op}, pickle.dumps(fields, protocol=4))
    if header.get("op") != "answer":
        raise RemoteError(f"the worker answered {str(header.get('op'))[:40]!r} to a call")
    if header.get("tampered"):
        raise AssertionError(str(header["tampered"])[:2000])
    if header.get("error"):
        raise RemoteError(str(header["error"])[:4000])
    value = loads(blob)
    return value


class RemoteFunction:
    """The judge's stand-in for a function a solution cell defined: a call runs it in the
    worker on copies of the arguments, writes back what the call did to them, and returns what
    it returned (read with :func:`loads`). An exception it raised is raised again here as
    :class:`StudentError` with its type and message."""

    __zg_remote__ = True

    def __init__(self, name: str, parameters: list):
        self.__name__ = self.__qualname__ = name
        self.__module__ = "__main__"
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
        answer = _ask("call", name=self.__name__, args=args, kwargs=kwargs)
        return _settle(answer, args, kwargs)

    def ask(self, op: str, **fields):
        """A request of :func:`zg_course.contract.check` about this function (see :func:`serve`)."""
        return _ask(op, name=self.__name__, **fields)


def _settle(answer: dict, args, kwargs):
    write_back(list(args), list(answer["args"]))
    write_back(kwargs, answer["kwargs"])
    if answer.get("raised"):
        raise StudentError(answer["raised"])
    return answer["result"]


class StudentError(Exception):
    """What the student's function raised in the worker, as ``Type: message``."""


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
    try:
        fields = pickle.loads(blob)
        if op == "value":
            return {"op": "answer"}, dumps(namespace[fields["name"]])
        fn = namespace.get(fields.pop("name"))
        if not callable(fn):
            raise RemoteError(f"no function {header.get('name')!r} in the notebook")
        value = _OPS[op](fn, namespace, **fields)
        data = dumps(value)
    except Exception as exc:
        return {"op": "answer", "error": f"{type(exc).__name__}: {exc}"}, b""
    return {"op": "answer"}, data


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _op_call(fn, namespace, args, kwargs):
    try:
        result = fn(*args, **kwargs)
        raised = None
    except Exception as exc:
        result, raised = None, _raised(exc)
    answer = {"result": result, "raised": raised}
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
            out.append({"name": name, "kind": "function", "parameters": params})
        else:
            out.append({"name": name, "kind": "value"})
    return out
