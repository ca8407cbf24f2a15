"""Starting worker processes: ``torch.multiprocessing`` on one machine, ``torchrun`` on many.

Where it sits: under :func:`zg.grappa.train` and the tests. Both paths end in the same call,
``fn(rank, world_size, *args)`` inside an initialised default process group, so the worker code
cannot tell how it was started:

* :func:`spawn` (one machine): the parent opens a ``TCPStore`` on 127.0.0.1 with port 0, so
  the operating system picks a free port and no other run can take it between choosing and
  binding; the P children connect to it as clients. A run never hangs: every collective has
  ``timeout`` seconds (``init_process_group(timeout=...)``), the parent stops waiting after
  ``run_timeout`` seconds and terminates the children, and a child that raises takes the
  others down with it (``torch.multiprocessing`` does that), its traceback in the error.
  A worker's zg exception (any class defined in ``zg``, e.g. ``CheckpointError``), ``ValueError``,
  ``TypeError``, ``TimeoutError`` or ``FloatingPointError`` is raised again in the parent as
  itself, with its message (the worker's traceback chained as its cause), so ``except
  CheckpointError`` works around ``grappa.train``; see :func:`spawn`.
  An interrupt (``KeyboardInterrupt``: Ctrl-C, JupyterLab's "interrupt kernel") or ``SIGTERM``
  delivered to the parent alone stops every worker too (``SIGTERM``, then ``SIGKILL`` after
  :data:`STOP_SECONDS`), removes the run's temporary folders and re-raises (``SIGTERM`` as
  ``SystemExit(143)``), so nothing goes on training and nothing claims the run finished. A
  worker whose parent dies without a word (``SIGKILL``) is ended by the kernel
  (``PR_SET_PDEATHSIG``, Linux), from its first instruction on: each worker is started through
  a small launcher that asks for the signal before Python imports anything
  (:func:`_children_die_with_parent`), so a worker still importing torch or the caller's
  script dies at once too, and one that is training unwinds for at most
  :data:`PARENT_GONE_SECONDS`.
* :func:`init_from_env` (torchrun, ``env://``): reads RANK / WORLD_SIZE / MASTER_ADDR /
  MASTER_PORT that torchrun sets, and works after torchrun restarted the workers
  (``--max-restarts``), see the function.

Backend: gloo on CPU; nccl when CUDA is available with at least one GPU per worker on this
machine (each worker then uses GPU ``local_rank``).
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import datetime
import faulthandler
import importlib
import json
import multiprocessing
import multiprocessing.connection
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .._checks import int_arg, real_arg
from .._io import atomic_write
from ..errors import MainGuardError, WorkerFailed

__all__ = ["spawn", "init_from_env", "exit_worker", "pick_backend", "worker_device"]

# A worker that raised has this long to hand its traceback to the parent and exit.
ERROR_EXIT_SECONDS = 15
# The folder where a failing child leaves (module, class, message) of its exception for the
# parent; an environment variable too, for a child that fails before it knows its arguments.
ERRORS_ENV = "ZG_SPAWN_ERRORS"
# Exceptions that cross from a worker to the parent as themselves (besides zg's own classes).
# (OSError and its builtin subclasses cross too: a full disk is a worker's FileNotFoundError,
# PermissionError or OSError, said in one line.)
REPLAYED_BUILTINS = ("ValueError", "TypeError", "TimeoutError", "FloatingPointError", "MemoryError")
# Workers asked to stop (an interrupt or SIGTERM to the parent) get this long before SIGKILL.
STOP_SECONDS = 5.0
# A worker whose parent died (nobody is left to read its result) unwinds for at most this long
# and then ends, even if a peer or the group's teardown would hold it.
PARENT_GONE_SECONDS = 1.0
# This worker's parent (the process that spawned it), once _entry knows it.
_parent: int | None = None


def pick_backend(world_size: int, backend: str | None = None) -> str:
    """``backend`` if given, else nccl with one GPU per local worker, else gloo."""
    if backend is not None:
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
        if backend == "nccl" and not torch.cuda.is_available():
            raise ValueError("backend='nccl' needs CUDA, and torch.cuda.is_available() is False")
        return backend
    if torch.cuda.is_available() and torch.cuda.device_count() >= world_size:
        return "nccl"
    return "gloo"


def worker_device(backend: str, local_rank: int) -> torch.device:
    """The device a worker computes on: its GPU under nccl, the CPU under gloo."""
    if backend == "nccl":
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def _timeout(seconds: float) -> datetime.timedelta:
    seconds = real_arg(seconds, "timeout", low=0.0, low_open=True, high=1e7)
    return datetime.timedelta(seconds=seconds)


def exit_worker() -> None:
    """Leave the process group for good and end this worker process (exit code 0).

    Under gloo this does *not* call ``destroy_process_group()``: tearing a gloo group down
    occasionally never returns after ``all_to_all_single`` (seen on torch 2.2 and 2.13, about
    one run in three to six in this kit's tests; the teardown holds the GIL, so not even a
    watchdog thread can rescue it; see pytorch/pytorch#75097, "destroy_process_group() has a
    certain probability of hangs"). Instead every worker waits at a barrier, so nobody still
    needs anybody's data, and the process ends with ``os._exit(0)``; the operating system closes
    the sockets. Everything a worker produces is written before this point. Under nccl the
    group is destroyed normally.
    """
    if dist.get_backend() == "nccl":
        dist.destroy_process_group()
        return
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _record_error(folder: str | None, exc: BaseException, rank: int | None) -> None:
    """Leave ``exc``'s class and message in ``folder`` for the parent (never raises)."""
    if not folder:
        return
    record = {
        "module": type(exc).__module__,
        "name": type(exc).__qualname__,
        "message": str(exc),
        "rank": rank,
        "time": time.time(),
    }
    try:
        atomic_write(
            os.path.join(folder, f"error-{os.getpid()}.json"),
            lambda f: json.dump(record, f),
            text=True,
        )
    except Exception:  # reporting must never hide the error itself
        pass


def _replayed(record: dict) -> BaseException | None:
    """The exception a worker's record describes, if it is one the parent raises as itself:
    a class defined in zg, or one of the builtins of :data:`REPLAYED_BUILTINS`."""
    module, name = record.get("module"), record.get("name")
    if not isinstance(module, str) or not isinstance(name, str):
        return None
    if module == "builtins":
        cls = getattr(builtins, name, None)
        if not (name in REPLAYED_BUILTINS or (isinstance(cls, type) and issubclass(cls, OSError))):
            cls = None
    elif module == "zg" or module.startswith("zg."):
        try:
            cls = importlib.import_module(module)
            for part in name.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError):
            return None
    else:
        return None
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        return None
    try:
        exc = cls(record.get("message", ""))
    except Exception:  # a class that wants other arguments: keep torch's exception
        return None
    exc.worker_rank = record.get("rank")
    return exc


