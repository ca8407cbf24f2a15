"""Argument checks shared across the package: every error names the argument and the problem.

One module for all of them, so that "what is a valid seed, a valid list of node ids, a valid
output path" has one answer everywhere (samplers, envelopes, datasets, Grappa). Each check
returns the value in canonical form (an ``int``, a ``torch.Tensor`` of int64 ids, a ``Path``)
and raises ``TypeError`` for the wrong kind of thing (a float where an int belongs, a bool for
a count, a str of digits) and ``ValueError`` for the right kind with a wrong value. Nothing is
coerced silently: ``1.5``, ``True`` and ``"3"`` are not ints.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

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


def real_arg(
    value: Any,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a finite float in the interval from ``low`` to ``high`` (each end closed
    unless ``*_open``)."""
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


def _nearest_existing(path: Path) -> Path:
    """``path`` itself or its closest ancestor that exists."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
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


def output_file_arg(value: Any, name: str = "path", *, make_parents: bool = False) -> Path:
    """A path a file can be written at: not a directory; its folder exists (or, with
    ``make_parents``, can be created) and a file can be created in it (tried: a temporary file
    is created and removed). Raises before anything is written."""
    path = path_arg(value, name)
    if path.is_dir():
        raise ValueError(f"{name} {str(path)!r} is a directory; give a file path inside it")
    folder = Path(os.path.abspath(path)).parent
    if not folder.is_dir():
        existing = _nearest_existing(folder)
        if not existing.is_dir():
            raise ValueError(f"{name} {str(path)!r}: {str(existing)!r} is a file, not a folder")
        if not make_parents:
            raise ValueError(f"{name} {str(path)!r}: the folder {str(folder)!r} does not exist")
        folder = existing
    _try_writing_in(folder, name, path)
    return path


def output_folder_arg(value: Any, name: str) -> Path:
    """A folder files can be written into: an existing directory a file can be created in, or a
    path that can be created (a file can be created in its nearest existing ancestor). Tried,
    not asked of ``os.access``."""
    path = path_arg(value, name)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name} {str(path)!r} is a file, not a folder")
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise ValueError(f"{name} {str(path)!r}: {str(existing)!r} is a file, not a folder")
    _try_writing_in(existing, name, path)
    return path


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
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, int(total)
    except (OSError, ValueError, IndexError):
        pass
    return int(total), int(total)


def memory_arg(nbytes: float, what: str, device: Any = None) -> None:
    """Refuse, before anything is allocated, what cannot fit: ``MemoryError`` naming ``what``
    (the arguments that size it), the estimate ``nbytes`` and the memory ``device`` has now.

    The estimates the kit passes count only the large arrays it is about to make, so they are
    lower bounds: a refusal is certain to be right, and a pass may still run out later."""
    available, total = machine_memory(device)
    if nbytes > available:
        where = "this GPU" if torch.device(device or "cpu").type == "cuda" else "this machine"
        raise MemoryError(
            f"{what} needs at least {_gib(nbytes)}, and {where} has {_gib(available)} available "
            f"({_gib(total)} in all); choose smaller sizes"
        )
