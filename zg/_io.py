"""Writing a file all at once or not at all: the one atomic-write helper of the package.

Everything zg writes for a user (graph files, benchmark results, reports) goes through
:func:`atomic_write`: the content is written to a temporary file in the same folder, flushed to
disk and renamed over the target, so a crash or a full disk never leaves a half-written file at
the path, and the temporary file is removed on every failure. Errors name the path the user
gave, never the temporary file.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ._checks import output_file_arg

__all__ = ["atomic_write", "os_error_naming", "graph_fingerprint", "fingerprint_mismatch"]


# What a write that ran out of room says: no space, over quota, over a file-size limit.
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _short_write(exc: OSError) -> bool:
    """numpy's "3001 requested and 496 written": a write cut short, with no errno."""
    return exc.errno is None and "requested and" in str(exc) and "written" in str(exc)


def os_error_naming(exc: OSError, name: str, path: Path, doing: str) -> OSError:
    """The same kind of OSError (same errno, same subclass), its message naming ``path``, and,
    for a write that ran out of room, what to do and how much room is left."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in _NO_ROOM or _short_write(exc):
        if _short_write(exc):
            reason = f"the write stopped short ({exc})"
        try:
            free = shutil.disk_usage(Path(os.path.abspath(path)).parent).free
            reason += f"; {free / 2**20:.1f} MiB free there"
        except OSError:
            pass
        reason += "; the path is unchanged: free some space (or raise the limit) or write elsewhere"
    message = f"could not {doing} {name} {str(path)!r}: {reason}"
    return OSError(exc.errno, message) if exc.errno is not None else type(exc)(message)


def atomic_write(
    path: Any,
    write: Callable[[IO], Any],
    *,
    name: str = "path",
    text: bool = False,
    make_parents: bool = False,
    mode: int = 0o644,
) -> Path:
    """Write a file at ``path`` with ``write(f)`` and return the path.

    Args:
        path: str or os.PathLike, the file to (over)write.
        write: called once with an open file object (binary, or text UTF-8 if ``text``);
            whatever it writes becomes the file's content.
        name: the argument's name in error messages (``"path"``, ``"history_path"``, ...).
        make_parents: create missing folders on the way to ``path`` (else they must exist).
        mode: the finished file's permission bits (``mkstemp`` would leave them owner-only).
    Raises:
        TypeError / ValueError naming ``name`` and ``path`` before anything is written: not a
        path, a directory, a missing or read-only folder. ``OSError`` (the original errno and
        subclass, the message naming ``path``) when the write itself fails, e.g. a full disk.
        Any other exception of ``write`` passes through unchanged. In every failure the old file at
        ``path``, if any, is untouched and no temporary file is left.
    """
    path = output_file_arg(path, name, make_parents=make_parents)
    folder = Path(os.path.abspath(path)).parent
    if make_parents:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise os_error_naming(exc, name, path, "create the folder of") from exc
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise os_error_naming(exc, name, path, "write") from exc
    try:
        with os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8"} if text else {})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):  # a full disk, a vanished folder, ...
            raise os_error_naming(exc, name, path, "write") from exc
        raise
    return path


# ----------------------------------------------------------------------------- a graph's identity

# What a checkpoint records of its graph: counts a reader can check at a glance, and a digest of
# every array, so a run never resumes on another graph that merely has the same sizes.
FINGERPRINT_COUNTS = ("num_nodes", "num_edges", "feat_dim", "num_classes", "num_train")
FINGERPRINT_DIGESTS = {
    "structure": ("indptr", "indices"),
    "features": ("x",),
    "labels": ("y",),
    "splits": ("train_idx", "val_idx", "test_idx"),
}


def _digest(arrays) -> str:
    import hashlib

    import numpy as np
    import torch

    h = hashlib.blake2b(digest_size=16)
    for array in arrays:
        if array is None:
            h.update(b"none;")
            continue
        if torch.is_tensor(array):
            a = array.detach().cpu().contiguous()
            a = (a.view(torch.int16) if a.dtype == torch.bfloat16 else a).numpy()
        else:
            a = np.asarray(array)
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def graph_fingerprint(g) -> dict:
    """What identifies a :class:`zg.Graph` by content: its counts and a BLAKE2b digest each of its
    structure (indptr, indices), features, labels and splits (dtype, shape and bytes). Two graphs
    have equal fingerprints only if every array is equal (up to a 128-bit collision)."""
    train = g.train_idx
    counts = {
        "num_nodes": int(g.num_nodes),
        "num_edges": int(g.num_edges),
        "feat_dim": int(g.feat_dim),
        "num_classes": int(g.num_classes),
        "num_train": 0 if train is None else int(train.numel()),
    }
    return {
        **counts,
        **{
            name: _digest([getattr(g, key) for key in keys])
            for name, keys in FINGERPRINT_DIGESTS.items()
        },
    }


def fingerprint_mismatch(saved: Any, mine: dict) -> str | None:
    """None if ``saved`` (a checkpoint's record) names the graph ``mine`` describes, else a message
    naming each differing field ("features: 1f0c... there, 9ab2... here"). A record with counts
    only (written before digests were kept) is compared on the counts alone."""
    if not isinstance(saved, dict):
        return f"its graph record is {type(saved).__name__}, not a mapping"
    keys = [
        k
        for k in (*FINGERPRINT_COUNTS, *FINGERPRINT_DIGESTS)
        if k in saved or k in FINGERPRINT_COUNTS
    ]
    differ = [k for k in keys if saved.get(k, "<absent>") != mine.get(k)]
    if not differ:
        return None
    return "; ".join(f"{k}: {saved.get(k, '<absent>')} there, {mine.get(k)} here" for k in differ)
