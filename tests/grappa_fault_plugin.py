"""Fault injection for the failure-and-restart tests: a zg.grappa worker plugin (test-only).

The tests set ``ZG_GRAPPA_WORKER_PLUGIN`` to this file's path (see :mod:`zg.grappa.worker`), so
every worker process imports it before training and it installs :func:`fault` in
``zg.grappa.worker.on_iteration``. What it does is read from two variables the tests set:

    ZG_GRAPPA_FAULT="kill:EPOCH:ITERATION:RANK"    that rank SIGKILLs itself at the start of
                                                   that iteration ("stall:...": it sleeps for
                                                   ever, a peer that never answers)
    ZG_GRAPPA_FAULT_ONCE=<marker file>             fire only if the marker does not exist yet,
                                                   and create it first (a restarted run does
                                                   not fail again)
"""

import os
import signal
import sys
import time
from pathlib import Path

from zg.grappa import worker

FAULT_ENV = "ZG_GRAPPA_FAULT"
FAULT_ONCE_ENV = "ZG_GRAPPA_FAULT_ONCE"
PLUGIN = str(Path(__file__).resolve())


def parse(spec: str):
    """(action, epoch, iteration, rank) of a ``ZG_GRAPPA_FAULT`` value."""
    parts = spec.split(":")
    if (
        len(parts) != 4
        or parts[0] not in ("kill", "stall")
        or not all(p.isdigit() for p in parts[1:])
    ):
        raise ValueError(
            f"{FAULT_ENV} must look like 'kill:EPOCH:ITERATION:RANK' or "
            f"'stall:EPOCH:ITERATION:RANK', got {spec!r}"
        )
    return parts[0], int(parts[1]), int(parts[2]), int(parts[3])


def fault(rank: int, epoch: int, batch: int) -> None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    action, at_epoch, at_batch, at_rank = parse(spec)
    if (rank, epoch, batch) != (at_rank, at_epoch, at_batch):
        return
    marker = os.environ.get(FAULT_ONCE_ENV)
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # fired before: this is the restarted run
    sys.stdout.flush()
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:  # "stall": alive, in the group, silent
        time.sleep(3600)


if fault not in worker.on_iteration:
    worker.on_iteration.append(fault)
