"""Argument checks shared across the package: every error names the argument and the problem.

One module for all of them, so that "what is a valid seed, a valid list of node ids, a valid
output path" has one answer everywhere (samplers, envelopes, datasets, Grappa). Each check
returns the value in canonical form (an ``int``, a ``torch.Tensor`` of int64 ids, a ``Path``)
and raises ``TypeError`` for the wrong kind of thing (a float where an int belongs, a bool for
a count, a str of digits) and ``ValueError`` for the right kind with a wrong value. Nothing is
coerced silently: ``1.5``, ``True`` and ``"3"`` are not ints.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import math
import os
import re
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .errors import ZgError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def int_arg(value: Any, name: str, *, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]`` (bools and floats refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {_shown(value)}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def batch_size_arg(value: Any, num_nodes: int, name: str = "batch_size") -> int:
    """Seeds per mini-batch: an int in ``[1, num_nodes]`` (a batch holds each node at most once,
    and every per-batch buffer is sized by it, so a larger value only allocates padding)."""
    value = int_arg(value, name, low=1)
    if value > num_nodes:
        raise ValueError(
            f"{name}={value} is larger than the graph's {num_nodes} nodes; a batch "
            f"holds each node at most once, so use at most {num_nodes}"
        )
    return value


SEED_MIN, SEED_MAX = 0, INT64_MAX  # the one seed range: a non-negative int64


def seed_arg(value: Any, name: str = "seed") -> int:
    """A random seed given to a public entry point: an int in ``[0, 2**63 - 1]``.

    The one rule for every seed a user passes (the samplers, :class:`zg.Engine`,
    :meth:`zg.Envelope.profile`, the dataset generators, :func:`zg.grappa.partition`,
    :func:`zg.grappa.train` and its ``TrainConfig``, :func:`zg.parallel.train`, the
    experiments, the ``--seed`` flags): a non-negative int64, what ``torch.manual_seed``,
    numpy's generators and the Engine's device seed tensor all hold. Python and numpy ints are
    accepted; bools, floats and strings are refused (TypeError), an int outside the range is a
    ValueError ``"seed must be in [0, 9223372036854775807], got -1"``. Seeds the kit derives
    itself (:func:`zg.rng.batch_key`, :func:`zg.rng.worker_seed`) are not checked again."""
    return int_arg(value, name, low=SEED_MIN, high=SEED_MAX)


def key_arg(value: Any, name: str) -> int:
    """An epoch or batch number that keys a random stream (with a seed, in
    :func:`zg.rng.batch_key`): any int64, negative ones included (:meth:`zg.Envelope.profile`
    draws its batches at epoch -1, apart from every training epoch). Not a seed: see
    :func:`seed_arg`."""
    return int_arg(value, name, low=INT64_MIN, high=INT64_MAX)


SMALLEST_NORMAL = sys.float_info.min  # 2.2250738585072014e-308: below it floats are subnormal


def real_arg(
    value: Any,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    normal: bool = False,
) -> float:
    """``value`` as a finite float in the interval from ``low`` to ``high`` (each end closed
    unless ``*_open``). ``normal``: a nonzero value must also be a normal float, at least
    :data:`SMALLEST_NORMAL` in magnitude (a learning rate of 1e-320, subnormal, is no step at
    all: every update it scales underflows to zero)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {_shown(value)}")
    try:
        value = float(value)
    except OverflowError:  # an int beyond float's range
        raise ValueError(
            f"{name} must be finite, got an integer of {len(str(abs(int(value))))} "
            "digits, beyond a float's range"
        ) from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if normal and value != 0.0 and abs(value) < SMALLEST_NORMAL:
        raise ValueError(
            f"{name} must be a normal float (0 or at least {SMALLEST_NORMAL} in magnitude), "
            f"got {value}, a subnormal value that acts as zero"
        )
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return value


