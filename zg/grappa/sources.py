"""Deprecated: this module is now :mod:`zg.grappa.local` (a Grappa worker's *local data*).

Kept for one release so that ``from zg.grappa.sources import IsolatedSource`` still works:
each name read from here warns (DeprecationWarning) and gives the new one,
``IsolatedSource`` -> :class:`zg.grappa.local.LocalData`, ``worker_batches`` ->
:func:`zg.grappa.local.worker_batches`. "Source" also names the Engine's sampler and a block's
source nodes, hence the new name.
"""

from __future__ import annotations

import warnings
from typing import Any

from . import local as _local

__all__ = ["IsolatedSource", "worker_batches"]  # noqa: F822  (read through __getattr__)

_MOVED = {"IsolatedSource": "LocalData", "worker_batches": "worker_batches"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        new = _MOVED[name]
        warnings.warn(
            f"zg.grappa.sources.{name} is now zg.grappa.local.{new} (a worker's local data); "
            "zg.grappa.sources goes in zg 0.6",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_local, new)
    raise AttributeError(f"module 'zg.grappa.sources' has no attribute {name!r}")
