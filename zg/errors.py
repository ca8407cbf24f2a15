"""zg's own exception classes: what a caller can catch by name.

Every zg error that is not a plain ``ValueError`` / ``TypeError`` about an argument derives
from :class:`ZgError`, so ``except zg.errors.ZgError`` catches all of them. A Grappa worker's
zg error reaches the parent process as itself (same class, same message; see
:func:`zg.grappa.launch.spawn`), so ``except CheckpointError`` works around ``grappa.train``
exactly as it does around a single-process call.
"""

from __future__ import annotations

__all__ = ["ZgError", "MainGuardError"]


class ZgError(Exception):
    """Base class of zg's own exceptions."""


class MainGuardError(ZgError, RuntimeError):
    """Worker processes were started while Python re-imported the main script in a child.

    The "spawn" start method runs the main script again in every new process; a script that
    starts workers at module level (not under ``if __name__ == "__main__":``) would start them
    again, without end. zg refuses, naming the fix.
    """