class _FirstFailure(NamedTuple):
    """What the parent saw when the first worker ended badly, before it stopped any other."""

    index: int  # the worker whose exit it saw first
    seen_at: float  # time.time() then
    signalled: frozenset[int]  # workers already ended by a signal then (none sent by the run)


def _cause(folder: str, processes: Sequence[Any], first: _FirstFailure) -> int:
    """The worker to name for a failed run. A worker ended by a signal before the parent
    stopped anyone was ended from outside (a kill, the out-of-memory killer) and records
    nothing: it is the cause (the first seen, if it is one). Otherwise the earliest error
    recorded in ``folder`` before that moment, by a worker that ended badly: under load the
    parent may see a peer's exit first. Records written later come from the stop itself."""
    if first.signalled:
        return first.index if first.index in first.signalled else min(first.signalled)
    records = []
    for entry in sorted(os.listdir(folder)):
        try:
            with open(os.path.join(folder, entry)) as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        rank, when = (
            (record.get("rank"), record.get("time")) if isinstance(record, dict) else (None, None)
        )
        if (
            isinstance(rank, int)
            and not isinstance(rank, bool)
            and 0 <= rank < len(processes)
            and isinstance(when, (int, float))
            and when <= first.seen_at
            and processes[rank].exitcode not in (0, None)
        ):
            records.append((when, rank))
    return min(records)[1] if records else first.index


