"""A parent killed with SIGKILL takes its workers along: ``grappa.train``'s workers are gone
within a deadline whether they were still starting (importing the caller's script) or
training. The deadline is a bound for correctness, far above what the kit needs
(``PARENT_GONE_SECONDS``) and far below a worker's lifetime without the fix (the starting
workers here would sleep for minutes in their import).

Each run is a separate Python in its own process group (killed with the group at the end,
``tests/processes.py``); only its leader, the parent, is SIGKILLed by the test.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from processes import kill_group

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

GONE_WITHIN = 5.0  # seconds after the parent's death
REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    if __name__ == "__mp_main__" and {stall}:
        time.sleep(600)  # a worker re-importing this script: still starting when killed
    from graphs import tiny
    from zg import grappa

    if __name__ == "__main__":
        grappa.train(tiny(), workers=2, epochs=100000, batch_size=32, hidden_dim=8,
                     fanouts=[3, 3], estimator="mean", repartition_every=0, timeout=120)
    """
)


def _state(pid: int) -> str | None:
    """The process's state letter (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z")  # a zombie has ended; only its reaping is left


def _workers(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"spawn_main" in command:
            found.append(int(entry))
    return found


def _handles_sigterm(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next(line for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def _wait(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {seconds} s")
        time.sleep(0.1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("phase", ["starting", "training"])
def test_workers_die_with_a_parent_killed_by_sigkill(tmp_path, phase):
    script = tmp_path / "run.py"
    stall = phase == "starting"
    script.write_text(SCRIPT.format(tests=str(REPO / "tests"), stall=stall))
    env = {**os.environ, "PYTHONPATH": str(REPO), "DGLBACKEND": "pytorch"}
    parent = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: len(_workers(parent.pid)) == 2, 150, "the 2 workers did not appear")
        workers = _workers(parent.pid)
        if phase == "training":  # past their imports: the worker's own handler is installed
            _wait(
                lambda: all(_handles_sigterm(w) for w in workers),
                150,
                "the workers did not reach their entry",
            )
            time.sleep(1.0)
        else:
            time.sleep(1.0)  # asleep in the script's import
            assert all(_alive(w) for w in workers)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + GONE_WITHIN
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [w for w in workers if _alive(w)]
        assert not left, f"workers {left} outlived their parent by {GONE_WITHIN} s ({phase})"
    finally:
        kill_group(parent)
        parent.wait()
