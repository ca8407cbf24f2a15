"""Argument checks shared across the package: every error names the argument and the problem."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np


def int_arg(value: Any, name: str, *, low: int, high: Optional[int] = None) -> int:
    """``value`` as an int in ``[low, high]`` (bools and floats refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def real_arg(value: Any, name: str, *, low: float = -math.inf, high: float = math.inf,
             low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite float in the interval from ``low`` to ``high`` (each end closed
    unless ``*_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return value
