"""zg.grappa.lab: the Grappa experiments the notebooks run, as functions returning plain
measurements (the Grappa half's counterpart of :mod:`zg.lab`).

Where it sits: between :mod:`zg.grappa` and notebooks 05-09. A notebook cell that would be
longer than a screen is a function here; the notebook calls it, hands the result to a figure
builder in :mod:`zg.viz` and asserts its claim. Nothing here plots, so every function is
tested with the core alone. Every number returned was measured when the function ran.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import torch

__all__: List[str] = []

# ----------------------------------------------------------------------------- notebooks 05-06
# (partitions and isolation; gradient-only training)


# ----------------------------------------------------------------------------- notebooks 07-08
# (coverage correction; repartitioning and scale)
