"""Lazy access to DGL and PyTorch Geometric. The core of zg never imports either at module
level; interop functions and zg/baselines/ call :func:`require_dgl` / :func:`require_pyg` when
they need one, so ``import zg`` works on any PyTorch >= 2.2 without them installed."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# ogb checks PyPI for a newer ogb in a background thread when it is first imported (through
# the package "outdated"): a network call, and on a machine without network a thread the
# interpreter waits for at exit. DGL imports ogb too (dgl.data.lrgb) whenever ogb is
# installed, so every DGL and ogb import in zg goes through blocked_imports(VERSION_CHECK).
VERSION_CHECK = ("outdated",)


@contextmanager
def blocked_imports(*names: str) -> Iterator[None]:
    """Make the modules ``names`` unimportable while the block runs.

    A None entry in ``sys.modules`` makes ``import name`` raise ImportError, so a package that
    imports an optional module inside ``try: ... except ImportError`` skips it, as if it were
    not installed. Modules already imported are left alone, and the entries are removed
    afterwards, so later imports work normally.
    """
    blocked = [name for name in names if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def require_dgl():
    """Import and return the ``dgl`` module, or raise ImportError saying how to get it."""
    os.environ.setdefault("DGLBACKEND", "pytorch")
    try:
        with blocked_imports(*VERSION_CHECK):
            import dgl
    except ImportError as exc:
        raise ImportError(
            "this feature needs DGL, which is not installed. The reference environment has it: "
            "run `make env` (or `pip install -r requirements/reference.txt`). DGL 2.1.0 works "
            f"only with torch 2.2.1. ({exc})"
        ) from None
    return dgl


def has_dgl() -> bool:
    """True if DGL is installed (found without importing it: importing DGL loads its C++ library)."""
    return importlib.util.find_spec("dgl") is not None


def dgl_or_skip(what: str) -> bool:
    """True if DGL is installed; otherwise print one line saying ``what`` is skipped, and why.

    The notebooks ask this before their DGL baseline rows, so that without DGL (the modern
    environment, a hosted notebook, any torch but 2.2.1) they run every zg row and say what they
    left out, instead of stopping. In the reference environment (``ZG_REFERENCE_ENV=1``, set by
    ``make test``) DGL is pinned, so a missing DGL raises :func:`require_dgl`'s ImportError there.
    """
    if has_dgl():
        return True
    if os.environ.get("ZG_REFERENCE_ENV") == "1":
        require_dgl()
    print(
        f"skipped: {what}, because DGL is not installed (DGL 2.1.0 needs torch 2.2.1; "
        "`make env` builds the reference environment, which has both); every zg row runs"
    )
    return False


def has_pyg() -> bool:
    """True if PyTorch Geometric can be imported (without importing it)."""
    return importlib.util.find_spec("torch_geometric") is not None


def require_pyg():
    """Import and return the ``torch_geometric`` module, or raise ImportError saying how to get it."""
    try:
        with blocked_imports(*VERSION_CHECK):
            import torch_geometric
            import torch_geometric.data
    except ImportError as exc:
        raise ImportError(
            "this feature needs PyTorch Geometric, which is not installed: "
            f"`pip install -e .[pyg]` (pure Python; both environments pin it). ({exc})"
        ) from None
    return torch_geometric
