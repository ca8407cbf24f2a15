"""zg.experiments._progress: whether a long measurement shows a progress bar, and the bar.

Where it sits: under the measurements that take a while in a notebook cell at full size
(:func:`zg.experiments.run_trainers`, :func:`~zg.experiments.train_together`,
:func:`~zg.experiments.profile_modes`, :func:`~zg.experiments.sample_counts`,
:func:`~zg.experiments.overflow_curve`, :func:`~zg.experiments.sweep_partitions`,
:func:`~zg.experiments.bias_vs_workers`, :func:`~zg.experiments.shrink_sweep`) and
:meth:`zg.Engine.fit`. A person running a notebook sees a ``tqdm.auto`` bar (a widget in
JupyterLab, text in a terminal) that goes away when the measurement ends; an unattended run (the
test suite, nbval, the reports, CI) sees none, so executed notebooks and logs hold no bar.

The one switch, :func:`progress_enabled` (defined in :mod:`zg._progress_switch`, which
Grappa's bar reads too), reads ``ZG_PROGRESS``:

    ZG_PROGRESS=0 (false, off, no)   no bar: what the Makefile's test, report and check targets set
    ZG_PROGRESS=1 (true, on, yes)    a bar, under pytest too
    unset (or empty)                 a bar, except under pytest (``PYTEST_CURRENT_TEST``, which
                                     the kernels nbval and the tests start inherit)

Without tqdm (it comes with the ``lab`` extra) there is never a bar, and nothing fails.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import Any

from .._polled_bar import PolledBar
from .._progress_switch import OFF, ON, progress_enabled

__all__ = ["progress_enabled", "progress", "progress_bar", "RunProgress", "OFF", "ON"]


def _tqdm() -> Any:
    """tqdm.auto's bar class, or None when the bar is off or tqdm is not installed."""
    if not progress_enabled():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def progress(
    iterable: Iterable[Any], *, desc: str, total: int | None = None, unit: str = "step"
) -> Iterable[Any]:
    """``iterable`` itself, or wrapped in a bar of ``total`` steps (default: its length) that
    ticks once per item, when :func:`progress_enabled`. The bar is removed when it ends."""
    tqdm = _tqdm()
    if tqdm is None:
        return iterable
    return tqdm(iterable, desc=desc, total=total, unit=unit, leave=False)


class _NoBar:
    """What :func:`progress_bar` yields when the bar is off: ``update`` does nothing."""

    def update(self, n: int = 1) -> None:
        pass


@contextlib.contextmanager
def progress_bar(total: int, *, desc: str, unit: str = "step") -> Any:
    """A bar of ``total`` steps to ``update(n)`` by hand inside the ``with`` block (a no-op
    object when :func:`progress_enabled` is False); removed when the block ends."""
    tqdm = _tqdm()
    if tqdm is None:
        yield _NoBar()
        return
    bar = tqdm(total=total, desc=desc, unit=unit, leave=False)
    try:
        yield bar
    finally:
        bar.close()


class RunProgress(PolledBar):
    """A bar that ticks once per finished run of work done in other processes (the worker
    processes of :func:`zg.grappa.train_many`, which report nothing back until they end).

    :meth:`watch` gives a run's ``train()`` options a history file in a temporary folder (unless
    it names its own ``history_path``); a thread polls for those files (rank 0 writes each when
    its run ends) while the ``with`` block runs. :meth:`forget` sets the ``path`` of a history
    back to None when the file was the bar's (it is removed with the folder, as
    :func:`zg.grappa.train_many` removes its own). With the bar off, both pass their argument
    through unchanged and nothing is started::

        with RunProgress(len(runs), desc="training runs") as bar:
            histories = [bar.forget(h) for h in train_many(g, [bar.watch(o) for o in runs])]
    """

    def __init__(self, total: int, *, desc: str, unit: str = "run", poll_seconds: float = 0.5):
        super().__init__(_tqdm(), poll_seconds)
        self.total, self.desc, self.unit = total, desc, unit
        self._files: list[str] = []
        self._done = 0

    def _open(self, tqdm: Any) -> Any:
        return tqdm(total=self.total, desc=self.desc, unit=self.unit, leave=False)

    def watch(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` with a history file the bar watches (a copy; unchanged when off)."""
        if self.folder is None or options.get("history_path") is not None:
            return options
        path = os.path.join(self.folder, f"run{len(self._files)}.json")
        self._files.append(path)
        return {**options, "history_path": path}

    def forget(self, history: dict[str, Any]) -> dict[str, Any]:
        """``history`` with ``path`` None when it names the bar's own temporary file."""
        if history.get("path") in self._files:
            history["path"] = None
        return history

    def _advance(self) -> None:
        done = sum(os.path.exists(path) for path in list(self._files))
        if done > self._done:
            self.bar.update(done - self._done)
            self._done = done
