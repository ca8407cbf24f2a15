"""Grappa checkpoints: what a run writes every few epochs and how a restarted run resumes.

Where it sits: beside the worker loop (:mod:`zg.grappa.worker`). Rank 0 writes the file
atomically; on a restart rank 0 reads and checks it and broadcasts it, and every rank loads its
part. A checkpoint that cannot be read, or was written by another run, stops every rank with
:class:`CheckpointError` before any training.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.distributed as dist

from .._checks import _kind
from .._io import atomic_write, fingerprint_mismatch, graph_fingerprint, open_regular_file
from ..errors import ZgError
from ..graph import Graph
from ._checks import CHECKPOINT_FILE
from .collectives import gather_row
from .config import TrainConfig

__all__ = [
    "CheckpointError",
    "checkpoint_locks",
    "checkpoint_file",
    "read_checkpoint",
    "write_checkpoint",
    "resume",
    "CHECKPOINT_FILE",
    "RESUMABLE_CHANGES",
]


# Config fields a resumed run may change: where output goes (every Output field but eval_every,
# which decides which records hold accuracies), how long to wait, how many threads, which
# kernels compute (the same values; zg.kernels). ``epochs`` may also grow: the run is extended
# from its checkpoint, a finished run included (read_checkpoint).
RESUMABLE_CHANGES = (
    "history_path",
    "model_path",
    "checkpoint_dir",
    "checkpoint_every",
    "progress",
    "timeout",
    "run_timeout",
    "threads",
    "kernel",
)

_CHECKPOINT_KEYS = (
    "config",
    "graph",
    "world",
    "next_epoch",
    "step",
    "records",
    "model",
    "optimizer",
    "seconds",
    "resumed_at",
)


# 2: the graph is recorded by content (graph_fingerprint), not by its sizes alone.
CHECKPOINT_VERSION = 2


class CheckpointError(ZgError, RuntimeError):
    """A checkpoint the run cannot resume from: unreadable, or written by a different run."""


LOCK_FILE = ".zg-run.lock"  # in checkpoint_dir: held by the run that writes there


def _lock_refused(folder: str, path: str, what: str) -> ValueError:
    return ValueError(
        f"checkpoint_dir {folder!r}: its lock file {path!r} is {what}, not the run's lock file "
        f"(a regular file of its own); zg never writes through it. Remove it (zg creates "
        f"{LOCK_FILE} afresh), or give this run another checkpoint_dir"
    )


def _open_lock(folder: str) -> Any:
    """``folder``'s lock file, opened for reading and writing (created if absent): only a
    regular file of its own is opened. A symbolic link is never followed (``O_NOFOLLOW``), and
    a directory, a named pipe, a socket, a device or a file with other names (a hard link to
    another file) is refused with a ValueError naming ``checkpoint_dir`` and the lock file,
    before anything is written. The open cannot block (``O_NONBLOCK``: a named pipe)."""
    path = os.path.join(folder, LOCK_FILE)
    try:
        seen = os.lstat(path)
    except FileNotFoundError:
        seen = None
    except OSError as exc:
        raise ValueError(
            f"checkpoint_dir {folder!r}: cannot look at its lock file {path!r} "
            f"({exc.strerror or exc})"
        ) from None
    if seen is not None and stat.S_ISLNK(seen.st_mode):
        raise _lock_refused(folder, path, f"a symbolic link to {os.readlink(path)!r}")
    if seen is not None and not stat.S_ISREG(seen.st_mode):
        raise _lock_refused(folder, path, _kind(seen.st_mode))
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)  # less the umask, as any file zg creates
    except OSError as exc:  # replaced since the look above: a link (ELOOP), a directory, ...
        try:
            now = os.lstat(path).st_mode
            what = "a symbolic link" if stat.S_ISLNK(now) else _kind(now)
        except OSError:
            what = f"not openable ({exc.strerror or exc})"
        raise _lock_refused(folder, path, what) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _lock_refused(folder, path, _kind(info.st_mode))
        if info.st_nlink != 1:
            raise _lock_refused(folder, path, f"a file with {info.st_nlink} names (a hard link)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "r+", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def checkpoint_locks(folders: Iterable[str | None]) -> Iterator[None]:
    """Hold an exclusive lock on each checkpoint folder for the block (a run's lifetime): a
    second run naming a folder in use is refused with a :class:`CheckpointError` naming the
    holder's pid, so two runs never overwrite each other's checkpoint. The lock is the
    operating system's (``flock``): a run that dies releases it with its process.

    The lock file (``checkpoint_dir/.zg-run.lock``) is a regular file of its own, created if
    absent: a symbolic link there is never followed, and a link, a directory, a named pipe, a
    device or a hard link to another file is refused with a ValueError naming
    ``checkpoint_dir`` and the lock file, before anything is written (:func:`_open_lock`)."""
    with contextlib.ExitStack() as stack:
        for folder in sorted({os.path.realpath(f) for f in folders if f is not None}):
            os.makedirs(folder, exist_ok=True)
            handle = stack.enter_context(_open_lock(folder))
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read(64).strip() or "unknown"
                raise CheckpointError(
                    f"checkpoint_dir {folder!r} is in use by another run (pid {holder}); "
                    "wait for it to end, or give this run its own checkpoint_dir"
                ) from None
            # Ours now (a regular file of this folder, locked): the holder's pid replaces what
            # an earlier run wrote.
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            stack.callback(fcntl.flock, handle, fcntl.LOCK_UN)
        yield


def checkpoint_file(cfg: TrainConfig) -> str | None:
    """Where a config's checkpoint lives (None without ``checkpoint_dir``)."""
    return None if cfg.checkpoint_dir is None else os.path.join(cfg.checkpoint_dir, CHECKPOINT_FILE)


def _graph_signature(g: Graph) -> dict[str, Any]:
    """The graph by content (:func:`zg._io.graph_fingerprint`): counts and digests."""
    return graph_fingerprint(g)


def _to_cpu(obj: Any) -> Any:
    if torch.is_tensor(obj):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def read_checkpoint(path: str, cfg: TrainConfig, g: Graph, world: int) -> dict[str, Any] | None:
    """The checkpoint at ``path`` checked against this run, or None if there is none.

    Raises :class:`CheckpointError` (naming the file and what is wrong) if it cannot be read or
    was written by a run with another config (any field but :data:`RESUMABLE_CHANGES`, and
    ``epochs`` where this run asks for more: it extends the checkpoint's run), another
    graph (compared by content: structure, features, labels and splits, each by its digest) or
    another number of workers, or if it is not a regular file (a directory, a named pipe, a
    device: refused before it is opened, naming ``checkpoint_dir``). Loaded with
    ``weights_only=True``: tensors and plain containers only, never arbitrary pickled objects.
    """
    if not os.path.exists(path):
        return None
    try:
        return _read_checked(path, cfg, g, world)
    except CheckpointError:  # a RuntimeError too: already the documented error
        raise
    except (TypeError, KeyError, AttributeError, IndexError, RuntimeError, OverflowError) as exc:
        # A crafted file may hold values of any type the unpickler allows where the checks
        # expect others: still the documented CheckpointError, never another class.
        raise CheckpointError(
            f"checkpoint {path} is malformed ({type(exc).__name__}: {str(exc)[:200]}); "
            "delete it to start afresh"
        ) from None


def _more_epochs(saved: dict[str, Any], mine: dict[str, Any]) -> bool:
    """This run asks for more epochs than the checkpoint's: it extends that run (a finished one
    included), resuming where it stopped. Fewer epochs is another run (its last epoch, always
    evaluated and checkpointed, would differ)."""
    theirs, ours = saved.get("epochs"), mine.get("epochs")
    return all(_is_count(e) for e in (theirs, ours)) and ours > theirs


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _opened(path: str) -> Any:
    """The checkpoint file opened for reading, only if it is a regular file (checked with
    ``os.stat`` before any open: a named pipe would block rank 0's ``torch.load``, a device
    never end); anything else is a :class:`CheckpointError` naming ``checkpoint_dir`` and the
    file."""
    folder = os.path.dirname(path) or "."
    try:
        return open_regular_file(path, "checkpoint", what="a checkpoint")
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint_dir {folder!r}: {exc}. Remove it to start afresh, or give this run "
            "another checkpoint_dir"
        ) from None


