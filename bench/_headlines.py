"""The headline metrics of a result file: each bench declares its own, beside the code that
writes its JSON (a ``headlines(doc) -> list`` function in ``bench/<bench>.py``); this module
only finds that function.

``bench/_machine.write_json`` calls :func:`headlines` when a bench writes its file, and
``tests/bench/test_results_schema.py`` recomputes every committed file's metrics with it, so a
file's headline list is always what its bench's own function gives.

    from bench._headlines import headlines
    doc["headline"] = headlines(doc)
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["bench_headlines", "headlines"]

BENCH = Path(__file__).resolve().parent


def _module(bench: str):
    """bench/<bench>.py as a module: the running script itself when it is that bench, else
    loaded once under a private name (its import-time environment settings are its own run's,
    so they are undone here)."""
    path = BENCH / f"{bench}.py"
    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None) and Path(main.__file__).resolve() == path:
        return main
    name = f"_zg_bench_{bench}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        environ = dict(os.environ)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        finally:
            os.environ.clear()
            os.environ.update(environ)
    return sys.modules[name]


def bench_headlines(bench: str) -> Callable[[dict], list] | None:
    """bench/<bench>.py's ``headlines`` function (None: no such bench, or it declares none)."""
    if not (BENCH / f"{bench}.py").is_file() or bench.startswith("_"):
        return None
    return getattr(_module(bench), "headlines", None)


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of ``doc`` (a zg-result/1 document), from its bench's own function;
    a non-finite value is dropped, a name computed twice is an error."""
    fn = bench_headlines(doc["bench"])
    out = [m for m in (fn(doc) if fn else []) if m["value"] is None or math.isfinite(m["value"])]
    seen = set()
    for m in out:
        if m["name"] in seen:
            raise ValueError(f"{doc['bench']}: headline metric {m['name']!r} computed twice")
        seen.add(m["name"])
    return out
