"""Shared by the benchmarks: a note of the machine a result came from, and an atomic JSON writer.

Every benchmark writes ``bench/results/<name>.json`` with ``{"machine": machine_note(), ...}`` so a
number is never separated from where it was measured.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


# One implementation of the machine note, shared with the notebooks
# (zg.experiments.machine_note), and one atomic writer, shared with the package
# (zg._io.atomic_write).
from zg._io import atomic_write
from zg.experiments.machine import machine_note

__all__ = ["RESULTS", "SOURCE", "machine_note", "source_version", "table", "write_json"]


def source_version() -> dict:
    """The commit the measured code came from, and whether the tree had other changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "zg", "bench"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "modified": None}
    return {"commit": commit or None, "modified": bool(dirty)}


# Read when the benchmark starts (it imports this module first), not when it ends.
SOURCE = source_version()


def write_json(name: str, payload: dict) -> Path:
    """Write ``bench/results/<name>.json`` atomically, with the source commit; returns the path."""
    payload = {**payload, "source": SOURCE}

    def write(f):
        json.dump(payload, f, indent=2, sort_keys=False, default=float)
        f.write("\n")

    return atomic_write(RESULTS / f"{name}.json", write, text=True, make_parents=True)


def table(rows, headers) -> str:
    """A plain-text table for the terminal."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
