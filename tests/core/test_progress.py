"""The progress switch (zg/experiments/_progress.py): a bar for a person, none under pytest,
nbval or the Makefile's unattended targets; the long measurements and Engine.fit show one when
it is on and write nothing when it is off."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path

import processes
import pytest
from graphs import tiny

import zg
from zg import experiments as ex
from zg.experiments import _progress
from zg.experiments._progress import RunProgress, progress_enabled

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "environ, enabled",
    [
        ({}, True),  # a person's notebook or terminal
        ({"PYTEST_CURRENT_TEST": "t.py::t (call)"}, False),  # pytest, and nbval's kernels
        ({"ZG_PROGRESS": "0"}, False),  # the Makefile's unattended targets
        ({"ZG_PROGRESS": "off"}, False),
        ({"ZG_PROGRESS": "1", "PYTEST_CURRENT_TEST": "t.py::t (call)"}, True),
        ({"ZG_PROGRESS": "Yes"}, True),
        ({"ZG_PROGRESS": ""}, True),
    ],
)
def test_the_switch(environ, enabled):
    assert progress_enabled(environ) is enabled


def test_a_value_the_switch_does_not_know_is_named_and_ignored():
    with pytest.warns(UserWarning, match="ZG_PROGRESS='maybe'"):
        assert progress_enabled({"ZG_PROGRESS": "maybe"}) is True


def test_off_under_pytest_and_nbval():
    """Here (pytest; a notebook kernel nbval starts inherits the same environment) the bar is
    off unless ZG_PROGRESS says otherwise."""
    assert "PYTEST_CURRENT_TEST" in os.environ
    assert progress_enabled() is (
        os.environ.get("ZG_PROGRESS", "").lower() in ("1", "true", "on", "yes")
    )


def test_the_unattended_make_targets_turn_it_off():
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^UNATTENDED = ((?:[^\n]*\\\n)*[^\n]*)", makefile, re.M)
    assert listed and re.search(r"^\$\(UNATTENDED\): export ZG_PROGRESS \?= 0$", makefile, re.M)
    targets = set(listed.group(1).replace("\\\n", " ").split())
    assert {
        "test",
        "test-fast",
        "test-modern",
        "report",
        "report-modern",
        "lab-live-check",
    } <= targets
    assert {"labs-check", "labs-variants", "light-check"} <= targets
    assert "lab" not in targets and "lab-light" not in targets  # a person's JupyterLab


@pytest.fixture
def bars(monkeypatch):
    """Every bar the measurements open, kept (tqdm's own, drawn at every tick)."""
    from tqdm.auto import tqdm

    opened = []

    def drawn_every_tick(*args, **kwargs):
        bar = tqdm(*args, mininterval=0, **kwargs)
        opened.append(bar)
        return bar

    monkeypatch.setattr(
        _progress, "_tqdm", lambda: drawn_every_tick if progress_enabled() else None
    )
    return opened


def test_a_long_measurement_shows_a_bar_when_on_and_nothing_when_off(monkeypatch, capsys, bars):
    g = tiny()
    monkeypatch.setenv("ZG_PROGRESS", "1")
    on = ex.sample_counts(g, [3, 3], 32, num_batches=4, seed=1)
    err = capsys.readouterr().err
    assert "sampling batches" in err and "4/4" in err
    assert [(b.desc, b.n, b.total) for b in bars] == [("sampling batches", 4, 4)]
    monkeypatch.setenv("ZG_PROGRESS", "0")
    off = ex.sample_counts(g, [3, 3], 32, num_batches=4, seed=1)
    assert capsys.readouterr().err == "" and len(bars) == 1
    assert on.tolist() == off.tolist()  # the bar changes nothing measured


def test_the_other_measurements_tick_their_bars(monkeypatch, bars):
    g = tiny()
    monkeypatch.setenv("ZG_PROGRESS", "1")
    ex.overflow_curve(g, [3, 3], 32, margins=[0.0, 0.1], profile_batches=2, held_out_batches=2)
    ex.sweep_partitions(g, [2, 3], ["random"], hops=1)
    model = zg.models.SAGE(g.feat_dim, 8, g.num_classes, num_layers=2)
    ex.bias_vs_workers(g, model, [2, 3], draws=1, method="random", super_epochs=[0])
    got = {b.desc: (b.n, b.total) for b in bars}
    assert got["profiling margins"] == (2, 2) and got["sampling batches"] == (2, 2)
    assert got["partitions"] == (2, 2) and got["worker counts"] == (2, 2)


def test_engine_fit_follows_the_switch(monkeypatch, capsys):
    g = tiny()

    def engine():
        model = zg.models.SAGE(g.feat_dim, 8, g.num_classes, num_layers=2)
        return zg.Engine(g, model, mode="static", fanouts=[3, 3], batch_size=64, seed=0)

    monkeypatch.delenv("ZG_PROGRESS", raising=False)
    engine().fit(1)  # under pytest: no bar
    assert "training" not in capsys.readouterr().err
    monkeypatch.setenv("ZG_PROGRESS", "1")
    engine().fit(1)
    assert "training" in capsys.readouterr().err
    engine().fit(1, progress=False)  # an explicit choice wins
    assert "training" not in capsys.readouterr().err


def test_run_progress_ticks_once_per_history_file_that_appears(monkeypatch, capsys):
    monkeypatch.setenv("ZG_PROGRESS", "1")
    with RunProgress(2, desc="training runs", poll_seconds=0.01) as bar:
        first = bar.watch({"trainer": "single"})
        own = bar.watch({"trainer": "single", "history_path": "/elsewhere/h.json"})
        assert own["history_path"] == "/elsewhere/h.json"  # a run's own file is left alone
        folder = Path(first["history_path"]).parent
        Path(first["history_path"]).write_text("{}")
        deadline = time.monotonic() + 10
        while bar.bar.n < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert bar.bar.n == 1
        assert bar.forget({"path": first["history_path"]})["path"] is None
        assert bar.forget({"path": "/elsewhere/h.json"})["path"] == "/elsewhere/h.json"
    assert not folder.exists()  # the bar's files go with it
    assert "training runs" in capsys.readouterr().err


def test_run_progress_off_changes_nothing(monkeypatch):
    monkeypatch.setenv("ZG_PROGRESS", "0")
    options = {"trainer": "single"}
    with RunProgress(1, desc="training runs") as bar:
        assert bar.watch(options) is options and bar.bar is None
        assert bar.forget({"path": None}) == {"path": None}


class _Recorder:
    """A stand-in for the bar's own class: counts what the polled bar does to it."""

    def __init__(self, **kwargs):
        self.kwargs, self.closed = kwargs, False

    def close(self):
        self.closed = True


@pytest.mark.parametrize("advance_fails", [False, True])
@pytest.mark.parametrize("block_fails", [False, True])
def test_a_polled_bar_ends_cleanly_whatever_ends_its_block(advance_fails, block_fails):
    """zg._polled_bar.PolledBar, the life under RunProgress and Grappa's ParentBar: on leaving,
    the thread is joined, the last state drawn once more, the bar closed, the folder removed;
    an error while drawing never reaches the caller; the block's own error does, unchanged."""
    import threading

    from zg._polled_bar import PolledBar

    class Bar(PolledBar):
        advanced = 0

        def _open(self, tqdm):
            return tqdm(total=3)

        def _advance(self):
            self.advanced += 1
            if advance_fails:
                raise OSError("the watched file went away")

    before = set(threading.enumerate())
    bar = Bar(_Recorder, poll_seconds=0.001)
    with pytest.raises(KeyError) if block_fails else contextlib.nullcontext():
        with bar:
            folder = Path(bar.folder)
            assert folder.is_dir()
            deadline = time.monotonic() + 10
            while bar.advanced < 2 and time.monotonic() < deadline:
                time.sleep(0.001)
            if block_fails:
                raise KeyError("the caller's own error")
    assert bar.advanced >= 3  # two polls, then the last draw on leaving
    assert bar.bar.closed and not folder.exists()
    assert set(threading.enumerate()) <= before
    nothing = Bar(None, poll_seconds=0.001)  # no bar class: no folder, thread or bar
    with nothing:
        assert nothing.folder is None and nothing.bar is None
    assert nothing.advanced == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_run_trainers_shows_a_bar_over_real_runs(monkeypatch, capsys):
    monkeypatch.setenv("ZG_PROGRESS", "1")
    histories = ex.run_trainers(
        tiny(),
        ["single"],
        epochs=1,
        seed=0,
        batch_size=64,
        hidden_dim=8,
        fanouts=[3, 3],
        timeout=60,
        run_timeout=240,
        threads=1,
    )
    assert histories["single"]["path"] is None  # as without the bar
    err = capsys.readouterr().err
    assert "training runs" in err and "1/1" in err


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_off_in_a_notebook_nbval_runs(tmp_path):
    """A notebook kernel started by nbval (`pytest --nbval-lax`, CONTRIBUTING.md) sees the bar
    off with nothing set but what pytest sets itself."""
    pytest.importorskip("nbval")
    cell = (
        "from zg.experiments._progress import progress_enabled\n"
        "assert not progress_enabled(), 'a bar under nbval'"
    )
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "check",
                "metadata": {},
                "outputs": [],
                "source": cell,
            }
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "switch.ipynb"
    path.write_text(json.dumps(notebook))
    env = {k: v for k, v in os.environ.items() if k not in ("ZG_PROGRESS", "PYTEST_CURRENT_TEST")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = processes.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--rootdir",
            str(tmp_path),
            str(path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
