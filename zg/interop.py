"""Lazy access to DGL. The core of zg never imports DGL at module level; interop functions and
zg/baselines/ call :func:`require_dgl` when they need it, so ``import zg`` works on any
PyTorch >= 2.2 without DGL installed."""

from __future__ import annotations

import importlib.util
import os


def has_dgl() -> bool:
    """True if DGL can be imported (without importing it)."""
    return importlib.util.find_spec("dgl") is not None


def require_dgl():
    """Import and return the ``dgl`` module, or raise ImportError saying how to get it."""
    os.environ.setdefault("DGLBACKEND", "pytorch")
    try:
        import dgl  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(
            "this feature needs DGL, which is not installed. The reference environment has it: "
            "run `make env` (or `pip install -r requirements/reference.txt`). DGL 2.1.0 works "
            f"only with torch 2.2.1. ({exc})"
        ) from None
    return dgl
