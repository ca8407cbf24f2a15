"""What a Grappa run finds in its checkpoint_dir: the lock file and the checkpoint are used only
if they are regular files.

* ``checkpoint_dir/.zg-run.lock`` is opened without following a link (``O_NOFOLLOW``) and
  without blocking: a symbolic link (to a file the run must never truncate), a named pipe, a
  directory or a hard link to another file there is a ValueError naming ``checkpoint_dir`` and
  the lock file, before any worker starts and before anything is written; a regular lock file
  left by an earlier run is reused, and the flock still refuses a second run.
* ``checkpoint_dir/checkpoint.pt`` is read only if it is a regular file (a link to one is
  followed): a named pipe or a device is a ``CheckpointError`` naming ``checkpoint_dir`` and
  the file, raised by rank 0 without opening it, so every rank stops with that error rather
  than rank 0 blocking and a peer being blamed.

Real FIFOs (os.mkfifo), symbolic and hard links; an alarm turns a blocked open into a failure.
"""

import os
import signal
import sys

import processes
import pytest
from graphs import tiny

from zg import grappa
from zg.grappa.checkpoint import (
    LOCK_FILE,
    CheckpointError,
    checkpoint_locks,
    read_checkpoint,
)


@pytest.fixture
def alarm():
    def ring(signum, frame):
        raise TimeoutError("blocked (opened a FIFO?)")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def plant(kind: str, folder, victim):
    lock = folder / LOCK_FILE
    if kind == "symlink":
        lock.symlink_to(victim)
    elif kind == "hard link":
        os.link(victim, lock)
    elif kind == "fifo":
        os.mkfifo(lock)
    elif kind == "directory":
        lock.mkdir()
    return lock


KINDS = {
    "symlink": "a symbolic link to",
    "hard link": "a file with 2 names",
    "fifo": "a named pipe",
    "directory": "a directory",
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_lock_file_that_is_not_a_regular_file_of_its_own_is_refused(tmp_path, alarm, kind):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    victim = tmp_path / "notes.txt"
    victim.write_text("precious notes\n")
    lock = plant(kind, folder, victim)
    before = os.lstat(lock)
    with pytest.raises(ValueError) as refused:
        with checkpoint_locks([str(folder)]):
            pytest.fail("the lock was taken")
    message = str(refused.value)
    assert message.startswith(f"checkpoint_dir {str(folder)!r}: its lock file {str(lock)!r}")
    assert KINDS[kind] in message, message
    assert victim.read_text() == "precious notes\n"
    after = os.lstat(lock)
    assert (after.st_mode, after.st_ino, after.st_size) == (
        before.st_mode,
        before.st_ino,
        before.st_size,
    )
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_FILE]


def test_a_run_is_refused_before_any_worker_when_its_lock_file_is_a_link(tmp_path, alarm):
    """Refused before any worker, nothing written; once the link is replaced by a regular
    file (an earlier run's lock file), the lock is taken as before: the pid replaces the old
    one and a second run is refused naming it."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    victim = tmp_path / "notes.txt"
    victim.write_text("precious notes\n")
    lock = folder / LOCK_FILE
    lock.symlink_to(victim)
    with pytest.raises(ValueError, match=r"^checkpoint_dir .*lock file.*a symbolic link"):
        grappa.train(
            tiny(), workers=2, epochs=1, hidden_dim=16, timeout=60, seed=0,
            checkpoint_dir=str(folder),
        )  # fmt: skip
    assert victim.read_text() == "precious notes\n"
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_FILE]  # no checkpoint written

    lock.unlink()
    lock.write_text("123456789")  # an earlier run's pid
    with checkpoint_locks([str(folder)]):
        assert lock.read_text() == str(os.getpid())
        other = processes.run(
            [
                sys.executable,
                "-c",
                "from zg.grappa.checkpoint import checkpoint_locks\n"
                f"with checkpoint_locks([{str(folder)!r}]): pass",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert other.returncode != 0
        assert f"in use by another run (pid {os.getpid()})" in other.stderr
    assert not lock.is_symlink() and lock.read_text() == str(os.getpid())
    assert victim.read_text() == "precious notes\n"


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "directory"])
def test_a_checkpoint_that_is_not_a_regular_file_is_refused_unopened(tmp_path, alarm, kind):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    path = folder / "checkpoint.pt"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")
    what = {"fifo": "a named pipe", "directory": "a directory"}.get(kind, "a character device")
    with pytest.raises(CheckpointError) as refused:
        read_checkpoint(str(path), None, None, 2)  # refused before the run is looked at
    message = str(refused.value)
    assert message.startswith(f"checkpoint_dir {str(folder)!r}: checkpoint {str(path)!r}")
    assert f"is {what}" in message and "not a regular file" in message, message


def test_a_run_resuming_from_a_fifo_stops_every_rank_naming_it(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    os.mkfifo(folder / "checkpoint.pt")
    with pytest.raises(CheckpointError) as refused:
        grappa.train(
            tiny(), workers=2, epochs=1, hidden_dim=16, timeout=20, run_timeout=40, seed=0,
            checkpoint_dir=str(folder),
        )  # fmt: skip
    message = str(refused.value)
    assert "is a named pipe (FIFO), not a regular file" in message, message
    assert "could not load it" not in message  # no peer blamed
