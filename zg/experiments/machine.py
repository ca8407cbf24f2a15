"""zg.experiments.machine: the setting every measurement is taken and shown in.

Where it sits: first in every notebook and benchmark. :func:`scale` says how big the run is
("small" for CI, "full" for reports), :func:`machine_note` records the machine a number came
from (``bench/_machine.py`` writes the same note beside every committed result) and
:func:`machine_label` turns it into a figure caption; :func:`markdown_table` prints the rows
that every other module of :mod:`zg.experiments` returns.

    SCALE = ex.scale()                              # "small" (default) or "full" (ZG_SCALE=full)
    BATCH_SIZE = ex.by_scale(small=256, full=1024)
    MACHINE = ex.machine_note()
    display(Markdown(ex.markdown_table(rows)))
"""

from __future__ import annotations

import datetime
import math
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["SCALES", "scale", "by_scale", "machine_note", "machine_label", "markdown_table"]

SCALES = ("small", "full")


def scale(value: str | None = None) -> str:
    """The notebooks' size: ``"small"`` (default; CI and ``make test``) or ``"full"``.

    Read from the environment variable ``ZG_SCALE`` unless ``value`` is given. ``make report``
    sets ``ZG_SCALE=full``; anything other than "small", "full" or unset is an error, so a
    typo never silently runs the wrong size.
    """
    if value is None:
        value = os.environ.get("ZG_SCALE", "") or "small"
    if not isinstance(value, str):
        raise TypeError(f"scale must be a str, got {type(value).__name__}")
    value = value.strip().lower()
    if value not in SCALES:
        raise ValueError(f"ZG_SCALE must be one of {SCALES} (or unset for 'small'), got {value!r}")
    return value


def by_scale(small: Any, full: Any, scale_name: str | None = None) -> Any:
    """``small`` or ``full``, whichever the current :func:`scale` asks for."""
    return full if scale(scale_name) == "full" else small


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


def machine_note() -> dict:
    """Platform, CPU, cores, memory, GPU (if any), library versions and the date (UTC).

    The same note ``bench/_machine.py`` writes beside every committed result, so a number in a
    notebook and a number in ``bench/results/`` are labelled the same way.
    """
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
        # Settings that change CPU timings: OpenMP's wait policy, thread counts, and glibc
        # malloc tuning (which decides whether large tensors are page-faulted in every step).
        "environment": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(("MALLOC_", "OMP_", "MKL_", "LD_PRELOAD"))
        },
    }
    try:
        import importlib.metadata as md

        note["dgl"] = md.version("dgl")
    except Exception:
        note["dgl"] = None
    return note


# Where a bench records the load average it started under (before its own work ran): the
# machine note's own load_average is read when the file is written, and so counts the bench's
# own processes and threads.
LOAD_BEFORE_KEYS = ("load_average_before", "load_average_start")


def busy(machine: dict, detail: dict | None = None) -> str | None:
    """ "busy: load 8.3 on 2 cores at the start" when the 1-minute load average the bench
    recorded before its own work (``detail``'s ``load_average_before`` or
    ``load_average_start``) exceeded the machine's cores: other work competed for the machine
    while it measured. None when it did not, or when no load before the run was recorded."""
    cores = machine.get("cores") if isinstance(machine, dict) else None
    load = next((detail[k] for k in LOAD_BEFORE_KEYS if detail and detail.get(k)), None)
    if not load or not isinstance(cores, int) or cores < 1:
        return None
    return f"busy: load {load[0]:.1f} on {cores} cores at the start" if load[0] > cores else None


def machine_short(machine: dict, detail: dict | None = None) -> str:
    """ "2 cores, no GPU, 2026-12-01" (and ", busy: load 8.3 on 2 cores at the start" when it
    was: :func:`busy`): enough to tell the machines of a table's rows apart, for the docs'
    tables and the claims ledger."""
    device = machine.get("cuda") or "no GPU"
    out = f"{machine.get('cores', '?')} cores, {device}, {str(machine.get('date', '?'))[:10]}"
    flag = busy(machine, detail)
    return out if flag is None else f"{out}, {flag}"


def machine_label(info: dict | None = None) -> str:
    """One line naming the machine of ``info`` (default: this one), for figure captions."""
    info = machine_note() if info is None else info
    if not isinstance(info, dict):
        raise TypeError(
            f"info must be a dict from zg.experiments.machine_note(), got {type(info).__name__}"
        )
    device = f"GPU {info['cuda']}" if info.get("cuda") else "no GPU"
    return (
        f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores "
        f"({info.get('torch_threads', '?')} torch threads), {info.get('memory_gib', '?')} GiB, "
        f"{device}; torch {info.get('torch', '?')}; measured {info.get('date', '?')}"
    )


def markdown_table(
    rows: Sequence[dict], columns: Sequence[str] | None = None, digits: int = 3
) -> str:
    """A Markdown table of ``rows`` (dicts); floats get ``digits`` significant digits."""
    rows = list(rows)
    if not rows:
        raise ValueError("rows is empty: nothing to tabulate")
    if columns is None:
        columns = list(rows[0])

    def cell(v: Any) -> str:
        if isinstance(v, bool) or v is None:
            return str(v)
        if isinstance(v, float):
            if math.isnan(v) or math.isinf(v):
                return str(v)
            return f"{v:,.0f}" if abs(v) >= 10**digits else f"{v:.{digits}g}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
