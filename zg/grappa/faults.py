"""Fault injection for the failure-and-restart tests (test-only hooks, off by default).

Where it sits: the worker loop calls :func:`fault_from_env` once and :func:`inject_fault` at
the iteration the environment names.
"""

from __future__ import annotations

import os
import signal
import sys
import time

__all__ = ["FAULT_ENV", "FAULT_ONCE_ENV", "fault_from_env", "inject_fault"]


FAULT_ENV = "ZG_GRAPPA_FAULT"
FAULT_ONCE_ENV = "ZG_GRAPPA_FAULT_ONCE"


def fault_from_env(rank: int):
    """Fault-injection hook for tests: ``ZG_GRAPPA_FAULT="kill:EPOCH:ITERATION:RANK"`` makes that
    rank SIGKILL itself at the start of that iteration; ``"stall:..."`` makes it sleep for ever
    (a peer that never answers). With ``ZG_GRAPPA_FAULT_ONCE=<marker file>`` the fault fires only
    if the marker does not exist yet, and creates it first, so a restarted run does not fail
    again. Returns (action, epoch, iteration) for this rank, or None."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    parts = spec.split(":")
    if len(parts) != 4 or parts[0] not in ("kill", "stall") or not all(p.isdigit() for p in parts[1:]):
        raise ValueError(f"{FAULT_ENV} must look like 'kill:EPOCH:ITERATION:RANK' or "
                         f"'stall:EPOCH:ITERATION:RANK', got {spec!r}")
    if int(parts[3]) != rank:
        return None
    return parts[0], int(parts[1]), int(parts[2])


def inject_fault(action: str) -> None:
    marker = os.environ.get(FAULT_ONCE_ENV)
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return                               # fired before: this is the restarted run
    sys.stdout.flush()
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:                                  # "stall": alive, in the group, silent
        time.sleep(3600)


