"""Starting a real process from a test under a deadline that kills its whole process group
(``from processes import run``; tests/ is on the path).

``subprocess.run(timeout=...)`` kills only the child it started: a worker, a torchrun agent's
children or a notebook kernel would live on, and a hang in any of them would hold the suite.
:func:`run` starts the child in a new session (its own process group) and, on the deadline or
any exception, kills the group with SIGKILL; a timeout then fails the test with the command and
what it printed. ``tests/core/test_runs_end_cleanly.py`` checks that every test starts its
processes this way.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any

import pytest

DEFAULT_SECONDS = 300


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL ``process``'s whole process group (it leads one: ``start_new_session=True``)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(
    args: Sequence[Any],
    *,
    timeout: float = DEFAULT_SECONDS,
    capture_output: bool = False,
    input: str | bytes | None = None,
    check: bool = False,
    **popen: Any,
) -> subprocess.CompletedProcess:
    """As :func:`subprocess.run`, in a new process group killed at ``timeout`` seconds (the
    test then fails naming the command) or when the test is interrupted."""
    if capture_output:
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
    if input is not None:
        popen.setdefault("stdin", subprocess.PIPE)
    process = subprocess.Popen(list(args), start_new_session=True, **popen)
    try:
        out, err = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        out, err = process.communicate()
        pytest.fail(
            f"{' '.join(map(str, args))[:300]} did not end within {timeout} s and was killed "
            f"with its process group; its output ends: {str(out)[-1500:]} {str(err)[-1500:]}"
        )
    except BaseException:
        kill_group(process)
        process.communicate()
        raise
    finally:
        # Whatever it started and left behind (a worker of a crashed parent) goes too.
        kill_group(process)
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done
