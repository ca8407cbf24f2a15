"""zg.grappa.launch.spawn never hangs: a worker that does not act on SIGTERM (stopped with
SIGSTOP, or stuck in C code) is killed at the kill deadline once another worker fails, and the
caller gets the failure. Each scenario runs in its own process group under a deadline that
kills the group, so a regression fails here instead of hanging the suite."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import processes
import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    from zg.grappa.launch import spawn

    def work(rank, world, how):
        if rank == 0:
            if how == "sigstop":
                os.kill(os.getpid(), signal.SIGSTOP)      # never acts on SIGTERM again
            else:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)   # ignores the polite stop
                time.sleep(600)
        time.sleep(1.0)
        raise ValueError(f"worker {rank} failed on purpose")

    if __name__ == "__main__":
        start = time.monotonic()
        try:
            spawn(work, 2, args=(sys.argv[1],), timeout=30)
        except ValueError as exc:
            print(f"raised ValueError after {time.monotonic() - start:.1f} s: {exc}", flush=True)
            sys.exit(0)
        print("no error", flush=True)
        sys.exit(3)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigstop", "ignores_sigterm"])
def test_a_worker_that_ignores_sigterm_never_hangs_the_caller(tmp_path, how):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(
        [sys.executable, str(script), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: the deadline kills all of it
    )
    start = time.monotonic()
    try:
        out, err = child.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail(f"spawn hung with a worker that {how}: killed after 120 s")
    assert child.returncode == 0, (out, err[-3000:])
    assert "raised ValueError" in out and "worker 1 failed on purpose" in out, out
    assert time.monotonic() - start < 90


SIGNALLED = textwrap.dedent(
    """
    import os, signal, sys, time
    from zg.errors import WorkerFailed
    from zg.grappa.launch import spawn

    def work(rank, world, how):
        if rank == 0:
            time.sleep(0.5)
            os.kill(os.getpid(), getattr(signal, how))  # from outside, as a kill or the OOM killer
        time.sleep(600)

    if __name__ == "__main__":
        try:
            spawn(work, 2, args=(sys.argv[1],), timeout=30)
        except WorkerFailed as exc:
            print(f"{exc.worker_rank}|{exc.signal_name}|{exc}", flush=True)
            sys.exit(0)
        sys.exit(3)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "how, says", [("SIGTERM", "stopped by SIGTERM"), ("SIGKILL", "out-of-memory killer")]
)
def test_a_worker_ended_by_a_signal_is_one_line_naming_it(tmp_path, how, says):
    """A worker ended from outside (a kill, the kernel's out-of-memory killer) reaches the
    caller as zg.errors.WorkerFailed: one line naming the worker, the signal and what to do,
    not torch's "process 0 terminated with exit code 143"."""
    script = tmp_path / "run.py"
    script.write_text(SIGNALLED)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = processes.run(
        [sys.executable, str(script), how], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, (done.stdout, done.stderr[-3000:])
    rank, signal_name, message = done.stdout.strip().split("|", 2)
    assert (rank, signal_name) == ("0", how)
    assert message.startswith("worker 0 of 2 ") and says in message, message
    assert "\n" not in message and "Traceback" not in done.stderr