def _read_checked(path: str, cfg: TrainConfig, g: Graph, world: int) -> dict[str, Any]:
    """:func:`read_checkpoint` of a file that exists."""
    try:
        with _opened(path) as f:
            state = torch.load(f, map_location="cpu", weights_only=True)
    except CheckpointError:
        raise
    except Exception as exc:  # truncated zip, bad pickle, wrong magic, ...
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(exc).__name__}: "
            f"{str(exc)[:200]}); it is corrupt or truncated. Delete it to start "
            "afresh"
        ) from exc
    if (
        not isinstance(state, dict)
        or state.get("format") != "zg.grappa.checkpoint"
        or state.get("version") != CHECKPOINT_VERSION
    ):
        raise CheckpointError(
            f"{path} is not a zg.grappa checkpoint of format version {CHECKPOINT_VERSION} "
            "(an older one cannot be resumed: delete it to start afresh)"
        )
    missing = [k for k in _CHECKPOINT_KEYS if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing}; it is corrupt")
    saved = state["config"] if isinstance(state["config"], dict) else {}
    saved = TrainConfig.saved_form(saved)  # a checkpoint written before the config was split
    mine = cfg.to_dict()
    may_change = RESUMABLE_CHANGES + (("epochs",) if _more_epochs(saved, mine) else ())
    differ = sorted(
        k
        for k in set(saved) | set(mine)
        if k not in may_change and saved.get(k, "<absent>") != mine.get(k, "<absent>")
    )
    if differ:
        shown = "; ".join(
            f"{k}: {saved.get(k, '<absent>')!r} there, {mine.get(k, '<absent>')!r} here"
            for k in differ[:6]
        )
        raise CheckpointError(
            f"checkpoint {path} was written by a run with a different config "
            f"({shown}). Use another checkpoint_dir, or delete it to start afresh"
        )
    differ = fingerprint_mismatch(state["graph"], _graph_signature(g))
    if differ is not None:
        raise CheckpointError(
            f"checkpoint {path} was written for another graph ({differ}). Use "
            "another checkpoint_dir, or delete it to start afresh"
        )
    if not _is_count(state["world"]) or state["world"] != world:
        raise CheckpointError(
            f"checkpoint {path} was written by {state['world']!r:.40} workers; this run has {world}"
        )
    next_epoch, records = state["next_epoch"], state["records"]
    if (
        not _is_count(next_epoch)
        or not 1 <= next_epoch <= cfg.epochs
        or not isinstance(records, list)
        or [r.get("epoch") if isinstance(r, dict) else None for r in records]
        != list(range(next_epoch))
    ):
        raise CheckpointError(
            f"checkpoint {path} is inconsistent: resume at epoch {next_epoch!r} "
            f"with {len(records) if isinstance(records, list) else '?'} epoch records"
        )
    seconds, resumed_at = state["seconds"], state["resumed_at"]
    if (
        not _is_count(state["step"])
        or isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not 0 <= seconds < float("inf")
        or not isinstance(resumed_at, list)
        or not all(_is_count(e) and e <= next_epoch for e in resumed_at)
    ):
        raise CheckpointError(
            f"checkpoint {path} is inconsistent: step {state['step']!r:.40}, seconds "
            f"{seconds!r:.40}, resumed_at {resumed_at!r:.60} (a count, a finite time, the "
            "epochs it resumed at)"
        )
    copies = cfg.trainer_object.replicas(world)
    if not (
        isinstance(state["model"], list)
        and isinstance(state["optimizer"], list)
        and len(state["model"]) == len(state["optimizer"]) == copies
    ):
        raise CheckpointError(
            f"checkpoint {path} should hold {copies} model and optimizer state(s)"
        )
    return state