def choice_arg(value: Any, name: str, choices: Sequence[str]) -> str:
    """One of ``choices`` (a str); TypeError / ValueError naming the argument and the choices."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {list(choices)}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {list(choices)}")
    return value


def bool_arg(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {_shown(value)}")
    return bool(value)


def str_arg(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {_shown(value)}")
    return value


def positive_ints_arg(values: Any, name: str) -> list[int]:
    """A non-empty list (or tuple) of ints >= 1, e.g. fanouts or envelope sizes."""
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, (list, tuple)):
        raise TypeError(
            f"{name} must be a non-empty list of ints, got {type(values).__name__} {_shown(values)}"
        )
    if len(values) == 0:
        raise TypeError(
            f"{name} must be a non-empty list of ints, got an empty {type(values).__name__}"
        )
    return [int_arg(v, f"{name}[{i}]", low=1) for i, v in enumerate(values)]


def fanouts_arg(fanouts: Any, name: str = "fanouts") -> list[int]:
    """One fanout (int >= 1) per layer, input layer first. A fanout at or above the graph's
    largest in-degree means "every neighbour" (see :func:`zg.sampling.effective_fanouts`)."""
    if isinstance(fanouts, (int, str, bytes)) or not isinstance(fanouts, Sequence):
        raise TypeError(
            f"{name} must be a list of ints (input layer first), got {type(fanouts).__name__}"
        )
    if len(fanouts) == 0:
        raise ValueError(f"{name} is empty: give one fanout per layer, e.g. [15, 10, 5]")
    out = []
    for i, k in enumerate(fanouts):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"{name}[{i}] must be an int, got {type(k).__name__} {_shown(k)}")
        if k <= 0:
            raise ValueError(
                f"{name}[{i}] must be >= 1, got {k} (zg has no fanout -1 for full "
                "neighbourhoods: any fanout >= the graph's largest in-degree takes "
                "every neighbour, at no extra cost)"
            )
        out.append(int(k))
    return out


def node_ids_arg(
    value: Any,
    name: str,
    num_nodes: int,
    *,
    device: torch.device | None = None,
    max_len: int | None = None,
    unique: bool = True,
) -> torch.Tensor:
    """A non-empty 1-d set of node ids in ``[0, num_nodes)`` as int64 on ``device``.

    Accepts a tensor, a numpy array or a list of ints. Ids that already live on an accelerator
    are checked for dtype, shape and device only: reading their values would be a host sync.
    ``unique``: each id may appear once (a mini-batch's seeds, the nodes to profile on).
    """
    if not isinstance(value, torch.Tensor):
        if value is None or isinstance(
            value, (bool, int, float, complex, str, bytes, dict, set, frozenset, np.generic)
        ):
            raise TypeError(
                f"{name} must be a 1-d integer tensor, array or list of node ids, "
                f"got {type(value).__name__} {_shown(value)}"
            )
        try:
            array = np.asarray(value)
        except Exception as exc:  # ragged lists and other oddities
            raise TypeError(
                f"{name} could not be read as a list of node ids ({type(exc).__name__}: {exc})"
            ) from None
        if array.size and array.dtype.kind not in "biufc":
            raise TypeError(f"{name} must hold integer node ids, got {array.dtype} values")
        if array.size and array.dtype.kind == "u" and int(array.max()) > INT64_MAX:
            raise ValueError(
                f"{name} holds node id {int(array.max())}, out of range for a graph "
                f"with {num_nodes} nodes"
            )
        if array.dtype.kind in "iu":
            array = array.astype(np.int64)
        value = (
            torch.from_numpy(np.array(array, copy=True))
            if array.size
            else torch.zeros(array.shape, dtype=torch.int64)
        )
    ids = value
    if ids.numel() == 0:
        raise ValueError(f"{name} is empty: give at least one node id")
    if ids.dtype == torch.bool:
        raise TypeError(
            f"{name} must hold integer node ids, got a boolean tensor (a mask? "
            f"use torch.nonzero(mask).flatten())"
        )
    if ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{name} must hold integer node ids, got dtype {ids.dtype}")
    if ids.dim() != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {tuple(ids.shape)}")
    if max_len is not None and ids.numel() > max_len:
        raise ValueError(f"{name} has {ids.numel()} nodes but batch_size is {max_len}")
    if ids.device.type == "cpu":
        # Host data: checking it costs no device round trip. numpy keeps it out of the audit.
        values = ids.numpy()
        lo, hi = int(values.min()), int(values.max())
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{name} holds node id {bad}, out of range for a graph with {num_nodes} nodes"
            )
        if unique and len(np.unique(values)) != len(values):
            raise ValueError(f"{name} holds repeated node ids; each node may appear once")
    elif device is not None and ids.device != device:
        raise ValueError(
            f"{name} is on {ids.device} but the graph is on {device}; "
            f"move one of them ({name}.to({str(device)!r}))"
        )
    return ids.to(
        device=ids.device if device is None else device, dtype=torch.int64, non_blocking=True
    )


def device_arg(value: Any, name: str = "device") -> torch.device:
    """A torch device: a ``torch.device``, a str such as "cpu" / "cuda:0", or a CUDA index."""
    if isinstance(value, torch.device):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int, np.integer)):
        raise TypeError(
            f"{name} must be a torch.device, a str such as 'cpu' or 'cuda:0', or a "
            f"device index, got {type(value).__name__} {_shown(value)}"
        )
    if not isinstance(value, str) and value < 0:
        raise ValueError(f"{name} index must be >= 0, got {value}")
    try:  # an index is a CUDA index (recent torch reads a bare int as "the accelerator")
        return torch.device(value) if isinstance(value, str) else torch.device("cuda", int(value))
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"{name} {value!r} is not a torch device ({exc})") from None


def compute_device_arg(value: Any, name: str = "device") -> torch.device:
    """A device the kit can train on: the CPU, or a CUDA device that exists here (``cuda`` alone
    means ``cuda:0``)."""
    try:
        dev = torch.device(value)
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name} {value!r} is not a valid torch device: {exc}") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} must be 'cpu' or 'cuda[:i]', got {value!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{name} {value!r} asked for, but CUDA is not available here")
        index = 0 if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise ValueError(
                f"{name} {value!r}: there are only {torch.cuda.device_count()} CUDA device(s) here"
            )
        dev = torch.device("cuda", index)
    return dev


def path_arg(value: Any, name: str = "path") -> Path:
    """A file-system path given as a str or ``os.PathLike`` (not bytes, not empty)."""
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str):
            if not text:
                raise ValueError(f"{name} is an empty string; give a file path")
            if "\0" in text:
                raise ValueError(f"{name} {text!r} holds a NUL character, which no path can hold")
            return Path(text)
    raise TypeError(
        f"{name} must be a path (str or os.PathLike), got {type(value).__name__} {_shown(value)}"
    )


# ----------------------------------------------------------------------------- paths: one rule
#
# The kit's one rule for a path it reads or writes: every symbolic link is followed, to the end
# of its chain. A file written at a link replaces the link's final target (atomically, in the
# target's folder): the link stays and names the fresh file. A link whose chain ends nowhere
# (dangling) or never ends (a loop) is refused. Whether an output is one of a run's inputs is
# decided on the same final targets (and on the files' identity, device and inode).


def _kind(mode: int) -> str:
    """What a file-system entry is, in words, from its ``st_mode``."""
    for test, words in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return words
    return "a special file"


def _os_problem(exc: OSError) -> str:
    """An OSError met while walking a path, as the reason a user can act on."""
    if exc.errno == errno.ELOOP:
        return (
            "its symbolic links form a loop (or a chain longer than the system follows); "
            "point the link at a real file or folder"
        )
    if exc.errno == errno.ENAMETOOLONG:
        longest = max((len(os.fsencode(p)) for p in Path(exc.filename or "").parts), default=0)
        return (
            f"the path is too long for the file system (its longest name is {longest} bytes; "
            "most file systems allow 255 per name and 4096 in all)"
        )
    if exc.errno == errno.ENOTDIR:
        return "a part of it is a file, not a folder"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied on the way to it"
    return exc.strerror or str(exc)


def path_problem(name: str, path: Any, exc: OSError) -> ValueError:
    """A ValueError naming the argument, the path the user gave and why it cannot be used."""
    shown = os.fspath(path)
    shown = repr(shown) if len(shown) <= 200 else f"{shown[:60]!r}...{shown[-40:]!r}"
    return ValueError(f"{name} {shown}: {_os_problem(exc)}")


def resolved_path(value: Any, name: str = "path") -> Path:
    """The final target of ``value``: an absolute path with every symbolic link followed (the
    kit's one rule for paths, see above). A path that does not exist yet resolves as far as it
    exists. Raises ValueError naming ``name``: a dangling link, a loop of links, a name too long
    for the file system, a folder the process may not enter."""
    path = path_arg(value, name)
    try:
        return Path(os.path.realpath(path, strict=True))
    except (FileNotFoundError, NotADirectoryError):
        pass  # absent, or a part of it is a file: the caller says which
    except OSError as exc:  # a loop, a name too long, no permission
        raise path_problem(name, path, exc) from None
    if os.path.islink(path):
        raise ValueError(
            f"{name} {str(path)!r} is a symbolic link to {os.readlink(path)!r}, which does not "
            "exist (a dangling link); create the target first or give another path"
        )
    return Path(os.path.realpath(path))


def path_kind(value: Any, name: str = "path") -> tuple[Path, int | None]:
    """``(final target, st_mode)`` of ``value`` (every link followed), ``st_mode`` None when
    nothing is there; every problem on the way a ValueError naming ``name``."""
    target = resolved_path(value, name)
    try:
        return target, os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return target, None
    except OSError as exc:
        raise path_problem(name, value, exc) from None


def _named(name: str, path: Path, target: Path) -> str:
    """``name 'path'``, and where a link leads when the path is one."""
    shown = f"{name} {str(path)!r}"
    if os.path.islink(path):
        shown += f" (a symbolic link to {str(target)!r})"
    return shown


def _nearest_existing(path: Path) -> Path:
    """``path`` itself or its closest ancestor that exists."""
    path = Path(os.path.abspath(path))
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _try_writing_in(folder: Path, name: str, path: Path) -> None:
    """Create (and remove) a file in ``folder``: the one honest test that it can be written
    (``os.access`` answers yes to root for a read-only mount or a kernel file system)."""
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".zg-write-check-"):
            pass
    except OSError as exc:
        raise ValueError(
            f"{name} {str(path)!r}: the folder {str(folder)!r} is not writable "
            f"(creating a file there failed: {exc.strerror or exc})"
        ) from None


class ReadOnlyTarget(ZgError, PermissionError, ValueError):
    """An existing file this user may not write: a plain ``open(path, "w")`` would be refused,
    so no writer of the kit replaces it (a rename would, whatever its mode). A PermissionError
    (errno EACCES, or the system's own) and a ValueError, so a command's up-front check of its
    output path says it in one line like any other refused path."""

    def __str__(self) -> str:
        # Built as PermissionError(errno, message, path): the message alone; built from a
        # message (a worker's error replayed in its parent): that message.
        return str(self.strerror) if self.strerror is not None else super().__str__()


def refuse_read_only(target: Path, name: str, path: Any) -> None:
    """Raise :class:`ReadOnlyTarget` naming ``name`` and ``path`` if the existing regular file
    ``target`` may not be opened for writing by this process, as ``open(path, "w")`` decides:
    ``access(2)`` with the effective user and groups (mode bits, ACLs, an immutable file, a
    read-only mount; root passes where ``open`` would let it)."""
    effective = os.access in os.supports_effective_ids
    try:
        if os.access(target, os.W_OK, effective_ids=effective):
            return
    except OSError:
        return  # nothing to say up front; the write itself will tell
    try:
        info = os.stat(target)
        what = f"mode {stat.S_IMODE(info.st_mode):#o}, owner uid {info.st_uid}"
    except OSError:
        what = "its mode"
    raise ReadOnlyTarget(
        errno.EACCES,
        f"{name} {str(path)!r}: is not writable by this user ({what}); a plain write would be "
        "refused, so it is not replaced: make it writable (chmod u+w) or give another path",
        str(path),
    )


def output_target(value: Any, name: str = "path", *, make_parents: bool = False) -> Path:
    """The file a write at ``value`` replaces or creates, after every check that can be made
    before writing; raises TypeError / ValueError naming ``name`` and the path.

    The path is followed to its final target (the kit's one rule, see :func:`resolved_path`),
    which must be a regular file or absent: a directory, a named pipe, a socket or a device is
    refused (an atomic write would replace it: as root, ``/dev/null`` itself), as are a dangling
    link and a loop. An existing file must be writable by this user, as ``open(path, "w")``
    would decide (:func:`refuse_read_only`). Its folder must exist (or, with ``make_parents``,
    be creatable) and a file must really be creatable in it (tried: a temporary file is created
    and removed)."""
    path = path_arg(value, name)
    target, mode = path_kind(path, name)
    if mode is not None:
        if stat.S_ISDIR(mode):
            raise ValueError(
                f"{_named(name, path, target)} is a directory; give a file path inside it"
            )
        if not stat.S_ISREG(mode):
            kind = _kind(mode)
            raise ValueError(
                f"{_named(name, path, target)} is {kind}, not a regular file; zg writes only "
                f"regular files (writing here would replace {kind}): give a file path"
            )
        refuse_read_only(target, name, path)
    folder = target.parent
    if not os.path.isdir(folder):
        existing = _nearest_existing(folder)
        if not existing.is_dir():
            raise ValueError(f"{name} {str(path)!r}: {str(existing)!r} is a file, not a folder")
        if not make_parents:
            raise ValueError(f"{name} {str(path)!r}: the folder {str(folder)!r} does not exist")
        folder = existing
    _try_writing_in(folder, name, path)
    return target


def output_file_arg(value: Any, name: str = "path", *, make_parents: bool = False) -> Path:
    """A path a file can be written at (see :func:`output_target` for the checks), returned as
    the user gave it. Raises before anything is written."""
    path = path_arg(value, name)
    output_target(path, name, make_parents=make_parents)
    return path


def output_folder_arg(value: Any, name: str) -> Path:
    """A folder files can be written into: an existing directory a file can be created in, or a
    path that can be created (a file can be created in its nearest existing ancestor). Tried,
    not asked of ``os.access``. Links are followed (a dangling link or a loop is refused)."""
    path = path_arg(value, name)
    target, mode = path_kind(path, name)
    if mode is not None and not stat.S_ISDIR(mode):
        kind = "a file" if stat.S_ISREG(mode) else _kind(mode)
        raise ValueError(f"{_named(name, path, target)} is {kind}, not a folder")
    existing = _nearest_existing(target)
    if not existing.is_dir():
        raise ValueError(f"{name} {str(path)!r}: {str(existing)!r} is a file, not a folder")
    _try_writing_in(existing, name, path)
    return path


def input_conflict(output: Any, inputs: Sequence[Any], name: str = "path") -> Any:
    """The first of ``inputs`` (files or folders a run reads) that writing ``output`` would
    overwrite, else None: ``output`` is that input or lies inside that input folder. Both sides
    are followed to their final targets (the one rule of :func:`resolved_path`), and the same file
    or folder under another name (device and inode: a hard link, a bind mount) counts as the
    same."""
    target = resolved_path(output, name)
    for given in inputs:
        if given is None:
            continue
        try:
            source = Path(os.path.realpath(os.fspath(given), strict=True))
        except (OSError, TypeError, ValueError):
            continue  # what does not exist (or is no path) cannot be overwritten
        if target == source or source in target.parents:
            return given
        for place in (target, *target.parents):  # the same file or folder by another name
            try:
                if os.path.samefile(place, source):
                    return given
            except OSError:
                pass
            if not os.path.isdir(source):
                break  # a file input: only the target itself can be it
    return None


def output_clash(outputs: Sequence[tuple[str, Any]]) -> tuple[str, str, Path] | None:
    """The first two of ``outputs`` (``(name, path)`` pairs a run writes) that name the same
    file, as ``(first name, second name, final target)``, else None. Decided as
    :func:`input_conflict` decides: each path followed to its final target (a symbolic link
    counts as the file it names), and an existing file under two names (a hard link) counts
    once. Raises ValueError naming the argument for a dangling link or a loop."""
    seen: list[tuple[str, Path]] = []
    for name, path in outputs:
        if path is None:
            continue
        target = resolved_path(path, name)
        for earlier, place in seen:
            if target == place:
                return earlier, name, target
            try:
                if os.path.samefile(target, place):
                    return earlier, name, target
            except OSError:
                pass  # one of them does not exist yet: different files
        seen.append((name, target))
    return None


# ----------------------------------------------------------------------------- memory


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def machine_memory(device: Any = None) -> tuple[int, int]:
    """(available, total) bytes of ``device``'s memory: a CUDA device's free and total memory,
    else the host's (Linux: ``MemAvailable`` of /proc/meminfo; elsewhere the physical total)."""
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda":
        free, total = torch.cuda.mem_get_info(dev)
        return int(free), int(total)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    available = total
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    # A process limit is this process's machine: what is left of its address space
    # (RLIMIT_AS, ulimit -v) and of its cgroup's memory (a container's limit).
    for limit, used in (_address_space(), _cgroup_memory()):
        if limit is not None:
            total = min(total, limit)
            available = min(available, max(0, limit - used))
    return int(available), int(total)


def _address_space() -> tuple[int | None, int]:
    """(RLIMIT_AS soft limit or None, this process's virtual size) in bytes."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None, 0
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(soft), int(line.split()[1]) * 1024
        return int(soft), 0
    except (ImportError, OSError, ValueError, IndexError):
        return None, 0


def _cgroup_memory() -> tuple[int | None, int]:
    """(cgroup v2 memory.max or None, memory.current) in bytes."""
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            text = f.read().strip()
        if text == "max":
            return None, 0
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            return int(text), int(f.read().strip())
    except (OSError, ValueError):
        return None, 0


# The readings of one build (see one_memory_reading): {device: (available, total)}, or None
# outside such a build (every memory_arg reads the machine).
_READINGS: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "zg_memory_readings", default=None
)


@contextlib.contextmanager
def one_memory_reading() -> Iterator[None]:
    """One build, one reading of the machine's memory: inside the block, every
    :func:`memory_arg` compares its estimate with the memory ``device`` had at the block's first
    check (:func:`machine_memory` runs once per device), not with a new read of /proc/meminfo
    (or ``cudaMemGetInfo``) per check. What builds several pieces in a row wraps them: an
    Engine's build (its envelope profile, the sampler's node arrays, the step) and a Grappa
    worker's regrouping. A check later in the block does not see what the block allocated
    after the reading (a new read would): like the estimates themselves, which count only the
    large arrays of their own piece, a pass is not a promise. Nested blocks share the outer
    reading."""
    if _READINGS.get() is not None:
        yield
        return
    token = _READINGS.set({})
    try:
        yield
    finally:
        _READINGS.reset(token)


def _memory_now(device: Any) -> tuple[int, int]:
    """:func:`machine_memory` of ``device``, read once per :func:`one_memory_reading` block."""
    readings = _READINGS.get()
    if readings is None:
        return machine_memory(device)
    key = str(torch.device(device) if device is not None else torch.device("cpu"))
    if key not in readings:
        readings[key] = machine_memory(device)
    return readings[key]


def memory_arg(nbytes: float, what: str, device: Any = None) -> None:
    """Refuse, before anything is allocated, what cannot fit: ``MemoryError`` naming ``what``
    (the arguments that size it), the estimate ``nbytes`` and the memory ``device`` has now
    (inside :func:`one_memory_reading`: at the build's first check).

    The estimates the kit passes count only the large arrays it is about to make, so they are
    lower bounds: a refusal is certain to be right, and a pass may still run out later."""
    available, total = _memory_now(device)
    if nbytes > available:
        where = "this GPU" if torch.device(device or "cpu").type == "cuda" else "this machine"
        raise MemoryError(
            f"{what} needs at least {_gib(nbytes)}, and {where} has {_gib(available)} available "
            f"({_gib(total)} in all); choose smaller sizes"
        )


OUT_OF_MEMORY_WORDS = ("can't allocate memory", "out of memory", "cannot allocate memory")


@contextlib.contextmanager
def out_of_memory_names(what: str) -> Iterator[None]:
    """The net under :func:`memory_arg`'s estimates (which are lower bounds): an allocation in
    the block that fails anyway (the allocator's RuntimeError, numpy's or Python's
    MemoryError) is raised as a one-line ``MemoryError`` naming ``what``, not the allocator's
    traceback from deep inside torch."""
    try:
        yield
    except (RuntimeError, MemoryError) as exc:
        text = str(exc)
        if isinstance(exc, RuntimeError) and not any(
            w in text.lower() for w in OUT_OF_MEMORY_WORDS
        ):
            raise
        if isinstance(exc, MemoryError) and " needs at least " in text:
            raise  # memory_arg's own refusal names its sizes already
        asked = re.search(r"allocate (\d+) bytes", text)
        detail = (
            f"an allocation of {_gib(int(asked.group(1)))} failed" if asked else "out of memory"
        )
        raise MemoryError(
            f"{what} could not be allocated on this machine ({detail}); choose smaller sizes"
        ) from None


# ----------------------------------------------------------------------------- what a plug-in returns


def described(value: Any) -> str:
    """What a plug-in returned, in a few words (a tensor by dtype, shape and device)."""
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    return f"{type(value).__name__} {_shown(value)}"


class AtLeast(int):
    """A size in :func:`returned_tensor`'s ``shape`` that may be larger: ``AtLeast(4)`` matches
    4, 5, ... (a model's logits have at least the labels' classes)."""

    def __repr__(self) -> str:
        return f"AtLeast({int(self)})"


KINDS = ("float", "integer", "bool")


def _size_text(name: str, size: Any) -> str:
    if isinstance(size, AtLeast):
        return f"{name or 'n'} >= {int(size)}"
    if isinstance(size, int):
        return f"{name}={size}" if name else str(size)
    return str(name or size or "n")


def _size_ok(got: int, size: Any) -> bool:
    if isinstance(size, AtLeast):
        return got >= int(size)
    return not isinstance(size, int) or got == size


def _same_device(value: torch.device, want: torch.device) -> bool:
    """The same device, ``cuda`` matching ``cuda:0`` (an index only compared when both have one)."""
    return value.type == want.type and (
        value.index is None or want.index is None or value.index == want.index
    )


def _kind_ok(value: torch.Tensor, kind: str) -> bool:
    if kind == "float":
        return value.is_floating_point()
    if kind == "bool":
        return value.dtype == torch.bool
    return _is_integer_tensor(value)


def returned_tensor(
    value: Any,
    who: str,
    *,
    shape: Sequence[int | str | None],
    kind: str = "float",
    device: Any = None,
    requires_grad: bool | None = None,
    values: bool = False,
    nonnegative: bool = False,
    named: Sequence[str] = (),
) -> torch.Tensor:
    """The one check of what a plug-in hands back (an estimator's ``scales()``, ``factors()``,
    ``worker_scale()`` and ``local_weights()``, a sampler's MiniBatch fields, a model's logits,
    a ``StepHooks`` callback's result), made where it comes back, with one wording for every
    plug-in: ``"<who> returned <what it returned>; expected <what it must return>"``.

    The contract, checked in this order (each from host metadata, no device read, except the
    values):

    * the kind: a ``torch.Tensor`` (TypeError otherwise);
    * the shape: ``len(shape)`` dimensions, each size equal to the entry of ``shape`` that is an
      int, at least the entry that is an :class:`AtLeast`; a str or None matches any size and
      names it in the message (``named`` names each size: ``("P",)`` says "length P=4");
    * the dtype: ``kind`` "float" (any floating dtype), "integer" or "bool";
    * the device: on ``device`` when given (``cuda`` matches ``cuda:0``);
    * autograd: ``requires_grad=True``, the value must require grad (a loss computed from the
      logits); False, it must not (a weight that backward would otherwise differentiate);
      None, either;
    * the values, only when ``values`` (a host read, so never inside a training step): finite,
      and ``>= 0`` when ``nonnegative``; a ValueError holding the first bad value and its flat
      index. Inside a step, the step folds :func:`worst_value` into a number it reads anyway,
      and :func:`returned_values` checks it there.

    A TypeError (kind, shape, dtype, device, autograd) or ValueError (values) names ``who``
    once (``"MyEstimator.scales()"``); the value itself is returned."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")  # the kit's own misuse
    want_device = None if device is None else torch.device(device)
    ok = (
        isinstance(value, torch.Tensor)
        and value.dim() == len(shape)
        and all(_size_ok(value.shape[i], s) for i, s in enumerate(shape))
        and _kind_ok(value, kind)
        and (want_device is None or _same_device(value.device, want_device))
    )

    def wants() -> str:  # written only for an error: the check runs in every training step
        sizes = [_size_text(n, s) for n, s in zip(list(named) + [""] * len(shape), shape)]
        text = f"a {len(shape)}-D {kind} tensor"
        if len(shape) == 1:
            text += f" of length {sizes[0]}"
        elif shape:
            text += f" of shape [{', '.join(sizes)}]"
        if want_device is not None:
            text += f" on {want_device}"
        if requires_grad is not None:
            text += " that requires grad" if requires_grad else " that does not require grad"
        if values:
            text += " with finite values" + (" >= 0" if nonnegative else "")
        return text

    if not ok:
        raise TypeError(f"{who} returned {described(value)}; expected {wants()}")
    if requires_grad is not None and value.requires_grad != requires_grad:
        grad = "requiring grad" if value.requires_grad else "not requiring grad (no grad_fn)"
        raise TypeError(f"{who} returned {described(value)} {grad}; expected {wants()}")
    if values and value.numel():
        v = value.detach()
        bad = ~torch.isfinite(v)
        if nonnegative:
            bad |= v < 0
        if bool(bad.any()):
            at = int(bad.flatten().nonzero()[0])
            held = float(v.flatten()[at])
            raise ValueError(
                f"{who} returned {described(value)} holding {held} at flat index {at}; "
                f"expected {wants()}"
            )
    return value


def returned_logits(logits: Any, who: str, rows: int | None, classes: int, device: Any = None):
    """A model's logits as they come back from a forward, on every path that calls a model (the
    Engine's step, :mod:`zg.inference`'s evaluation, :func:`zg.grappa.full_forward`):
    :func:`returned_tensor` with shape ``[rows, C >= classes]`` (``rows`` None: any),
    floating, on ``device`` when given. Host metadata only, no device read: the step checks
    every batch's logits, an evaluation each call's. Their values are not checked here:
    training reads its loss's, an evaluation its logits' (a FloatingPointError)."""
    return returned_tensor(
        logits, who, shape=[rows, AtLeast(classes)], device=device, named=("rows", "classes")
    )


def worst_value(value: torch.Tensor) -> torch.Tensor:
    """float64 []: the one value of ``value`` that :func:`returned_values` needs, on its device
    (no host read, so a training step can compute it every iteration and carry it with numbers
    it reads anyway): NaN if any value is NaN, else the smallest if it is negative, else the
    largest (so it is finite and ``>= 0`` exactly when every value is). 0 for an empty tensor.
    Folding: the worst of several worst values is ``worst_value(torch.stack(them))``."""
    v = value.detach().to(torch.float64).reshape(-1)
    if v.numel() == 0:  # a size, host metadata
        return torch.zeros((), dtype=torch.float64, device=value.device)
    low, high = torch.aminmax(v)  # NaN propagates into both
    return torch.where(low < 0, low, high)


def returned_values(who: str, worst: float, where: str, wants: str) -> None:
    """The values part of :func:`returned_tensor`, for a result checked inside a training step
    from its :func:`worst_value`, read on the host where the step's numbers are read anyway (an
    epoch's exchange): a ValueError naming ``who``, ``where`` (which worker, which epoch) and
    the bad value when ``worst`` is not finite or is negative."""
    if not math.isfinite(worst) or worst < 0:
        raise ValueError(
            f"{who} gave {where} the value {worst}; expected {wants}. Training stopped"
        )


def _is_integer_tensor(value: torch.Tensor) -> bool:
    return not value.is_floating_point() and not value.is_complex() and value.dtype != torch.bool
