"""zg's own exception classes: what a caller can catch by name.

Every zg error that is not a plain ``ValueError`` / ``TypeError`` about an argument derives
from :class:`ZgError`, so ``except zg.errors.ZgError`` catches all of them. A Grappa worker's
zg error reaches the parent process as itself (same class, same message; see
:func:`zg.grappa.launch.spawn`), so ``except CheckpointError`` works around ``grappa.train``
exactly as it does around a single-process call.
"""

from __future__ import annotations

__all__ = ["ZgError", "MainGuardError", "WorkerFailed"]


class ZgError(Exception):
    """Base class of zg's own exceptions."""


class MainGuardError(ZgError, RuntimeError):
    """Worker processes were started while Python re-imported the main script in a child.

    The "spawn" start method runs the main script again in every new process; a script that
    starts workers at module level (not under ``if __name__ == "__main__":``) would start them
    again, without end. zg refuses, naming the fix.
    """


class WorkerFailed(ZgError, RuntimeError):
    """A worker process ended badly with no error the parent can raise as itself: a signal
    stopped it (SIGTERM from outside, SIGKILL from the kernel's out-of-memory killer), it
    exited with another code, or it raised an exception of a class outside zg and the few
    builtins that cross as themselves. The message is one line: which worker, what ended it,
    what to do. Attributes: ``worker_rank``, ``exit_code`` (None if it raised),
    ``signal_name`` (None unless a signal ended it), ``worker_traceback`` (the worker's
    traceback text, when it raised)."""

    def __init__(
        self,
        message: str,
        worker_rank: int | None = None,
        exit_code: int | None = None,
        signal_name: str | None = None,
        worker_traceback: str | None = None,
    ):
        super().__init__(message)
        self.worker_rank = worker_rank
        self.exit_code = exit_code
        self.signal_name = signal_name
        self.worker_traceback = worker_traceback
