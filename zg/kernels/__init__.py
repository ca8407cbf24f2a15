"""The speed layer behind one door: numba kernels, each beside the torch reference it equals.

Where it sits: below the readable code. :class:`zg.EnvelopeSampler` and the layers of
:mod:`zg.models` are written in torch ops (what CUDA runs, and what a reader follows); on the
CPU two of their steps can run a compiled kernel instead, which computes the same thing:

==========================================  ===============================================
kernel                                      its torch reference
==========================================  ===============================================
:func:`zg.kernels.sampling.sample_fused`    :meth:`zg.EnvelopeSampler.sample_static`'s torch
  (sample + compact, every hop of a batch    ops: the same tensors, bit for bit
  in one compiled call)                      (``tests/test_kernels_sampling.py``)
:func:`zg.kernels.aggregate.neighbour_sum`  the explicit gather + weighted sum
  (``embedding_bag`` forward, CSR backward:  ``(h[nbr] * weight).sum(1)`` (what CUDA runs):
  the layers' neighbour aggregation)         the same sum up to summation order
                                             (``tests/test_kernels_aggregate.py``)
==========================================  ===============================================

Which one runs is an argument, never an environment variable or a process-wide switch:
``kernel`` of :class:`zg.EnvelopeSampler`, of every model and layer in :mod:`zg.models`
(``model.set_kernel(...)``) and of :class:`zg.Engine`, one of :data:`KERNELS`:

* ``"auto"``: the numba kernels on the CPU when numba imports, the torch reference otherwise
  (on CUDA, and on a CPU without numba, with a one-line notice once per process);
* ``"fused"``: the numba kernels (a ValueError on CUDA, a RuntimeError without numba);
* ``"torch"``: the torch reference of every kernel, as CUDA runs it (the sampler's torch ops,
  the layers' explicit gather), on any device. SyncAudit sees into it; it does not see into
  a numba kernel, which runs below torch's dispatcher.

numba is optional: :func:`available` says whether it imported; ``import zg`` never needs it.
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

__all__ = [
    "KERNELS",
    "available",
    "import_error",
    "check",
    "resolve",
    "set_threads",
    "sampling",
    "aggregate",
]

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


from . import aggregate, sampling  # noqa: E402  (they import numba from here)
