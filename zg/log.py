"""The zg loggers: ``logging.getLogger("zg")`` and its children, silent unless shown.

Every module logs to a child of ``zg`` (``zg.checkpoint``, ``zg.grappa.train``, ...); the
``zg`` logger holds a :class:`logging.NullHandler`, as a library's should, so nothing is printed
unless the application configures logging (``logging.basicConfig(level=logging.INFO)``) or
calls :func:`show`, as the ``zg`` commands do::

    import logging, zg
    zg.log.show()                                  # INFO and above on stderr: "zg: ..."
    logging.getLogger("zg").setLevel(logging.DEBUG)  # more
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

__all__ = ["LOGGER", "get", "show"]

LOGGER = logging.getLogger("zg")
LOGGER.addHandler(logging.NullHandler())

_SHOWN = "_zg_shown"  # marks the handler show() added, so a second call replaces it


def get(name: str) -> logging.Logger:
    """The ``zg`` logger's child for ``name`` (a module's ``__name__``: ``zg.x`` as it is,
    another name as ``zg.<name>``)."""
    if name != "zg" and not name.startswith("zg."):
        name = f"zg.{name}"
    return logging.getLogger(name)


def show(level: int | str = logging.INFO, stream: TextIO | None = None) -> logging.Handler:
    """Print the ``zg`` records at ``level`` and above on ``stream`` (default: ``sys.stderr`` as
    it is at each record) as ``zg: message`` lines. Calling it again replaces the handler it
    added before (never two copies of a line). Returns the handler."""
    for handler in [h for h in LOGGER.handlers if getattr(h, _SHOWN, False)]:
        LOGGER.removeHandler(handler)
    handler = _StderrHandler() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("zg: %(message)s"))
    setattr(handler, _SHOWN, True)
    LOGGER.addHandler(handler)
    LOGGER.setLevel(level)
    return handler


class _StderrHandler(logging.StreamHandler):
    """A StreamHandler on whatever ``sys.stderr`` is when a record is emitted (a test or a
    notebook may replace it after :func:`show`)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass
