"""zg._polled_bar: a progress bar drawn in this process from files that other processes (or this
process's own runs) write, polled by one thread.

Where it sits: below the two bars that watch files, :class:`zg.experiments._progress.RunProgress`
(one tick per finished run's history file) and :class:`zg.grappa.progress.ParentBar` (a Grappa
run's epochs, from rank 0's JSONL channel). Each says what its bar is and how to read its files;
this class owns their life: a temporary folder, the bar, the polling thread, and a clean end
whatever ended the block. Nothing here reads ``ZG_PROGRESS``: the caller decides whether a bar
shows (:mod:`zg._progress_switch`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from typing import Any

__all__ = ["PolledBar"]


class PolledBar:
    """The life of a polled bar (a context manager)::

        with SomeBar(...) as bar:   # bar.folder: where the watched files go (None: no bar)
            ...                     # a thread calls bar._advance() every poll_seconds

    Subclasses give :meth:`_open` (the tqdm class -> the bar, drawn in ``self.folder``'s
    files' terms) and :meth:`_advance` (read the files, update the bar). On leaving, whatever
    ended the block: the thread is stopped and joined, the last state drawn, the bar closed and
    the folder removed. An error while drawing never ends the caller's run."""

    folder_prefix = "zg-progress-"
    thread_name = "zg-progress"

    def __init__(self, tqdm: Any, poll_seconds: float):
        self._tqdm_class, self.poll_seconds = tqdm, poll_seconds
        self.folder: str | None = None
        self.bar: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _open(self, tqdm: Any) -> Any:
        """The bar (a ``tqdm`` instance), made once ``self.folder`` exists."""
        raise NotImplementedError

    def _advance(self) -> None:
        """Read the watched files and bring the bar up to date."""
        raise NotImplementedError

    def __enter__(self) -> PolledBar:
        if self._tqdm_class is None:  # no bar wanted, or tqdm missing: nothing starts
            return self
        self.folder = tempfile.mkdtemp(prefix=self.folder_prefix)
        try:
            self.bar = self._open(self._tqdm_class)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
            raise
        self._thread = threading.Thread(target=self._poll, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            with contextlib.suppress(Exception):  # a bar never ends a run
                self._advance()

    def __exit__(self, *exc: Any) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        with contextlib.suppress(Exception):
            self._advance()
        with contextlib.suppress(Exception):
            self.bar.close()
        shutil.rmtree(self.folder, ignore_errors=True)
