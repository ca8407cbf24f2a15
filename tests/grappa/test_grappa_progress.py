"""Grappa's progress bar is drawn by the calling process (zg/grappa/progress.py): rank 0 reports
each epoch through a small file, a thread of the caller reads it and draws one bar, the workers
draw none. The channel's contract and the rule for when a bar shows are tested here without
processes; real runs check what a person sees (the caller's bar reaching epochs/epochs, nothing
from the workers), what an unattended run sees (nothing), and that a worker's failure still
raises the kit's error and leaves no thread behind."""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

import processes
import pytest
from graphs import tiny
from grappa_fault_plugin import FAULT_ENV, PLUGIN

from zg import grappa
from zg.errors import WorkerFailed
from zg.grappa import progress
from zg.grappa.progress import (
    BarState,
    ChannelReader,
    ParentBar,
    epoch_report,
    parse_line,
    show_bar,
)
from zg.grappa.worker import PLUGIN_ENV

ROOT = Path(__file__).resolve().parents[2]
RUN = dict(workers=2, seed=0, batch_size=64, hidden_dim=8, num_layers=2, fanouts=[3, 3], timeout=60)


class FakeBar:
    """A tqdm stand-in that keeps what it was told (every bar made is in ``FakeBar.made``)."""

    made: list[FakeBar] = []

    def __init__(self, total=0, desc="", **kwargs):
        self.total, self.desc, self.kwargs, self.n = total, desc, kwargs, 0
        self.postfix, self.closed, self.drawn = {}, False, []
        FakeBar.made.append(self)

    @classmethod
    def set_lock(cls, lock):
        cls.lock = lock

    def reset(self, total=None):
        self.n, self.total = 0, total

    def set_description(self, desc, refresh=True):
        self.desc = desc

    def set_postfix(self, postfix, refresh=True):
        self.postfix = dict(postfix)

    def refresh(self):
        self.drawn.append((self.desc, self.n, self.total, dict(self.postfix)))

    def close(self):
        self.closed = True


@pytest.fixture
def fake_tqdm(monkeypatch):
    FakeBar.made = []
    monkeypatch.setattr(progress, "_tqdm", lambda: FakeBar)
    return FakeBar


def progress_threads():
    return [t for t in threading.enumerate() if t.name == "zg-grappa-progress"]


# ----------------------------------------------------------------------------- the channel


def test_what_rank_0_writes_is_what_the_caller_reads(tmp_path):
    channel = str(tmp_path / "epochs.jsonl")
    report = epoch_report(channel, None, desc="grappa P=2", epochs=4, first_epoch=1)
    report.trained(1, None)
    report.trained(2, 0.5)
    report.loss(1, 1.25)
    report.loss(2, float("nan"))  # not a number to show: not sent
    report.close()
    assert ChannelReader(channel).read() == [
        {"start": 1, "epochs": 4, "desc": "grappa P=2"},
        {"epoch": 1, "val_acc": None},
        {"epoch": 2, "val_acc": 0.5},
        {"epoch": 1, "loss": 1.25},
    ]


def test_a_line_still_being_written_waits_for_its_newline(tmp_path):
    channel = tmp_path / "epochs.jsonl"
    reader = ChannelReader(str(channel))
    assert reader.read() == []  # nothing written yet
    line = json.dumps({"epoch": 0, "loss": 0.5}) + "\n"
    with open(channel, "a") as f:
        f.write(line[:7])
        f.flush()
        assert reader.read() == []
        f.write(line[7:] + line[:3])
        f.flush()
        assert reader.read() == [{"epoch": 0, "loss": 0.5}]
        f.write(line[3:])
        f.flush()
        assert reader.read() == [{"epoch": 0, "loss": 0.5}]
    assert reader.read() == []


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00",
        b"[1, 2]",
        b'"epoch"',
        b"{}",
        b'{"epoch": -1}',
        b'{"epoch": "3"}',
        b'{"epoch": 1.0}',
        b'{"epoch": true}',
        b'{"epoch": 1, "loss": "0.5"}',
        b'{"epoch": 1, "loss": NaN}',
        b'{"epoch": 1, "val_acc": Infinity}',
        b'{"start": 0}',
        b'{"start": 0, "epochs": -2, "desc": "x"}',
        b'{"start": 0, "epochs": 2, "desc": 7}',
        b'{"epoch": 1, "lo',
    ],
)
def test_a_garbled_line_is_skipped(tmp_path, line):
    assert parse_line(line) is None
    channel = tmp_path / "epochs.jsonl"
    channel.write_bytes(line + b"\n" + b'{"epoch": 4}\n')
    assert ChannelReader(str(channel)).read() == [{"epoch": 4}]