def _save_checkpoint(path: str, state: dict[str, Any]) -> None:
    """torch.save atomically (:func:`zg._io.atomic_write`: a temporary file in the same folder,
    flushed to disk, renamed; nothing left behind on failure). A checkpoint this user may not
    write is a PermissionError, a full disk an OSError naming the file and the room left; the
    old checkpoint is kept."""
    atomic_write(path, lambda f: torch.save(state, f), name="checkpoint_dir", make_parents=True)


def _replica_fingerprint(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> torch.Tensor:
    """float64 [n]: a sum per parameter and per optimizer-state tensor (equal replicas, equal sums)."""
    sums = [p.detach().double().sum().cpu() for p in model.parameters()]
    for per_param in optimizer.state.values():
        sums += [v.detach().double().sum().cpu() for v in per_param.values() if torch.is_tensor(v)]
    return torch.stack(sums)


def write_checkpoint(
    path: str,
    cfg: TrainConfig,
    g: Graph,
    rank: int,
    world: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    next_epoch: int,
    step: int,
    records: list[dict[str, Any]],
    seconds: float,
    resumed_at: list[int],
) -> None:
    """Every rank calls it (collectives inside); rank 0 writes the file."""
    mine = {"model": _to_cpu(model.state_dict()), "optimizer": _to_cpu(optimizer.state_dict())}
    if cfg.trainer_object.replicas(world) > 1:  # every worker its own parameters and Adam state
        states: list[Any] = [None] * world
        dist.all_gather_object(states, mine)
    else:
        # Under DDP every worker applies the same reduced gradient with the same Adam, so one
        # copy stands for all; checked here rather than assumed.
        prints = gather_row(_replica_fingerprint(model, optimizer).to(device), world)  # [P, n]
        if not all(torch.equal(prints[0], prints[p]) for p in range(1, world)):
            raise CheckpointError(
                f"the {world} workers' parameters or optimizer states differ "
                f"after epoch {next_epoch - 1}; refusing to write a checkpoint"
            )
        states = [mine]
    if rank == 0:
        _save_checkpoint(
            path,
            {
                "format": "zg.grappa.checkpoint",
                "version": CHECKPOINT_VERSION,
                "config": cfg.to_dict(),
                "graph": _graph_signature(g),
                "world": world,
                "next_epoch": next_epoch,
                "step": step,
                "records": records,
                "model": [s["model"] for s in states],
                "optimizer": [s["optimizer"] for s in states],
                "seconds": seconds,
                "resumed_at": list(resumed_at),
            },
        )


def resume(
    path: str,
    cfg: TrainConfig,
    g: Graph,
    rank: int,
    world: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
) -> dict[str, Any] | None:
    """Rank 0 reads and checks the checkpoint and broadcasts it; every rank loads its part.

    Returns the checkpoint (None: there is none, start afresh). All ranks raise the same
    :class:`CheckpointError` together if any of them cannot load it, so no rank trains on
    while another has stopped, and nothing trains half-loaded.
    """
    payload: list[Any] = [None]
    if rank == 0:
        try:
            payload[0] = read_checkpoint(path, cfg, g, world)
        except CheckpointError as exc:
            payload[0] = {"error": str(exc)}
    dist.broadcast_object_list(payload, src=0)
    state = payload[0]
    if state is None:
        return None
    error = state.get("error")
    if error is None:
        mine = rank if len(state["model"]) > 1 else 0
        try:
            model.load_state_dict(state["model"][mine])
            optimizer.load_state_dict(state["optimizer"][mine])
        except Exception as exc:
            error = (
                f"checkpoint {path} does not fit this run's model or optimizer on rank {rank} "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            )
    failed = torch.tensor([0 if error is None else rank + 1], dtype=torch.int64, device=device)
    dist.all_reduce(failed, op=dist.ReduceOp.MAX)
    if error is not None:
        raise CheckpointError(error)
    if int(failed.item()):
        raise CheckpointError(f"checkpoint {path}: rank {int(failed.item()) - 1} could not load it")
    return state
