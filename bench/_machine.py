"""Shared by the benchmarks: a note of the machine a result came from, and an atomic JSON writer.

Every benchmark writes ``bench/results/<name>.json`` with ``{"machine": machine(), ...}`` so a
number is never separated from where it was measured.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return float("nan")


def machine() -> dict:
    """Platform, CPU, cores, memory, GPU (if any) and library versions, plus the date."""
    import torch

    note = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": _memory_gib(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        # Other processes compete for the cores; the 1/5/15-minute load average says how much.
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    try:
        import importlib.metadata as md
        note["dgl"] = md.version("dgl")
    except Exception:
        note["dgl"] = None
    return note


def write_json(name: str, payload: dict) -> Path:
    """Write ``bench/results/<name>.json`` atomically; returns the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    fd, tmp = tempfile.mkstemp(dir=RESULTS, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=2, sort_keys=False, default=float)
        f.write("\n")
    os.replace(tmp, path)
    return path


def table(rows, headers) -> str:
    """A plain-text table for the terminal."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