def test_the_bar_state_follows_the_events_and_a_start_resets_it():
    state = BarState("grappa P=2", 5)
    for event in [
        {"start": 2, "epochs": 5, "desc": "grappa P=2"},
        {"epoch": 2, "val_acc": 0.4},
        {"epoch": 3, "val_acc": None},
        {"epoch": 2, "loss": 1.5},  # a loss comes one epoch late: the count stays
    ]:
        state.apply(event)
    assert (state.done, state.total, state.loss, state.val_acc) == (4, 5, 1.5, 0.4)
    assert state.postfix() == {"loss": "1.500", "val": "0.400"}
    state.apply({"start": 0, "epochs": 3, "desc": "isolated P=2"})  # train_many's next run
    assert (state.desc, state.done, state.total, state.loss, state.val_acc) == (
        "isolated P=2",
        0,
        3,
        None,
        None,
    )
    assert state.postfix() == {}


def test_the_callers_bar_draws_what_rank_0_reports_and_goes_away(fake_tqdm):
    with ParentBar(True, desc="grappa P=2", total=3, poll_seconds=0.01) as parent:
        assert progress_threads()
        report = epoch_report(parent.channel, None, desc="grappa P=2", epochs=3)
        for epoch in range(3):
            report.trained(epoch, 0.25 * epoch)
            report.loss(epoch, 2.0 - epoch)
        report.close()
        folder = os.path.dirname(parent.channel)
    (bar,) = fake_tqdm.made
    assert bar.kwargs["leave"] is False and bar.closed
    assert bar.drawn[-1] == ("grappa P=2", 3, 3, {"loss": "0.000", "val": "0.500"})
    assert not progress_threads() and not os.path.exists(folder)


def test_the_callers_bar_ends_with_the_block_when_it_raises(fake_tqdm):
    with pytest.raises(KeyboardInterrupt):
        with ParentBar(True, desc="grappa P=2", total=3) as parent:
            folder = os.path.dirname(parent.channel)
            raise KeyboardInterrupt
    assert fake_tqdm.made[0].closed and not progress_threads() and not os.path.exists(folder)


def test_no_bar_no_file_no_thread(fake_tqdm):
    with ParentBar(False, desc="grappa P=2", total=3) as parent:
        assert parent.channel == os.devnull and not progress_threads()
        # rank 0 reports into nothing
        report = epoch_report(parent.channel, True, desc="grappa P=2", epochs=3)
        report.trained(0, None)
        report.close()
    assert fake_tqdm.made == []


def test_without_a_caller_rank_0_draws_its_own_bar_as_progress_says(fake_tqdm, monkeypatch):
    """torchrun: no channel; rank 0's bar follows the same rule in its own process."""
    monkeypatch.setenv("ZG_PROGRESS", "0")
    assert epoch_report(None, None, desc="grappa P=2", epochs=3) is None
    assert epoch_report(None, False, desc="grappa P=2", epochs=3) is None
    report = epoch_report(None, True, desc="grappa P=2", epochs=3, first_epoch=1)
    (bar,) = fake_tqdm.made
    assert (bar.desc, bar.total, bar.kwargs["initial"]) == ("grappa P=2", 3, 1)
    report.trained(1, None)
    report.loss(1, 0.5)
    report.close()
    assert bar.drawn[-1] == ("grappa P=2", 2, 3, {"loss": "0.500"}) and bar.closed


def test_a_report_that_cannot_be_sent_never_stops_the_run():
    calls = []

    def broken(event):
        calls.append(event)
        raise OSError("No space left on device")

    report = progress.EpochReport(broken, lambda: None)
    report.trained(0, None)
    report.loss(0, 1.0)  # not tried again
    report.close()
    assert len(calls) == 1


# ----------------------------------------------------------------------------- when a bar shows


class Stream(io.StringIO):
    def __init__(self, terminal: bool):
        super().__init__()
        self.terminal = terminal

    def isatty(self):
        return self.terminal


PYTEST = {"PYTEST_CURRENT_TEST": "t.py::t (call)"}