def _worker_record(folder: str, rank: int) -> dict | None:
    """The earliest error worker ``rank`` recorded in ``folder`` (None if none): the worker
    that ended first is the cause; the others' errors follow from it (a peer that vanished, the
    stop that came after). A worker killed by a signal records nothing."""
    records = []
    for entry in sorted(os.listdir(folder)):
        try:
            with open(os.path.join(folder, entry)) as f:
                records.append(json.load(f))
        except (OSError, ValueError):
            continue
    records = [
        r
        for r in records
        if isinstance(r, dict)
        and isinstance(r.get("time"), (int, float))
        and r.get("rank") in (None, rank)  # None: failed before it knew its rank
    ]
    return min(records, key=lambda r: r["time"]) if records else None


def _worker_failed(failure: BaseException, record: dict | None, world_size: int) -> WorkerFailed:
    """A worker's end that no replayed exception says, as one line: what ended which worker
    and what to do (torch's exception, with the worker's traceback, stays the ``__cause__``)."""
    rank = failure.error_index
    code = getattr(failure, "exit_code", None)
    sig = getattr(failure, "signal_name", None)
    if sig is None and (
        code == 128 + signal.SIGTERM
        or (record or {}).get("name") in ("SystemExit", "KeyboardInterrupt")
    ):
        sig = "SIGTERM"
    who = f"worker {rank} of {world_size}"
    rest = "; the other workers were stopped"
    if sig == "SIGTERM":
        return WorkerFailed(
            f"{who} was stopped by SIGTERM before it finished (sent from outside the run: a "
            f"kill, a scheduler's time limit){rest}. Run again; with checkpoint_dir set, the "
            "run resumes from its last checkpoint",
            rank,
            code,
            sig,
        )
    if sig == "SIGKILL":
        return WorkerFailed(
            f"{who} was killed by SIGKILL before it finished, most often by the kernel's "
            f"out-of-memory killer (see dmesg){rest}. Use a smaller graph, model or batch, or "
            "fewer workers",
            rank,
            code,
            sig,
        )
    if sig is not None:
        return WorkerFailed(f"{who} was ended by {sig} before it finished{rest}", rank, code, sig)
    if isinstance(failure, mp.ProcessExitedException):
        return WorkerFailed(
            f"{who} exited with code {code} before it finished{rest}", rank, code, None
        )
    name = (record or {}).get("name", "an exception")
    message = str((record or {}).get("message", "")).strip().splitlines()
    first = f": {message[0]}" if message else ""
    return WorkerFailed(
        f"{who} failed with {name}{first}{rest} (its traceback: the exception's worker_traceback)",
        rank,
        None,
        None,
        str(getattr(failure, "msg", failure)),
    )


def _reimporting_main() -> bool:
    """True while Python's spawn (or forkserver) start method re-runs the parent's main script
    in a new child process, before that child starts its real work. multiprocessing marks that
    phase with ``current_process()._inheriting`` (its own "bootstrapping phase" check reads it)."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def _refuse_unguarded_main() -> None:
    script = getattr(sys.modules.get("__mp_main__"), "__file__", None) or "the main script"
    error = MainGuardError(
        f"worker processes were started while Python re-ran {script} in a new worker process: "
        "the 'spawn' start method imports the main script again in every worker, so a script "
        "that calls grappa.train (or anything that starts workers) at module level would start "
        'them again and again. Put that call under  if __name__ == "__main__":  (see '
        "https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods)"
    )
    _record_error(os.environ.get(ERRORS_ENV), error, None)
    raise error


def _parent_gone() -> bool:
    return _parent is not None and os.getppid() != _parent


def _end_soon(seconds: float) -> None:
    """End this process in ``seconds`` whatever it is doing: faulthandler's timer is a C thread
    that needs no GIL, so neither a blocked collective nor a teardown that holds the GIL can
    keep the process alive past it."""
    faulthandler.dump_traceback_later(seconds, exit=True, file=open(os.devnull, "w"))


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to send this process SIGTERM when its parent dies (Linux; elsewhere a
    no-op), and end now if the parent is already gone. The SIGTERM handler then gives the
    worker :data:`PARENT_GONE_SECONDS` to unwind (:func:`_exit_on_sigterm`)."""
    global _parent
    _parent = parent
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(143)


