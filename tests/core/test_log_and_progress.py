"""What a person watching a run sees: the ``zg`` loggers (silent in a library, shown by the
commands), a resumed Engine saying so, a damaged checkpoint named as such, and ``zg train``
writing one line per epoch, as each ends, when its output goes to a file or a pipe."""

import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import processes
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine import engine

import zg
from zg import cli, log

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- the loggers


@given(name=st.from_regex(r"[a-z_][a-z0-9_]{0,8}(\.[a-z_][a-z0-9_]{0,8}){0,2}", fullmatch=True))
def test_every_logger_is_a_child_of_zg(name):
    logger = log.get(name)
    assert logger.name == name if name == "zg" or name.startswith("zg.") else f"zg.{name}"
    assert logger.name.split(".")[0] == "zg"


def test_a_library_prints_nothing_unless_shown(capsys):
    assert any(isinstance(h, logging.NullHandler) for h in log.LOGGER.handlers)
    level = log.LOGGER.level
    try:
        log.get("zg.somewhere").warning("not shown")  # NullHandler: no lastResort either
        assert capsys.readouterr().err == ""
        stream = io.StringIO()
        shown = log.show(stream=stream)
        log.show(stream=stream)  # a second call replaces the first handler: one line per record
        log.get("zg.somewhere").info("shown %d", 1)
        log.get("zg.somewhere").debug("below the level")
        assert stream.getvalue() == "zg: shown 1\n"
        assert sum(getattr(h, "_zg_shown", False) for h in log.LOGGER.handlers) == 1
    finally:
        for h in [h for h in log.LOGGER.handlers if getattr(h, "_zg_shown", False)]:
            log.LOGGER.removeHandler(h)
        log.LOGGER.setLevel(level)
    assert shown not in log.LOGGER.handlers


def test_the_zg_command_leaves_the_loggers_as_it_found_them(capsys):
    before = (list(log.LOGGER.handlers), log.LOGGER.level)
    assert cli.main(["info", "--json"]) == 0
    capsys.readouterr()
    assert (list(log.LOGGER.handlers), log.LOGGER.level) == before


# ----------------------------------------------------------------------------- Engine checkpoints


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=600, avg_degree=6, num_classes=4, feat_dim=16, seed=0)


def test_a_resumed_engine_says_where_it_resumes(graph, tmp_path, caplog):
    first = engine(graph)
    first.train_epoch()
    first.train_epoch(max_batches=2)
    path = first.save(tmp_path / "ckpt.pt")
    resumed = engine(graph)
    with caplog.at_level(logging.INFO, logger="zg"):
        resumed.load(path)
    lines = [r.getMessage() for r in caplog.records if r.name == "zg.checkpoint"]
    assert lines == [f"resumed from checkpoint {path} at epoch 1, batch 2"], lines


def _damaged(data: bytes, want) -> bytes | None:
    """``data`` with one byte changed such that torch.load raises ``want`` (None: no such byte)."""
    for pos in range(len(data)):
        damaged = bytearray(data)
        damaged[pos] ^= 0x55
        try:
            torch.load(io.BytesIO(bytes(damaged)), weights_only=True)
        except want:
            return bytes(damaged)
        except Exception:
            continue
    return None


@settings(max_examples=8, deadline=None)
@given(cut=st.integers(0, 10_000), flip=st.integers(0, 10_000))
def test_a_damaged_engine_checkpoint_is_named_corrupt(graph, tmp_path_factory, cut, flip):
    folder = tmp_path_factory.mktemp("damaged")
    eng = engine(graph)
    eng.train_epoch(max_batches=1)
    data = eng.save(folder / "good.pt").read_bytes()
    bad = folder / "bad.pt"
    damaged = bytearray(data[: cut % len(data)])  # truncated, then one byte changed
    if damaged:
        damaged[flip % len(damaged)] ^= 0xFF
    bad.write_bytes(bytes(damaged))
    with pytest.raises(ValueError) as exc:
        engine(graph).load(bad)
    assert str(bad) in str(exc.value) and "corrupt" in str(exc.value), str(exc.value)


