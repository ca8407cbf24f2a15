"""Grappa's progress bar: rank 0 reports each epoch, the calling process draws the bar.

Where it sits: between :func:`zg.grappa.train` (the calling process, which waits for its
workers) and rank 0 of the run (:mod:`zg.grappa.worker`). A worker's stderr is not where a
person looks: in JupyterLab it is the Jupyter server's terminal (or raw text under the cell,
where the kernel forwards its children's output), never a widget. So the process that called
``grappa.train`` (a notebook kernel, ``zg grappa``, a script) draws one ``tqdm.auto`` bar (a
widget in JupyterLab, text on a terminal), removed when the run ends, and the workers draw
none. Rank 0 reports through a small file, the channel, one JSON object a line, appended:

    {"start": 2, "epochs": 5, "desc": "grappa P=2"}   a run begins (at epoch 2: it resumed)
    {"epoch": 3, "val_acc": 0.71}                     rank 0 finished epoch 3's training and
                                                      evaluation (val_acc null: not evaluated)
    {"epoch": 3, "loss": 0.82}                        epoch 3's loss, once its exchange
                                                      completes (a host read rank 0 makes
                                                      anyway, at the next epoch's exchange)

Nothing here adds a device sync or a collective to the loop: the numbers are the host values
rank 0 already holds. A thread of the calling process polls the file while it waits for the
workers (:class:`ParentBar`); it reads complete lines only (a line still being written waits for
its newline) and skips a line that is not one of the above, so a torn or garbled write changes
nothing. A ``start`` line resets the bar: :func:`zg.grappa.train_many` runs its runs one after the
other in the same workers, one bar each in turn. The thread is joined and the bar closed when
the workers end, whether the run returned, a worker failed (its error is raised as before) or
the caller was interrupted.

When is there a bar (:func:`show_bar`, the one rule; ``TrainConfig.progress``):

    progress=True     a bar
    progress=False    none
    progress=None     (the default) ZG_PROGRESS=0 (false, off, no): none, as the Makefile's
                      unattended targets set; ZG_PROGRESS=1 (true, on, yes): a bar; unset: a
                      bar where a person watches the calling process, that is its stderr is a
                      terminal or it is a notebook kernel (Jupyter's IPython kernel) that pytest
                      or nbval did not start (``PYTEST_CURRENT_TEST``), none otherwise (a pipe,
                      a log file, CI)

Under ``torchrun`` (several machines, :func:`zg.grappa.launch.init_from_env`) no process of
zg's waits for the workers, so rank 0 draws the bar itself, on its own stderr, by the same rule
read in its own process (:func:`epoch_report` with no channel).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from .._polled_bar import PolledBar
from .._progress_switch import OFF, ON, progress_enabled

__all__ = [
    "show_bar",
    "EpochReport",
    "epoch_report",
    "ParentBar",
    "ChannelReader",
    "BarState",
    "parse_line",
]

# How often the calling process reads the channel (seconds): a bar need not be faster, and a
# run that ends waits at most this long for the thread to stop.
POLL_SECONDS = 0.25


def _in_notebook_kernel() -> bool:
    """Whether this process is a Jupyter kernel (IPython's, as ``tqdm.auto`` asks): IPython is
    imported and its shell runs in an ``IPKernelApp``."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
        return shell is not None and "IPKernelApp" in shell.config
    except Exception:  # an IPython that answers otherwise: no kernel to draw in
        return False


def show_bar(
    setting: bool | None,
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Whether this process draws a Grappa run's bar (module docstring: the rule).
    ``setting``: ``TrainConfig.progress``; ``stream``: where the bar goes (default
    ``sys.stderr``); ``environ``: the environment (default ``os.environ``)."""
    if setting is not None:
        return bool(setting)
    env = os.environ if environ is None else environ
    value = env.get("ZG_PROGRESS", "").strip().lower()
    if value in OFF or value in ON:
        return value in ON
    if value:
        progress_enabled(env)  # names the value it does not know, then it is ignored
    stream = sys.stderr if stream is None else stream
    try:
        terminal = stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        terminal = False
    return terminal or (_in_notebook_kernel() and "PYTEST_CURRENT_TEST" not in env)


@functools.cache
def _tqdm() -> Any:
    """``tqdm.auto``'s class (a widget in a notebook, text elsewhere) without its monitor
    thread (the bar is redrawn by hand at every change, and a thread tqdm starts would outlive
    the run); None without tqdm."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return type("GrappaBar", (tqdm,), {"monitor_interval": 0})


# ----------------------------------------------------------------------------- the channel


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _number(value: Any) -> bool:
    return value is None or (type(value) in (int, float) and math.isfinite(value))


def parse_line(line: bytes | str) -> dict[str, Any] | None:
    """One line of the channel -> its event, or None when it is not one (not JSON, not an
    object, a field of the wrong kind): such a line is skipped."""
    try:
        event = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(event, dict):
        return None
    if "start" in event:
        desc = event.get("desc", "")
        if _count(event["start"]) and _count(event.get("epochs")) and isinstance(desc, str):
            return {"start": event["start"], "epochs": event["epochs"], "desc": desc}
        return None
    if not _count(event.get("epoch")):
        return None
    out = {"epoch": event["epoch"]}
    for name in ("loss", "val_acc"):
        if name in event:
            if not _number(event[name]):
                return None
            out[name] = event[name]
    return out


class ChannelReader:
    """The calling process's side of the channel: :meth:`read` returns the events of the lines
    completed since the last call (a line without its newline yet is kept for the next)."""

    def __init__(self, path: str):
        self.path, self.offset, self.partial = path, 0, b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:  # not written yet
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [event for event in map(parse_line, lines) if event is not None]


class BarState:
    """What the bar shows, from the events in order: the run's description and epochs, the
    epochs finished (one more than the last epoch reported), the latest loss and accuracy."""

    def __init__(self, desc: str = "", total: int = 0):
        self.desc, self.total, self.done = desc, total, 0
        self.loss: float | None = None
        self.val_acc: float | None = None

    def apply(self, event: Mapping[str, Any]) -> None:
        if "start" in event:  # a run begins: everything before was another run's
            self.desc, self.total, self.done = event["desc"], event["epochs"], event["start"]
            self.loss = self.val_acc = None
            return
        self.done = max(self.done, event["epoch"] + 1)
        if event.get("loss") is not None:
            self.loss = event["loss"]
        if event.get("val_acc") is not None:
            self.val_acc = event["val_acc"]

    def postfix(self) -> dict[str, str]:
        shown = {}
        if self.loss is not None:
            shown["loss"] = f"{self.loss:.3f}"
        if self.val_acc is not None:
            shown["val"] = f"{self.val_acc:.3f}"
        return shown


class _Drawer:
    """Applies events to a :class:`BarState` and draws it on a tqdm bar."""

    def __init__(self, bar: Any, state: BarState):
        self.bar, self.state = bar, state

    def __call__(self, event: Mapping[str, Any]) -> None:
        self.draw([event])

    def draw(self, events: list[Mapping[str, Any]]) -> None:
        if not events:
            return
        state, bar = self.state, self.bar
        for event in events:
            if "start" in event:
                bar.reset(total=event["epochs"])
                bar.set_description(event["desc"], refresh=False)
            state.apply(event)
        bar.n = state.done
        bar.set_postfix(state.postfix(), refresh=False)
        bar.refresh()


class EpochReport:
    """Rank 0's side (made by :func:`epoch_report`, which sends the ``start`` event):
    :meth:`trained` and :meth:`loss` make the channel's events and hand each to ``send`` (a
    line appended to the channel, or rank 0's own bar under torchrun). Reporting never stops a
    run: a ``send`` that fails is not called again."""

    def __init__(self, send: Callable[[dict[str, Any]], None], close: Callable[[], None]):
        self._send, self._close = send, close

    def _emit(self, event: dict[str, Any]) -> None:
        if self._send is None:
            return
        try:
            self._send(event)
        except Exception:  # a full disk, a closed bar: the run goes on without its bar
            self._send = None

    def trained(self, epoch: int, val_acc: float | None) -> None:
        self._emit({"epoch": epoch, "val_acc": val_acc})

    def loss(self, epoch: int, loss: float) -> None:
        if isinstance(loss, (int, float)) and math.isfinite(loss):
            self._emit({"epoch": epoch, "loss": loss})

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._close()
        self._send = None


def epoch_report(
    channel: str | None,
    setting: bool | None,
    *,
    desc: str,
    epochs: int,
    first_epoch: int = 0,
) -> EpochReport | None:
    """Rank 0's report of a run of ``epochs`` epochs that starts at ``first_epoch`` (a resumed
    run), its bar titled ``desc``; the ``start`` event is sent here. ``channel``: the file the
    calling process reads (spawned workers: always given, ``os.devnull`` when it draws no bar);
    None: no calling process waits (torchrun), so rank 0 draws its own bar on its stderr when
    :func:`show_bar` says so for ``setting``, else None (nothing to report to)."""
    start = {"start": first_epoch, "epochs": epochs, "desc": desc}
    if channel is not None:
        f = open(channel, "a", encoding="utf-8")  # open for the whole run

        def send(event: dict[str, Any]) -> None:
            f.write(json.dumps(event) + "\n")
            f.flush()

        report = EpochReport(send, f.close)
        report._emit(start)
        return report
    tqdm = _tqdm() if show_bar(setting) else None
    if tqdm is None:
        return None
    # One bar in this process: a thread lock is all it needs. tqdm's default lock would add a
    # multiprocessing semaphore, which a worker's os._exit (launch.exit_worker) never releases:
    # the resource tracker then reports it leaked when the run ends.
    tqdm.set_lock(threading.RLock())
    bar = tqdm(total=epochs, initial=first_epoch, desc=desc, leave=False, unit="epoch", smoothing=0)
    state = BarState()
    state.apply(start)
    return EpochReport(_Drawer(bar, state), bar.close)


class ParentBar(PolledBar):
    """The calling process's bar for the workers it is about to start (module docstring)::

        with ParentBar(show_bar(cfg.progress), desc="grappa P=2", total=cfg.epochs) as bar:
            spawn(...)  # rank 0: run_worker(..., progress_file=bar.channel)

    ``channel``: the file rank 0 appends to (``os.devnull`` when ``show`` is False or tqdm is
    missing: then no file, thread or bar exists). Inside the block a thread reads it every
    :data:`POLL_SECONDS`; on leaving, the thread is joined, the last lines drawn, the bar closed
    (``leave=False``: it goes away) and the file removed, whatever ended the block."""

    folder_prefix = "zg-grappa-progress-"
    thread_name = "zg-grappa-progress"

    def __init__(self, show: bool, *, desc: str, total: int, poll_seconds: float = POLL_SECONDS):
        super().__init__(_tqdm() if show else None, poll_seconds)
        self.show, self.desc, self.total = show, desc, total
        self.channel = os.devnull

    def _open(self, tqdm: Any) -> Any:
        self.channel = os.path.join(self.folder, "epochs.jsonl")
        self._reader = ChannelReader(self.channel)
        # smoothing=0: the rate is the run's average (the lines arrive a poll at a time).
        bar = tqdm(total=self.total, desc=self.desc, unit="epoch", leave=False, smoothing=0)
        self._drawer = _Drawer(bar, BarState(self.desc, self.total))
        return bar

    def _advance(self) -> None:
        self._drawer.draw(self._reader.read())
