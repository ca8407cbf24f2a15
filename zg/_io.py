"""Writing a file all at once or not at all: the one atomic-write helper of the package.

Everything zg writes for a user (graph files, benchmark results, reports, checkpoints) goes
through :func:`atomic_write`: the path is followed to its final target (a symbolic link is kept
and its target written), which must be a regular file or absent; the content is written to a
temporary file in the target's folder, flushed to disk and renamed over the target, so a crash
or a full disk never leaves a half-written file at the path, and the temporary file is removed
on every failure. A new file gets the umask's permissions, a replaced one keeps its own, and a
file this user may not write is refused, as a plain write would refuse it. Errors name the path
the user gave, never the temporary file; a full disk is one message naming the path and the
room left. :func:`write_text` writes a text file through it and :func:`command_output_arg`
checks a command's output path up front (exit status 2 naming the flag).
:func:`read_json_config` reads a config file with a size bound;
:func:`open_regular_file` and :func:`read_text_file` open or read any other input only if it is
a regular file (a named pipe would block, a device never end).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ._checks import ReadOnlyTarget, _kind, output_target, path_arg, path_kind, refuse_read_only
from ._checks import output_file_arg as output_target_arg

__all__ = [
    "atomic_write",
    "remove_stale_temps",
    "write_text",
    "command_output_arg",
    "read_json_config",
    "read_json_file",
    "open_regular_file",
    "read_text_file",
    "exchange_paths",
    "current_umask",
    "os_error_naming",
    "graph_fingerprint",
    "fingerprint_mismatch",
]


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


def _written_size(data: Any) -> int:
    return len(data) if isinstance(data, str) else memoryview(data).nbytes


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _yes(*args: Any, **kwargs: Any) -> bool:
    return True


class _GuardedFile:
    """The file :func:`atomic_write` hands to a writer: it keeps the first ``OSError`` of a
    write or a flush (a full disk, a file-size limit) and raises it; after that failure, and
    once the real file is closed, it is a sink: writes are counted, not made, ``tell`` and
    ``seek`` move in what was counted, anything else does nothing. So a writer's own cleanup
    cannot put a second error over the first or print one later: torch's end-of-file record
    (otherwise ``RuntimeError: [enforce fail at inline_container.cc] unexpected pos``), a
    ``zipfile.ZipFile`` left to ``__del__`` by ``np.savez`` (otherwise "Exception ignored in
    ZipFile.__del__" on stderr after the message). The content is thrown away in any case."""

    def __init__(self, f: IO) -> None:
        self._f = f
        self.failure: OSError | None = None
        self._sink: list[int] | None = None  # [position, end] once a sink

    def _to_sink(self) -> None:
        if self._sink is None:
            try:
                at = self._f.tell() if not self._f.closed else 0
            except (OSError, ValueError):
                at = 0
            self._sink = [at, at]

    def _failed(self, exc: OSError) -> None:
        if self.failure is None:
            self.failure = exc
        self._to_sink()

    def write(self, data: Any) -> int:
        n = _written_size(data)
        if self._sink is not None:
            self._sink[0] += n
            self._sink[1] = max(self._sink)
            return n
        try:
            return self._f.write(data)
        except OSError as exc:
            self._failed(exc)
            raise

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._sink is not None:
            return
        try:
            self._f.flush()
        except OSError as exc:
            self._failed(exc)
            raise

    def tell(self) -> int:
        return self._sink[0] if self._sink is not None else self._f.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        if self._sink is None:
            return self._f.seek(offset, whence)
        self._sink[0] = offset + (0, self._sink[0], self._sink[1])[whence]
        return self._sink[0]

    @property
    def closed(self) -> bool:
        return self._f.closed

    def discard(self) -> None:
        """A sink from now on (the real file is closed or about to be)."""
        self._to_sink()

    def __getattr__(self, attr: str) -> Any:  # seekable, fileno, mode, ...
        if self._sink is None or attr in ("mode", "name"):
            return getattr(self._f, attr)
        return _yes if attr in ("seekable", "writable") else _nothing


def current_umask() -> int:
    """The process's umask, read without changing it where the system allows (Linux's
    ``/proc/self/status``); elsewhere set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename) to disk, where the system allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# A temporary file or folder an interrupted write left beside its target (a process killed
# between mkstemp and the rename) is removed by the next write of the same target once it is
# this many seconds old: a live write keeps touching its file, a killed one never does.
STALE_TEMP_AGE = 60.0


def _newest_mtime(entry: os.DirEntry, info: os.stat_result) -> float:
    """When anything in a temporary file or folder (and its direct contents) last changed."""
    newest = info.st_mtime
    if stat.S_ISDIR(info.st_mode):
        try:
            with os.scandir(entry.path) as inside:
                for child in inside:
                    try:
                        newest = max(newest, child.stat(follow_symlinks=False).st_mtime)
                    except OSError:
                        pass
        except OSError:
            pass
    return newest


def remove_stale_temps(
    target: Any, prefix: str | None = None, *, age: float = STALE_TEMP_AGE
) -> list[Path]:
    """Remove what interrupted writes of ``target`` left beside it, and return what went.

    Only entries named as the kit's writers name their temporary file or folder
    (``.<name>.XXXXXXXX.tmp``: ``prefix`` then tempfile's 8 random characters, default prefix
    ``.<name>.``), in ``target``'s folder, owned by this user, that are a regular file or a
    folder (never a link), and unchanged for ``age`` seconds (a write in progress keeps
    changing its file, a killed one never does). A ``.old`` folder (a replaced graph folder
    kept after a crash) is never touched. Failures are ignored: cleaning up never stops a
    write."""
    import re
    import time

    target = Path(target)
    prefix = prefix if prefix is not None else f".{target.name}."
    pattern = re.compile(re.escape(prefix) + r"[a-z0-9_]{8}\.tmp")
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        if not pattern.fullmatch(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if info.st_uid != os.geteuid() or now - _newest_mtime(entry, info) < age:
                continue
            if stat.S_ISREG(info.st_mode):
                os.unlink(entry.path)
            elif stat.S_ISDIR(info.st_mode):
                shutil.rmtree(entry.path)
            else:
                continue
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def atomic_write(
    path: Any,
    write: Callable[[IO], Any],
    *,
    name: str = "path",
    text: bool = False,
    make_parents: bool = False,
    mode: int | None = None,
) -> Path:
    """Write a file at ``path`` with ``write(f)`` and return the path: the one writer of every
    file the kit writes for a user.

    What it promises (``docs/reliability.md``, "Writers and files"; ``tests/core/test_writer.py``):

    * Only a regular file is ever replaced. ``path`` is followed to its final target (every
      symbolic link, :func:`zg._checks.resolved_path`): a link is kept and its target is
      written; a dangling link, a loop of links, a directory, a named pipe, a socket or a device
      is refused (an atomic write would replace it: run as root, ``/dev/null`` itself).
    * All or nothing: the content goes to a temporary file in the target's folder, is flushed
      to disk and renamed over the target, so a crash or a full disk never leaves a half-written
      file, and the temporary file is removed on every failure. A temporary file a killed
      process left (``.<name>.XXXXXXXX.tmp``, unchanged for a minute) is removed by the next
      write of the same target (:func:`remove_stale_temps`).
    * Permissions as the user would expect of a plain write: a new file gets ``0o666`` less the
      umask, a replaced file keeps its mode (and, where the process may, its owner and group).
      What a plain ``open(path, "w")`` refuses is refused: an existing file this user may not
      write (``chmod 444``, checked before writing and again just before the rename) is a
      :class:`zg._checks.ReadOnlyTarget` (a PermissionError and a ValueError) naming the path,
      and a folder no file can be created in is a ValueError naming it.
    * One message for a full disk: the first ``OSError`` of a write (``ENOSPC``, ``EDQUOT``,
      ``EFBIG`` of a file-size limit) is what is raised, naming the path and the room left in
      its folder (:func:`os_error_naming`), whatever the writer's own cleanup said after it
      (torch's ``unexpected pos``); after that failure the file given to ``write`` ignores
      every call, so nothing is printed later (a ``ZipFile.__del__``).

    Args:
        path: str or os.PathLike, the file to (over)write.
        write: called once with an open file object (binary, or text UTF-8 if ``text``);
            whatever it writes becomes the file's content.
        name: the argument's name in error messages (``"path"``, ``"history_path"``, ...).
        make_parents: create missing folders on the way to ``path`` (else they must exist).
        mode: the finished file's permission bits, overriding the rule above (None: the rule).
    Raises:
        TypeError / ValueError naming ``name`` and ``path`` before anything is written: not a
        path, not a regular file, a missing or read-only folder, a dangling link, a loop, a
        name too long; ``ReadOnlyTarget`` (PermissionError and ValueError) for an existing
        file this user may not write. ``OSError`` (the original errno and subclass, the
        message naming ``path``) when the write itself fails, e.g. a full disk, even where
        the writer turned it into another exception. Any other exception of ``write`` passes
        through unchanged. In every failure the old file at ``path``, if any,
        is untouched and no temporary file is left.
    """
    path = path_arg(path, name)
    target = output_target(path, name, make_parents=make_parents)
    folder = target.parent
    if make_parents:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise os_error_naming(exc, name, path, "create the folder of") from exc
    try:
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise os_error_naming(exc, name, path, "write") from exc
    if mode is None:
        mode = stat.S_IMODE(old.st_mode) if old is not None else 0o666 & ~current_umask()
    remove_stale_temps(target, f".{target.name[:200]}.")  # left by a killed earlier write
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name[:200]}.", suffix=".tmp")
    except OSError as exc:
        raise os_error_naming(exc, name, path, "write") from exc
    guard: _GuardedFile | None = None
    try:
        with os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8"} if text else {})) as f:
            if old is not None and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                try:  # only root (or the owner, for the group) may give a file away
                    os.fchown(f.fileno(), old.st_uid, old.st_gid)
                except OSError:
                    pass
            os.fchmod(f.fileno(), mode)  # after fchown, which clears set-id bits
            guard = _GuardedFile(f)
            write(guard)
            if guard.failure is not None:  # a writer that went on after a failed write
                raise guard.failure
            f.flush()
            os.fsync(f.fileno())
        # Checked again just before the rename: something other than a regular file may have
        # appeared at the target since (a FIFO, a device node): it is never replaced; nor is
        # a file made read-only meanwhile (a plain write would be refused).
        _, now = path_kind(path, name)
        if now is not None and not stat.S_ISREG(now):
            raise ValueError(
                f"{name} {str(path)!r} became {_kind(now)} while it was written; not replaced"
            )
        if now is not None:
            refuse_read_only(target, name, path)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        first = guard.failure if guard is not None else None
        if first is not None and isinstance(exc, Exception):
            # The write that failed, not what the writer's cleanup said after it (torch's
            # "unexpected pos", a second error of a zip file's end record).
            raise os_error_naming(first, name, path, "write") from first
        if isinstance(exc, ReadOnlyTarget):
            raise  # already names the path
        if isinstance(exc, OSError):  # a full disk, a vanished folder, ...
            raise os_error_naming(exc, name, path, "write") from exc
        raise
    finally:
        if guard is not None:
            guard.discard()
    _fsync_folder(folder)
    return path


def write_text(path: Any, text: str, *, name: str = "path", make_parents: bool = False) -> Path:
    """Write ``text`` (UTF-8) at ``path`` through :func:`atomic_write`: every check and promise
    of it (a link kept, only a regular file replaced, all or nothing). The one way a tool of the
    repository (tools/, bench/) writes a report, a log or a table at a path a user gave."""
    return atomic_write(
        path, lambda f: f.write(text), name=name, text=True, make_parents=make_parents
    )


def command_output_arg(
    parser: Any, value: Any, flag: str, *, make_parents: bool = False
) -> Path | None:
    """A command's output path, checked up front (:func:`zg._checks.output_file_arg`: a
    directory, a named pipe, a device, a dangling link or a loop, a missing or read-only folder
    is refused) before the command does any work; a problem goes to ``parser.error`` (argparse:
    one line naming ``flag``, exit status 2). None stays None."""
    if value is None:
        return None
    try:
        return output_target_arg(value, flag, make_parents=make_parents)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))


# ----------------------------------------------------------------------------- swapping folders

_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def exchange_paths(a: Any, b: Any) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``): at
    every instant each name holds one of the two complete entries. Returns False, changing
    nothing, where the system or the file system cannot (another OS, an old kernel, a file
    system without it); any other failure is an OSError naming ``b``."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(b))


# ----------------------------------------------------------------------------- config files

CONFIG_LIMIT = 1 << 20  # bytes: a config is a small JSON object of settings


def read_json_config(path: Any, name: str = "--config", *, limit: int = CONFIG_LIMIT) -> Any:
    """The JSON value of the config file at ``path``, read with a size bound.

    Raises TypeError / ValueError naming ``name`` and the path: not a regular file (a folder, a
    named pipe or a device such as ``/dev/zero`` could block or never end), over ``limit``
    bytes (1 MiB), a dangling link or a loop, unreadable, not UTF-8, not JSON, or nested too
    deeply to read. Nothing else is checked here (the caller checks the value)."""
    path = path_arg(path, name)
    target, kind = path_kind(path, name)
    if kind is not None and not stat.S_ISREG(kind):
        raise ValueError(
            f"{name} {path}: is {_kind(kind)}, not a regular file; a config is a JSON file"
        )
    too_big = (
        f"{name} {path}: is over {limit:,} bytes, more than a config may be (a config is a "
        "small JSON object of settings; is it the right file?)"
    )
    try:
        with open(target, "rb") as f:
            if os.fstat(f.fileno()).st_size > limit:
                raise ValueError(too_big)
            data = f.read(limit + 1)
    except OSError as exc:
        raise ValueError(
            f"{name} {path}: cannot read a JSON config ({type(exc).__name__}: {exc})"
        ) from None
    if len(data) > limit:
        raise ValueError(too_big)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError(
            f"{name} {path}: nested too deeply to read (a config is a flat JSON object of settings)"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(
            f"{name} {path}: cannot read a JSON config ({type(exc).__name__}: {exc})"
        ) from None


def read_json_file(path: Any, name: str, *, limit: int, what: str = "a JSON file") -> Any:
    """The JSON value of the file at ``path``, read with a size bound: the reader of every JSON
    file the kit reads that is not a config (:func:`read_json_config`), e.g. a result file.

    Raises ValueError naming ``name`` (the file, as the user knows it) and the problem: not a
    regular file (a folder, a named pipe, a device), over ``limit`` bytes (checked on the
    file's size before anything is read: a 3 GiB sparse file is never read), unreadable, not
    UTF-8, not JSON, or nested too deeply to read (a RecursionError inside ``json``).
    ``FileNotFoundError`` when nothing is there."""
    path = path_arg(path, name)
    target, kind = path_kind(path, name)
    if kind is None:
        raise FileNotFoundError(f"{name}: no such file {str(path)!r}")
    if not stat.S_ISREG(kind):
        raise ValueError(f"{name}: is {_kind(kind)}, not a regular file; {what} is a JSON file")
    too_big = (
        f"{name}: is over {limit:,} bytes ({limit / 2**20:g} MiB), more than {what} may be; "
        "is it the right file?"
    )
    try:
        with open(target, "rb") as f:
            if os.fstat(f.fileno()).st_size > limit:
                raise ValueError(too_big)
            data = f.read(limit + 1)
    except OSError as exc:
        raise ValueError(f"{name}: cannot read it ({type(exc).__name__}: {exc})") from None
    if len(data) > limit:
        raise ValueError(too_big)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{name}: nested too deeply to read; it is not {what}") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(
            f"{name}: is not valid JSON, so not {what} ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None


def _not_regular(name: str, path: Path, kind: int, what: str) -> ValueError:
    why = "" if stat.S_ISDIR(kind) else " (reading it could block or never end)"
    return ValueError(
        f"{name} {str(path)!r}: is {_kind(kind)}, not a regular file; {what} is a regular file{why}"
    )


def open_regular_file(path: Any, name: str, *, what: str = "an input") -> IO[bytes]:
    """``path`` opened for reading (binary), only if it is a regular file: the check of
    :func:`read_json_config` for a file read by another reader (``torch.load``, a notebook).

    Links are followed (the kit's one rule). The kind is read with ``os.stat`` before any
    open, and checked again on the open file (opened non-blocking, so a named pipe swapped in
    meanwhile cannot block the open): a directory, a named pipe, a socket or a device is a
    ValueError naming ``name`` and the path, as are a dangling link and a loop of links.
    ``FileNotFoundError`` (naming them) when nothing is there; another ``OSError`` of the open
    (no permission) keeps its class and errno, its message naming the path."""
    path = path_arg(path, name)
    target, kind = path_kind(path, name)
    if kind is None:
        raise FileNotFoundError(f"{name}: no such file {str(path)!r}")
    if not stat.S_ISREG(kind):
        raise _not_regular(name, path, kind, what)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"{name}: no such file {str(path)!r}") from None
    except OSError as exc:
        raise os_error_naming(exc, name, path, "read") from None
    try:
        now = os.fstat(fd).st_mode
        if not stat.S_ISREG(now):
            raise _not_regular(name, path, now, what)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_text_file(path: Any, name: str, *, limit: int, what: str = "a text file") -> str:
    """The UTF-8 text of the regular file at ``path`` (:func:`open_regular_file`), read with a
    size bound: over ``limit`` bytes, or not UTF-8, is a ValueError naming ``name`` and the
    path; so is anything :func:`open_regular_file` refuses (``FileNotFoundError`` when nothing
    is there)."""
    too_big = f"{name} {str(path)!r}: is over {limit:,} bytes, more than {what} may be"
    with open_regular_file(path, name, what=what) as f:
        try:
            if os.fstat(f.fileno()).st_size > limit:
                raise ValueError(too_big)
            data = f.read(limit + 1)
        except OSError as exc:
            raise os_error_naming(exc, name, Path(os.fspath(path)), "read") from None
    if len(data) > limit:
        raise ValueError(too_big)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} {str(path)!r}: is not UTF-8 text ({exc})") from None


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