@pytest.mark.parametrize(
    "setting, terminal, kernel, environ, shown",
    [
        (True, False, False, {"ZG_PROGRESS": "0"}, True),  # the setting decides
        (False, True, True, {"ZG_PROGRESS": "1"}, False),
        (None, True, False, {}, True),  # a person's terminal
        (None, True, False, PYTEST, True),  # a terminal under pytest is still a terminal
        (None, False, True, {}, True),  # a person's notebook
        (None, False, True, PYTEST, False),  # nbval's kernel
        (None, False, False, {}, False),  # a pipe, a log, CI
        (None, True, True, {"ZG_PROGRESS": "0"}, False),  # the unattended targets
        (None, False, False, {"ZG_PROGRESS": "yes", **PYTEST}, True),
    ],
)
def test_when_a_bar_shows(monkeypatch, setting, terminal, kernel, environ, shown):
    monkeypatch.setattr(progress, "_in_notebook_kernel", lambda: kernel)
    assert show_bar(setting, Stream(terminal), environ) is shown


def test_a_stream_without_a_terminal_answer_is_not_one(monkeypatch):
    monkeypatch.setattr(progress, "_in_notebook_kernel", lambda: False)
    closed = io.StringIO()
    closed.close()
    assert show_bar(None, closed, {}) is False
    assert show_bar(None, object(), {}) is False


def test_an_unknown_zg_progress_is_named_and_ignored(monkeypatch):
    monkeypatch.setattr(progress, "_in_notebook_kernel", lambda: False)
    with pytest.warns(UserWarning, match="ZG_PROGRESS='maybe'"):
        assert show_bar(None, Stream(True), {"ZG_PROGRESS": "maybe"}) is True


def test_here_pytest_is_no_notebook_kernel():
    assert progress._in_notebook_kernel() is False


# ----------------------------------------------------------------------------- the wiring


def test_train_hands_rank_0_the_callers_channel_or_nothing(monkeypatch, fake_tqdm):
    """grappa.train's launch, with the workers replaced by what rank 0 of each run does with
    its channel: the bar shows the runs that ask for one; the others write to os.devnull."""
    seen = []

    def fake_spawn(fn, world, args, **kwargs):
        g, jobs, _ = args
        for cfg, _, path, channel in jobs:
            seen.append(channel)
            report = epoch_report(
                channel, cfg.progress, desc=f"{cfg.trainer} P={world}", epochs=cfg.epochs
            )
            for epoch in range(cfg.epochs):
                report.trained(epoch, 0.5)
                report.loss(epoch, 1.0)
            report.close()
            with open(path, "w") as f:
                json.dump({"epochs": [], "path": path}, f)

    # (zg.grappa.train the attribute is the function; the module is zg.grappa.train by name)
    monkeypatch.setattr(importlib.import_module("zg.grappa.train"), "spawn", fake_spawn)
    g = tiny()
    grappa.train_many(
        g, [dict(epochs=2, progress=False, **RUN), dict(epochs=3, progress=True, **RUN)]
    )
    assert seen[0] == os.devnull and seen[1] != os.devnull
    (bar,) = fake_tqdm.made
    assert bar.drawn[-1] == ("grappa P=2", 3, 3, {"loss": "1.000", "val": "0.500"})
    assert bar.closed and not progress_threads() and not os.path.exists(seen[1])

    fake_tqdm.made = []
    seen.clear()
    grappa.train(g, epochs=2, progress=None, **RUN)  # here: pytest, stderr captured
    assert seen == [os.devnull] and fake_tqdm.made == []


# ----------------------------------------------------------------------------- real runs

SCRIPT = """
import json, os, sys, threading
from zg import grappa
import zg

if __name__ == "__main__":
    run = json.loads(sys.argv[1])
    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    for name, progress, zg_progress in [
        ("on", True, None), ("off", False, "1"), ("unattended", None, "0"), ("env-on", None, "1")
    ]:
        if zg_progress is None:
            os.environ.pop("ZG_PROGRESS", None)
        else:
            os.environ["ZG_PROGRESS"] = zg_progress
        # The caller's bar goes to its sys.stderr, here a file; the workers' stderr is the
        # process's file descriptor 2, which the test captures.
        before = sorted(t.name for t in threading.enumerate())
        with open(f"{name}.txt", "w") as sys.stderr:
            history = grappa.train(g, epochs=3, progress=progress, **run)
        sys.stderr = sys.__stderr__
        after = sorted(t.name for t in threading.enumerate())
        print(name, json.dumps([[e["epoch"] for e in history["epochs"]], before, after]), sep="\\t")
"""


