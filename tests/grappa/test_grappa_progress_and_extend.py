"""A Grappa run as a person watches it: the progress bar ends without a leaked semaphore, a
run started again from its checkpoint says where it resumes, more epochs extend a finished run
(exactly as an uninterrupted run of that length), and a damaged checkpoint is named corrupt."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import processes
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import zg
from zg import grappa
from zg.grappa.checkpoint import CheckpointError, _more_epochs, read_checkpoint

ROOT = Path(__file__).resolve().parents[2]
RUN = dict(workers=2, seed=0, batch_size=64, hidden_dim=8, num_layers=2, fanouts=[3, 3], timeout=60)
SAME = ("epoch", "super_epoch", "loss", "val_acc", "test_acc", "bytes_sent")

SCRIPT = """
import json, sys
import zg
from zg import grappa

if __name__ == "__main__":
    zg.log.show()
    folder, run = sys.argv[1], json.loads(sys.argv[2])
    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    straight = grappa.train(g, epochs=3, **run)
    print("straight", json.dumps(straight["epochs"]), sep="\t", flush=True)
    first = grappa.train(g, epochs=2, checkpoint_dir=folder, progress=True, **run)
    print("first", json.dumps(first["epochs"]), sep="\t", flush=True)
    print("extended", flush=True, file=sys.stderr)
    more = grappa.train(g, epochs=3, checkpoint_dir=folder, **run)
    print("extended", json.dumps([more["epochs"], more["resumed_at_epochs"]]), sep="\t")
    print("machine", json.dumps([sorted(more), more.get("machine")]), sep="\t")
