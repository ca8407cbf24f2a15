"""Argument checks shared by the Grappa modules: every error names the argument and the problem."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from ..graph import Graph


def int_arg(value: Any, name: str, *, low: int, high: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def real_arg(value: Any, name: str, *, low: float = -math.inf, high: float = math.inf,
             low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if (value <= low if low_open else value < low) or value > high:
        raise ValueError(f"{name} must be in {'(' if low_open else '['}{low}, {high}], got {value}")
    return value


def choice_arg(value: Any, name: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {list(choices)}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {list(choices)}")
    return value


def bool_arg(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return value


def graph_arg(g: Any, name: str = "g", *, train: bool = False) -> Graph:
    """A zg.Graph; with ``train=True`` it must also have features, labels and a train split."""
    if not isinstance(g, Graph):
        raise TypeError(f"{name} must be a zg.Graph, got {type(g).__name__}")
    if train:
        if g.x is None or g.y is None:
            raise ValueError(f"{name} needs features (x) and labels (y) to train on")
        if g.train_idx is None or g.train_idx.numel() == 0:
            raise ValueError(f"{name} has no training nodes (train_idx is empty or None)")
    return g