@pytest.fixture(scope="module")
def watched_runs(tmp_path_factory):
    """Four 3-epoch runs in one process, each with its own caller's stderr file: progress
    True; False (ZG_PROGRESS=1); None with ZG_PROGRESS=0; None with ZG_PROGRESS=1."""
    tmp = tmp_path_factory.mktemp("watched")
    (tmp / "runs.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = processes.run(
        [sys.executable, str(tmp / "runs.py"), json.dumps(RUN)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    printed = {}
    for line in done.stdout.splitlines():
        name, _, value = line.partition("\t")
        printed[name] = json.loads(value)
    callers = {name: (tmp / f"{name}.txt").read_bytes().decode() for name in printed}
    return printed, callers, done.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_callers_bar_reaches_the_last_epoch_and_the_workers_draw_none(watched_runs):
    printed, callers, workers = watched_runs
    assert set(printed) == {"on", "off", "unattended", "env-on"}
    for name in ("on", "env-on"):
        epochs, before, after = printed[name]
        assert epochs == [0, 1, 2]
        assert "grappa P=2" in callers[name] and "3/3" in callers[name], callers[name]
        assert callers[name].endswith("\r"), "the bar is removed at the end (leave=False)"
        assert after == before, "a thread outlived the run"
    assert "grappa P=2" not in workers and "epoch/s" not in workers, workers[-2000:]
    assert "leaked semaphore" not in workers and "resource_tracker" not in workers, workers


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_progress_false_or_zg_progress_0_draws_nothing(watched_runs):
    printed, callers, workers = watched_runs
    for name in ("off", "unattended"):
        assert printed[name][0] == [0, 1, 2]
        assert callers[name] == "", callers[name]
        assert printed[name][2] == printed[name][1]
    assert "\r" not in workers


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_worker_failure_with_the_bar_on_raises_as_before_and_leaves_no_thread(
    tmp_path, monkeypatch
):
    """Worker 1 kills itself at the start of epoch 1 (after rank 0 reported epoch 0): train
    raises the kit's WorkerFailed naming the signal; no progress thread, bar or file is left."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the bar's folder goes
    monkeypatch.setenv(PLUGIN_ENV, PLUGIN)
    monkeypatch.setenv(FAULT_ENV, "kill:1:0:1")
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(WorkerFailed, match="SIGKILL|signal 9"):
        grappa.train(tiny(), epochs=3, progress=True, run_timeout=200, **RUN)
    assert not progress_threads()
    assert {t.name for t in threading.enumerate()} <= before
    assert not list(tmp_path.glob("zg-grappa-progress-*"))


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_under_torchrun_rank_0_draws_its_own_bar(tmp_path):
    """No process of zg's waits for torchrun's workers: rank 0 draws the bar on its stderr."""
    torchrun = Path(sys.executable).with_name("torchrun")
    command = (
        [str(torchrun)] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"]
    )
    dataset = dict(name="csbm", num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    config = dict(dataset=dataset, epochs=3, progress=True, **RUN)
    del config["workers"]  # torchrun's world size
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command += ["--standalone", "--nproc-per-node=2", "-m", "zg.grappa"]
    command += ["--config", str(tmp_path / "cfg.json"), "--out", str(tmp_path / "h.json")]
    done = processes.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=350)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-3000:]
    assert "grappa P=2" in stderr and "3/3" in stderr, stderr[-3000:]
    assert "leaked semaphore" not in stderr, stderr[-3000:]


NOTEBOOK_CELL = """
import threading
import zg
from zg import grappa
g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
history = grappa.train(g, epochs=3, **{run})
print("threads", sorted(t.name for t in threading.enumerate() if t.name.startswith("zg-")))
"""


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_in_a_notebook_kernel_the_bar_is_a_widget_in_the_cell(tmp_path):
    """A person's JupyterLab (a kernel that pytest did not start, no ZG_PROGRESS): the cell
    that calls grappa.train shows the bar as a widget that reaches 3/3, and no text bar."""
    manager = pytest.importorskip("jupyter_client.manager")
    pytest.importorskip("ipywidgets")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "ZG_PROGRESS")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    km, kc = manager.start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    try:
        msg_id = kc.execute(NOTEBOOK_CELL.format(run=RUN))
        streams, widgets, values, errors = [], [], [], []
        while True:
            message = kc.get_iopub_msg(timeout=300)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                streams.append(content["text"])
            elif kind == "display_data":
                widgets.append("application/vnd.jupyter.widget-view+json" in content["data"])
            elif kind == "comm_msg":
                values.append(str(content.get("data", {}).get("state", {}).get("value", "")))
            elif kind == "error":
                errors.append(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert not errors, errors
    assert widgets == [True], (widgets, streams)
    assert any("3/3" in value for value in values), values
    text = "".join(streams)
    assert "threads []" in text and "grappa P=2" not in text and "epoch/s" not in text, text