# What each worker's launcher runs before the worker's own Python starts (see
# _children_die_with_parent): the kernel is to SIGTERM it when the parent dies; a parent gone
# already ends it; then the spawn command line runs in this same process (exec keeps the
# setting). PR_SET_PDEATHSIG is option 1 of prctl(2).
_LAUNCHER = """import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
if os.getppid() != {parent}:
    os._exit(143)
os.execv({python!r}, [{python!r}] + sys.argv[1:])
"""


@contextlib.contextmanager
def _children_die_with_parent(folder: str):
    """While inside, processes started with the "spawn" start method begin as a launcher
    (a shell script in ``folder``, which must outlive the children's start) that sets
    ``PR_SET_PDEATHSIG`` before their Python imports anything: a parent killed while its
    workers still import torch or its script (seconds on a busy machine) takes them along
    at once, where a setting made in the worker's entry would come only after those imports.
    Linux only, and only where ``folder`` may hold executables; elsewhere nothing changes."""
    from multiprocessing import spawn as mp_spawn

    if not sys.platform.startswith("linux") or os.statvfs(folder).f_flag & os.ST_NOEXEC:
        yield
        return
    python = mp_spawn.get_executable()
    code = _LAUNCHER.format(parent=os.getpid(), python=os.fsdecode(python))
    script = os.path.join(folder, "start-worker")
    with open(script, "w", encoding="utf-8") as f:
        f.write(
            f'#!/bin/sh\nexec {shlex.quote(os.fsdecode(python))} -I -S -c {shlex.quote(code)} "$@"\n'
        )
    os.chmod(script, 0o700)
    mp_spawn.set_executable(script)
    try:
        yield
    finally:
        mp_spawn.set_executable(python)


def _exit_on_sigterm(signum, frame) -> None:
    """A worker's SIGTERM handler: unwind (``finally`` blocks run, temporary files go), exit 143.
    When the SIGTERM says that the parent died, the unwinding is bounded: the process ends
    within :data:`PARENT_GONE_SECONDS` (its peers, stopped the same way, no longer answer)."""
    if _parent_gone():
        _end_soon(PARENT_GONE_SECONDS)
    raise SystemExit(128 + signal.SIGTERM)


def _join_group(rank: int, world_size: int, port: int, backend: str, timeout: float) -> None:
    """Connect to the parent's store and join the process group; a timeout says which setting."""
    try:
        store = dist.TCPStore("127.0.0.1", port, None, False, timeout=_timeout(timeout))
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=_timeout(timeout)
        )
    except (RuntimeError, TimeoutError) as exc:  # torch's DistStoreError / DistNetworkError
        if (
            isinstance(exc, TimeoutError)
            or "timed out" in str(exc).lower()
            or "timeout" in str(exc).lower()
        ):
            raise TimeoutError(
                f"timeout={timeout} s: worker {rank} of {world_size} could not join the others "
                "within it (starting a worker process takes seconds); give a larger timeout"
            ) from exc
        raise


def _entry(
    rank: int,
    fn: Callable,
    world_size: int,
    port: int,
    backend: str,
    timeout: float,
    args: tuple[Any, ...],
    errors: str | None = None,
    parent: int | None = None,
) -> None:
    try:
        if parent is not None:
            _die_with_parent(parent)
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        # Ctrl-C in a terminal reaches the whole process group: the parent alone handles it
        # (it stops the workers), so the workers do not each print a KeyboardInterrupt.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _join_group(rank, world_size, port, backend, timeout)
        fn(rank, world_size, *args)
    except BaseException as exc:
        _record_error(errors, exc, rank)
        # torch.multiprocessing reports the traceback to the parent and exits with 1; should the
        # interpreter's teardown of the group hang (see exit_worker), end the process anyway.
        if not _parent_gone():  # else the shorter bound armed on SIGTERM stays
            _end_soon(ERROR_EXIT_SECONDS)
        raise
    exit_worker()


