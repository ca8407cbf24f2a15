"""The speed layer behind one door: numba kernels, each beside the torch reference it equals.

Where it sits: below the readable code. :class:`zg.EnvelopeSampler` and the layers of
:mod:`zg.models` are written in torch ops (what CUDA runs, and what a reader follows); on the
CPU two of their steps can run a compiled kernel instead, which computes the same thing:

==========================================  ===============================================
kernel                                      its torch reference
==========================================  ===============================================
:func:`zg.kernels.sampling.sample_fused`    :meth:`zg.EnvelopeSampler.sample_static`'s torch
  (sample + compact, every hop of a batch    ops: the same tensors, bit for bit
  in one compiled call)                      (``tests/core/test_kernels_sampling.py``)
:func:`zg.kernels.aggregate.neighbour_sum`  the explicit gather + weighted sum
  (``embedding_bag`` forward, CSR backward:  ``(h[nbr] * weight).sum(1)`` (what CUDA runs):
  the layers' neighbour aggregation)         the same sum up to summation order
                                             (``tests/core/test_kernels_aggregate.py``)
==========================================  ===============================================

Which one runs is an argument, never an environment variable or a process-wide switch:
``kernel`` of :class:`zg.EnvelopeSampler`, of every model and layer in :mod:`zg.models`
(``model.set_kernel(...)``) and of :class:`zg.Engine`, one of :data:`KERNELS`:

* ``"torch"`` (the default everywhere): the torch reference of every kernel, as CUDA runs it
  (the sampler's torch ops, the layers' explicit gather), on any device: the code a reader
  reads is the code that runs. SyncAudit sees into it; it does not see into a numba kernel,
  which runs below torch's dispatcher;
* ``"auto"``: the numba kernels on the CPU when numba imports, the torch reference otherwise
  (on CUDA, and on a CPU without numba, with a one-line notice once per process). ``zg train``
  and the benches opt into it;
* ``"fused"``: the numba kernels (a ValueError on CUDA, a RuntimeError without numba).

numba is optional: :func:`available` says whether it imported; ``import zg`` never needs it.
"""

from __future__ import annotations

from . import aggregate, sampling
from .choice import KERNELS, available, check, import_error, numba, resolve, set_threads

__all__ = [
    "KERNELS",
    "numba",
    "available",
    "import_error",
    "check",
    "resolve",
    "set_threads",
    "sampling",
    "aggregate",
]