def test_the_unpicklers_bare_key_error_is_named_with_its_file(graph, tmp_path):
    """A damaged pickle memo makes torch.load raise KeyError(<a number>): the message names the
    file, says it is corrupt, and gives the cause's class, never the number alone."""
    eng = engine(graph)
    eng.train_epoch(max_batches=1)
    damaged = _damaged(eng.save(tmp_path / "good.pt").read_bytes(), KeyError)
    assert damaged is not None, "no one-byte change gives a KeyError here"
    bad = tmp_path / "bad.pt"
    bad.write_bytes(damaged)
    with pytest.raises(ValueError) as exc:
        engine(graph).load(bad)
    message = str(exc.value)
    assert str(bad) in message and "corrupt" in message and "KeyError: " in message, message


# ----------------------------------------------------------------------------- zg train, piped


def _env() -> dict[str, str]:
    """This checkout first on the path; stdout buffered as Python buffers a pipe by default."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONUNBUFFERED", None)
    return env


def _zg_train(*args, **popen) -> subprocess.Popen:
    env = _env()
    return subprocess.Popen(
        [sys.executable, "-m", "zg", "train", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        **popen,
    )


def _npz(folder: Path) -> Path:
    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    return zg.datasets.save_npz(g, folder / "g.npz") or folder / "g.npz"


TINY = ["--fanouts", "3,3", "--hidden", "8", "--batch-size", "32", "--kernel", "torch"]
EPOCH_LINE = re.compile(r"^epoch (\d+) \((\d+)/(\d+)\): loss \S+, val \S+, \S+ s$")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_zg_train_into_a_pipe_writes_one_line_per_epoch(tmp_path):
    epochs = 4
    out = tmp_path / "h.json"
    done = processes.run(
        [sys.executable, "-m", "zg", "train", "--dataset", str(_npz(tmp_path))]
        + ["--epochs", str(epochs), "--json", str(out), *TINY],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    matched = [EPOCH_LINE.match(line) for line in lines]
    numbers = [tuple(map(int, m.groups())) for m in matched if m]
    assert numbers == [(e, e + 1, epochs) for e in range(epochs)], done.stdout
    # The lines come as the epochs end, before the table (whose epochs are numbered the same).
    header = next(i for i, line in enumerate(lines) if line.startswith("epoch  "))
    assert max(i for i, m in enumerate(matched) if m) < header
    table = [line.split()[0] for line in lines[header + 2 : header + 2 + epochs]]
    assert table == [str(e) for e in range(epochs)], lines[header:]
    # One numbering: the JSON's epochs are the table's and the lines'.
    history = json.loads(out.read_text())
    assert [r["epoch"] for r in history["epochs"]] == list(range(epochs))
    assert history["final"]["best_epoch"] in range(epochs)
    assert "cores" in history["machine"]  # the machine note, named as zg grappa's history names it
    assert "\r" not in done.stderr, "no progress bar when stderr is not a terminal"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_zg_train_into_a_pipe_flushes_each_epoch_line_as_it_ends(tmp_path):
    """The first epoch's line is read while the run is still going: the reader of a log file
    sees the run progress, not everything at the end. The run is killed once that line is read:
    had the lines been held back (a pipe's buffer holds all of this run's output), the table and
    the final line would have come with it (40 epochs: all of its output fits that buffer)."""
    process = _zg_train("--dataset", _npz(tmp_path), "--epochs", 40, *TINY)
    try:
        first = ""
        while not EPOCH_LINE.match(first.rstrip("\n")):
            first = process.stdout.readline()
            assert first, f"the run ended before an epoch line: {process.stderr.read()[-2000:]}"
        assert EPOCH_LINE.match(first.rstrip("\n")).group(1) == "0"
    finally:
        processes.kill_group(process)
    rest = process.stdout.read()  # through the same reader: readline may hold more already
    process.communicate()
    assert "final:" not in rest, "the epoch lines came only when the run ended"