def _stop(processes: Sequence[Any], grace: float = STOP_SECONDS) -> None:
    """SIGTERM every live process, wait up to ``grace`` seconds, SIGKILL what is left."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join(5)


def _wait_for_workers(
    processes: Sequence[Any], deadline: float | None, run_timeout
) -> _FirstFailure | None:
    """Wait on the workers' sentinels until all have ended; on the first that ends badly, stop
    the rest with the kill deadline (:func:`_stop`: SIGTERM, then SIGKILL after
    :data:`STOP_SECONDS`), so a worker that ignores SIGTERM (stopped, or stuck in C code) is
    killed, never waited for. torch's own join waits for the others without a limit after a
    failure; this wait has none of that. Past ``deadline``: stop them all, TimeoutError.
    Returns what was seen when the first worker failed (:class:`_FirstFailure`), or None when
    all ended well."""
    live = {p.sentinel: i for i, p in enumerate(processes)}
    while live:
        ended = multiprocessing.connection.wait(list(live), timeout=0.5)
        for sentinel in ended:
            index = live.pop(sentinel)
            processes[index].join(0)
            if processes[index].exitcode != 0:
                seen_at = time.time()
                for p in processes:
                    p.join(0)
                signalled = frozenset(i for i, p in enumerate(processes) if (p.exitcode or 0) < 0)
                _stop(processes)  # every other worker ends within the kill deadline
                return _FirstFailure(index, seen_at, signalled)
        if deadline is not None and time.monotonic() > deadline:
            _stop(processes)
            raise TimeoutError(
                f"run_timeout={run_timeout} s: the {len(processes)} workers did not finish "
                "within it and were stopped; give a larger run_timeout (or none)"
            )


class _SigtermAsExit:
    """While active (main thread only), SIGTERM raises ``SystemExit(143)`` in the parent, so
    :func:`spawn` can stop its workers and every caller's ``finally`` runs; a handler the caller
    had installed is restored on exit and called once if a SIGTERM arrived."""

    def __enter__(self):
        self.active = threading.current_thread() is threading.main_thread()
        self.received = False
        if self.active:
            self.previous = signal.getsignal(signal.SIGTERM)
            if self.previous is signal.SIG_IGN:
                self.active = False
            else:
                signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame):
        self.received = True
        raise SystemExit(128 + signal.SIGTERM)

    def __exit__(self, *exc):
        if self.active:
            signal.signal(signal.SIGTERM, self.previous)
            if self.received and callable(self.previous):
                self.previous(signal.SIGTERM, None)
        return False


def spawn(
    fn: Callable,
    world_size: int,
    args: Sequence[Any] = (),
    *,
    timeout: float = 60.0,
    run_timeout: float | None = None,
    backend: str | None = None,
) -> None:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes (see module doc).

    ``fn`` must be importable by name (a module-level function). Results travel back through
    files the workers write. Raises ``TimeoutError`` after ``run_timeout`` seconds. If a worker
    raised, the parent raises the earliest worker error again as itself when it is a zg
    exception, ``ValueError``, ``TypeError``, ``TimeoutError``, ``FloatingPointError``,
    ``MemoryError`` or an ``OSError`` (same class, same message, an attribute ``worker_rank``;
    torch's exception with the worker's traceback as its ``__cause__``). Any other end of a
    worker (a signal from outside, the out-of-memory killer, another exception class) is a
    :class:`zg.errors.WorkerFailed` whose one-line message names the worker, what ended it and
    what to do.

    Called at module level of a script that the spawn start method re-runs in each worker (no
    ``if __name__ == "__main__":`` guard), it raises :class:`zg.errors.MainGuardError` naming
    that fix, in the workers and then in the parent, instead of "process 0 terminated with exit
    code 1".

    A ``KeyboardInterrupt`` or ``SIGTERM`` in the parent stops every worker within
    :data:`STOP_SECONDS` (then SIGKILL), removes the temporary folder and re-raises
    (``SIGTERM``: ``SystemExit(143)``; a SIGTERM handler of the caller's is called afterwards).
    """
    if _reimporting_main():
        _refuse_unguarded_main()
    world_size = int_arg(world_size, "world_size", low=1)
    _timeout(timeout)
    if run_timeout is not None:
        _timeout(run_timeout)
    backend = pick_backend(world_size, backend)
    # The parent holds the rendezvous store for the whole run: port 0 = the OS picks a free one.
    try:
        store = dist.TCPStore(
            "127.0.0.1", 0, None, True, timeout=_timeout(timeout), wait_for_workers=False
        )
    except RuntimeError as exc:
        raise TimeoutError(
            f"timeout={timeout} s: too short to open the workers' rendezvous store "
            f"on 127.0.0.1 ({exc}); give a few seconds at least"
        ) from exc
    errors = tempfile.mkdtemp(prefix="zg-spawn-errors-")
    context = None
    try:
        with _SigtermAsExit():
            # The children inherit the environment at start: one that fails while re-running the
            # main script (before it has its arguments) still finds the folder.
            previous = os.environ.get(ERRORS_ENV)
            os.environ[ERRORS_ENV] = errors
            try:
                with _children_die_with_parent(errors):
                    context = mp.start_processes(
                        _entry,
                        args=(
                            fn,
                            world_size,
                            store.port,
                            backend,
                            timeout,
                            tuple(args),
                            errors,
                            os.getpid(),
                        ),
                        nprocs=world_size,
                        join=False,
                        start_method="spawn",
                    )
            finally:
                if previous is None:
                    os.environ.pop(ERRORS_ENV, None)
                else:
                    os.environ[ERRORS_ENV] = previous
            deadline = None if run_timeout is None else time.monotonic() + run_timeout
            try:
                first = _wait_for_workers(context.processes, deadline, run_timeout)
                if first is not None:
                    # The worker whose exit the parent saw first may be a peer that failed
                    # because of another (a collective whose other end vanished): name the
                    # cause (_cause: a signal from outside, else the earliest recorded error).
                    failed = _cause(errors, context.processes, first)
                    # torch's join reports the first ended worker it looks at: show it only the
                    # one that failed first (the others were stopped because of it).
                    context.sentinels = {context.processes[failed].sentinel: failed}
                # Every worker has ended, so torch's join returns at once: it raises the first
                # failure with its traceback (ProcessRaisedException), if any.
                context.join(timeout=STOP_SECONDS)
            except (mp.ProcessRaisedException, mp.ProcessExitedException) as failure:
                record = _worker_record(errors, failure.error_index)
                replayed = _replayed(record) if record is not None else None
                if replayed is None:
                    replayed = _worker_failed(failure, record, world_size)
                raise replayed from failure
    except BaseException:
        # An interrupt, SIGTERM, a timeout or a worker's failure: no worker may go on.
        if context is not None:
            _stop(context.processes)
        raise
    finally:
        shutil.rmtree(errors, ignore_errors=True)
        if context is not None:
            # torch.multiprocessing's per-worker error pickles (pytorch-errorfile-*.pickle in the
            # temporary folder): a worker stopped mid-collective may write one that no join reads.
            for path in getattr(context, "error_files", ()):
                try:
                    os.remove(path)
                except OSError:
                    pass
        del store


