"""Argument checks shared by the Grappa modules: every error names the argument and the problem."""

from __future__ import annotations

from typing import Any, Sequence

from .._checks import int_arg, real_arg  # noqa: F401  (the shared checks, re-exported)
from ..graph import Graph


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