"""


def _graph():
    return zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One process: a 3-epoch run; a 2-epoch run with a checkpoint and its progress bar on;
    the same checkpoint_dir with 3 epochs. -> (printed records by name, stderr, folder)."""
    tmp = tmp_path_factory.mktemp("extend")
    script = tmp / "runs.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = processes.run(
        [sys.executable, str(script), str(tmp / "ckpt"), json.dumps(RUN)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    printed = {}
    for line in done.stdout.splitlines():
        name, _, value = line.partition("\t")
        printed[name] = json.loads(value)
    return printed, done.stderr, tmp / "ckpt"


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_the_progress_bar_leaks_no_semaphore(runs):
    _, stderr, _ = runs
    assert "grappa P=2" in stderr, "the progress bar did not run"
    assert "leaked semaphore" not in stderr, stderr[-2000:]
    assert "resource_tracker" not in stderr, stderr[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_more_epochs_extend_a_finished_run_where_it_stopped(runs):
    printed, stderr, folder = runs
    straight, first = printed["straight"], printed["first"]
    extended, resumed_at = printed["extended"]
    assert [r["epoch"] for r in first] == [0, 1] and resumed_at == [2]
    assert [{k: r.get(k) for k in SAME} for r in extended] == [
        {k: r.get(k) for k in SAME} for r in straight
    ]
    # The extending run said so, once, naming the checkpoint and the epoch it resumed at.
    after = stderr.split("extended\n", 1)[1]
    # The message from where it starts: a bar drawn just before it may share its line (tqdm
    # redraws with a carriage return and no newline).
    lines = [
        line[line.index("zg: resumed") :]
        for line in after.splitlines()
        if "resumed from checkpoint" in line
    ]
    assert lines == [
        f"zg: resumed from checkpoint {folder / 'checkpoint.pt'} at epoch 2 (epochs 2-2 to train)"
    ], after[-2000:]
    assert "resumed" not in stderr.split("extended\n", 1)[0], "a fresh run said it resumed"


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_a_damaged_checkpoint_is_named_corrupt_with_its_cause(runs, tmp_path):
    """One byte changed so that the unpickler raises a bare KeyError (a memo number): the
    error names the file, says it is corrupt, and gives the cause's class."""
    _, _, folder = runs
    data = (folder / "checkpoint.pt").read_bytes()
    cfg = grappa.TrainConfig(epochs=3, checkpoint_dir=str(folder), **RUN).validated()
    found = 0
    for pos in range(len(data)):
        damaged = bytearray(data)
        damaged[pos] ^= 0x55
        try:
            torch.load(io.BytesIO(bytes(damaged)), weights_only=True)
        except KeyError:
            bad = tmp_path / "checkpoint.pt"
            bad.write_bytes(bytes(damaged))
            with pytest.raises(CheckpointError) as exc:
                read_checkpoint(str(bad), cfg, _graph(), 2)
            message = str(exc.value)
            assert str(bad) in message and "corrupt" in message, message
            assert "KeyError: " in message, message
            found += 1
            if found == 3:
                break
        except Exception:
            continue
    assert found, "no one-byte change gives a KeyError here"


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_the_history_names_its_machine_note_as_zg_train_does(runs):
    keys, machine = runs[0]["machine"]
    assert "machine" in keys and "environment" not in keys
    assert {"cores", "cpu", "torch", "python", "platform", "date"} <= set(machine)


@given(theirs=st.integers(0, 50), ours=st.integers(0, 50))
def test_only_more_epochs_extend_a_run(theirs, ours):
    assert _more_epochs({"epochs": theirs}, {"epochs": ours}) == (ours > theirs)


@pytest.mark.parametrize("odd", [None, True, -1, 2.0, "3"])
def test_an_epochs_value_that_is_not_a_count_extends_nothing(odd):
    assert not _more_epochs({"epochs": odd}, {"epochs": 5})
    assert not _more_epochs({"epochs": 1}, {"epochs": odd})


def test_progress_is_auto_by_default_and_checked():
    assert grappa.TrainConfig().progress is None
    for value in (None, True, False):
        assert grappa.TrainConfig(progress=value).validated().progress is value
    with pytest.raises(TypeError, match="progress"):
        grappa.TrainConfig(progress="yes").validated()


def _zg_grappa_stderr(tmp_path, terminal: bool) -> str:
    """``zg grappa`` on a tiny graph file, no --progress flag, its stderr a terminal (a
    pseudo-terminal) or a pipe -> what it wrote there."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    zg.datasets.save_npz(_graph(), tmp_path / "g.npz")
    command = [sys.executable, "-m", "zg", "grappa", "--dataset", str(tmp_path / "g.npz")]
    command += ["--workers", "2", "--epochs", "2", "--batch-size", "64", "--hidden-dim", "8"]
    command += ["--num-layers", "2", "--fanouts", "3,3", "--timeout", "60"]
    # Neither pytest's nor the Makefile's switch (`make test` exports ZG_PROGRESS=0): the
    # command as a person starts it, who has neither.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "ZG_PROGRESS")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    if not terminal:
        done = processes.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        return done.stderr.decode()
    master, slave = pty.openpty()
    # A terminal's size, as a window gives it (0 x 0 would leave tqdm no columns to draw in).
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    chunks: list[bytes] = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # every holder of the terminal's other end has closed it
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        done = processes.run(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=slave, timeout=300
        )
    finally:
        os.close(slave)
    reader.join(timeout=30)
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert done.returncode == 0, text[-3000:]
    return text


@pytest.mark.slow
@pytest.mark.timeout(700)
@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_zg_grappa_shows_its_bar_where_a_person_watches(tmp_path, terminal):
    stderr = _zg_grappa_stderr(tmp_path, terminal)
    assert ("grappa P=2" in stderr) == terminal, stderr[-2000:]
    assert "leaked semaphore" not in stderr, stderr[-2000:]


@pytest.mark.slow
def test_zg_grappa_json_dash_is_stdout(tmp_path):
    """``zg grappa --json -``, as ``zg train --json -``: the history alone on stdout (it parses
    as the JSON a file would hold), everything the command says on stderr, no file named -."""
    zg.datasets.save_npz(_graph(), tmp_path / "g.npz")
    command = [sys.executable, "-m", "zg", "grappa", "--dataset", str(tmp_path / "g.npz")]
    command += ["--workers", "2", "--epochs", "2", "--batch-size", "64", "--hidden-dim", "8"]
    command += ["--num-layers", "2", "--fanouts", "3,3", "--timeout", "60", "--json", "-"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = processes.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    history = json.loads(done.stdout)
    assert [e["epoch"] for e in history["epochs"]] == [0, 1]
    assert "bytes/epoch/worker" in done.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.npz"]