def init_from_env(timeout: float = 300.0, backend: str | None = None) -> tuple[int, int, int, str]:
    """Join the group torchrun set up (``env://``). Returns (rank, world_size, local_rank, backend).

    ``timeout`` bounds every collective of the group. gloo enforces it on each call (a silent
    peer makes the others raise "Timed out waiting ... ms" after it; checked on torch 2.2 and
    2.13); under nccl torch's watchdog enforces it.
    """
    missing = [
        k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ
    ]
    if missing:
        raise RuntimeError(f"init_from_env needs torchrun's environment; {missing} not set")
    world_size = int(os.environ["WORLD_SIZE"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    backend = pick_backend(local_world, backend)
    restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if (
        os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        and restarts != "0"
        and local_world == world_size
    ):
        # A restarted worker group on one machine. Recent torchrun (2.5 and later) keeps one
        # store for all restarts, so the keys the dead group's gloo wrote are still there and a
        # new worker may read a dead peer's address and wait in vain (pytorch/pytorch#135712).
        # One agent numbers its restarts consistently, so a prefix per restart isolates them.
        # Across machines the agents' counts can differ; there, start torchrun with
        # TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (a fresh store per restart) instead.
        store, rank, world = next(dist.rendezvous("env://", timeout=_timeout(timeout)))
        dist.init_process_group(
            backend,
            store=dist.PrefixStore(f"zg/restart{restarts}", store),
            rank=rank,
            world_size=world,
            timeout=_timeout(timeout),
        )
    else:
        dist.init_process_group(backend, init_method="env://", timeout=_timeout(timeout))
    return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)), backend
