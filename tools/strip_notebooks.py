#!/usr/bin/env python
"""Keep notebooks stored without outputs: strip them, or check that they are stripped.

    python tools/strip_notebooks.py                   # strip notebooks/*.ipynb in place
    python tools/strip_notebooks.py --check           # exit 1 if any notebook is not stripped
    python tools/strip_notebooks.py path/to/x.ipynb   # just these

A stripped notebook has, in every code cell, no outputs and no execution count, and no
execution timings or scroll/collapse state in cell metadata; the notebook metadata holds no
widget state. The outputs are what `make report` produces (reports/*.html); the notebooks are
the source. Needs only nbformat. Run it before committing (or as a pre-commit hook:
`python tools/strip_notebooks.py --check`).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import List

CELL_METADATA_NOISE = ("execution", "ExecuteTime", "collapsed", "scrolled")
NOTEBOOK_METADATA_NOISE = ("widgets",)
DEFAULT_GLOB = "notebooks/*.ipynb"


def strip(nb) -> List[str]:
    """Strip ``nb`` (an nbformat NotebookNode) in place; return what was removed (empty: clean)."""
    removed = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            if cell.get("outputs"):
                removed.append(f"cell {i}: {len(cell.outputs)} output(s)")
            cell.outputs = []
            if cell.get("execution_count") is not None:
                removed.append(f"cell {i}: execution count {cell.execution_count}")
            cell.execution_count = None
        elif "outputs" in cell or "execution_count" in cell:  # not valid outside code cells
            removed.append(f"cell {i}: outputs on a {cell.cell_type} cell")
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
        for key in CELL_METADATA_NOISE:
            if key in cell.get("metadata", {}):
                removed.append(f"cell {i}: metadata {key!r}")
                del cell.metadata[key]
    for key in NOTEBOOK_METADATA_NOISE:
        if key in nb.metadata:
            removed.append(f"notebook metadata {key!r}")
            del nb.metadata[key]
    return removed


def problems(nb) -> List[str]:
    """What :func:`strip` would remove from ``nb``, without changing it."""
    return strip(copy.deepcopy(nb))


def notebooks(paths: List[str], root: Path) -> List[Path]:
    if paths:
        return [Path(p) for p in paths]
    return sorted(root.glob(DEFAULT_GLOB))


def main(argv=None) -> int:
    import nbformat

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help=f"notebooks (default: {DEFAULT_GLOB})")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if any notebook has outputs")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    paths = notebooks(args.paths, root)
    dirty = 0
    for path in paths:
        nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
        found = problems(nb) if args.check else strip(nb)
        if not found:
            continue
        dirty += 1
        if args.check:
            print(f"{path}: not stripped ({len(found)} item(s)): " + "; ".join(found[:5])
                  + (" ..." if len(found) > 5 else ""))
        else:
            nbformat.write(nb, path)
            print(f"{path}: stripped ({len(found)} item(s))")
    if args.check and dirty:
        print(f"{dirty} notebook(s) hold outputs; run: python tools/strip_notebooks.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
