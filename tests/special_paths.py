"""What the tests put at a path a tool or a reader is given: a directory, a named pipe, a
dangling link or a plain file (``make``), and a guard that turns a block (a FIFO opened for
reading or writing) into a failure (``alarm``, a fixture in tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path


def make(kind: str, path: Path) -> Path:
    """Put a ``kind`` ("directory" | "fifo" | "dangling" | "file") at ``path``; returns it."""
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere" / "x")
    elif kind == "file":
        path.write_text("keep me")
    return path
