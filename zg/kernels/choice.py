"""Which kernel runs: whether numba imported, the one place a kernel choice is resolved, and
numba's thread count. :mod:`zg.kernels` re-exports all of it; its two kernel modules import it
from here (not from the package, which imports them).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

try:  # numba is an optional dependency (the "fast" extra); without it the torch path runs
    import numba

    _IMPORT_ERROR: BaseException | None = None
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    numba = None
    _IMPORT_ERROR = exc

__all__ = ["KERNELS", "numba", "available", "import_error", "check", "resolve", "set_threads"]

KERNELS = ("auto", "fused", "torch")
_notice = {"given": False}  # the "numba is missing" notice, once per process (not a switch)


def available() -> bool:
    """True when numba imported, so the fused kernels can run."""
    return numba is not None


def import_error() -> BaseException | None:
    """Why numba did not import (None when it did)."""
    return _IMPORT_ERROR


def check(kernel: Any, name: str = "kernel") -> str:
    """``kernel`` if it is one of :data:`KERNELS` (a ValueError naming ``name`` otherwise);
    ``"fused"`` without numba is a RuntimeError. Device-independent: see :func:`resolve`."""
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, KERNELS))}, got {kernel!r}")
    if kernel == "fused" and numba is None:
        raise RuntimeError(
            f"{name}='fused' needs numba, which did not import ({_IMPORT_ERROR}); "
            f"pip install numba, or use {name}='torch'"
        )
    return kernel


def resolve(kernel: Any, device: Any) -> str:
    """What runs for the choice ``kernel`` on ``device``: ``"fused"`` or ``"torch"``.

    "auto" is "fused" on the CPU with numba, else "torch" (a one-line RuntimeWarning, once per
    process, when numba is missing on the CPU); "fused" on a non-CPU device is a ValueError
    (the torch path is the capturable one there); "torch" is "torch" everywhere.
    """
    check(kernel)
    device = torch.device(device)
    if kernel == "torch":
        return "torch"
    if kernel == "fused":
        if device.type != "cpu":
            raise ValueError(
                f"kernel='fused' runs on the CPU, not on {device} (use kernel='auto' "
                "or 'torch': the torch path is the capturable one)"
            )
        return "fused"
    if device.type != "cpu":
        return "torch"
    if numba is None:
        if not _notice["given"]:
            _notice["given"] = True
            warnings.warn(
                "zg: numba is not installed, so the CPU runs the torch path "
                "(slower; pip install numba for the fused kernels)",
                RuntimeWarning,
                stacklevel=3,
            )
        return "torch"
    return "fused"


def set_threads() -> int:
    """numba's thread count = torch's (the count DGL's sampler uses too); returns it."""
    threads = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != threads:
        numba.set_num_threads(threads)
    return threads
