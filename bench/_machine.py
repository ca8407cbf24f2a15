"""Shared by the benchmarks: where results live, a note of the machine a result came from, an
atomic JSON writer, and the small helpers the benches' headline functions share.

Every benchmark writes ``bench/results/<name>.json`` (:data:`RESULTS`, the one place the folder
is resolved) through :func:`write_json`, in the one result format (zg.experiments.results,
"zg-result/1"): the machine note, command line and source commit travel with every number, and
the bench's own ``headlines(doc)`` function (found by bench/_headlines.py) names the file's
headline metrics.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

# One implementation of the machine note, shared with the notebooks (zg.experiments.machine_note).
from zg.experiments.machine import machine_note
from zg.experiments.results import RESULTS_DIR, source_version

RESULTS = RESULTS_DIR  # bench/results: every bench reads and writes its files here

__all__ = [
    "RESULTS",
    "SOURCE",
    "bench_of",
    "document",
    "kernel_phrase",
    "machine_note",
    "paired",
    "pm",
    "ran_kernel",
    "read_json",
    "short",
    "source_version",
    "table",
    "write_json",
]


# Read when the benchmark starts (it imports this module first), not when it ends.
SOURCE = source_version()
# The load average before the bench's own work: the machine note is read when the file is
# written, so its load counts the bench's own processes; this one says whether other work
# competed for the machine (zg.experiments.machine.busy reads it).
LOAD_BEFORE = list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def bench_of(name: str) -> str:
    """The bench script a result file name comes from: the longest bench/<x>.py prefix of it
    ('engine_products' -> 'engine', 'grappa_map_deep' -> 'grappa_map_deep')."""
    scripts = sorted(
        (
            p.stem
            for p in Path(__file__).resolve().parent.glob("*.py")
            if not p.stem.startswith("_")
        ),
        key=len,
        reverse=True,
    )
    for s in scripts:
        if name == s or name.startswith(s + "_"):
            return s
    return name


def short(graph) -> str:
    """A graph's name for a metric name: 'csbm_1000000' -> 'csbm1M', 'products_like' -> 'products'."""
    g = str(graph)
    m = re.fullmatch(r"([a-z]+)_?(\d+)", g)
    if m:
        n = int(m.group(2))
        size = (
            f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else n
        )
        return f"{m.group(1)}{size}"
    return {"products_like": "products"}.get(g, re.sub(r"[^a-z0-9]+", "_", g.lower()).strip("_"))


def pm(mean, std, fmt: str = "{:.2f}", scale: float = 1.0) -> str:
    """ "mean ± std" (each times ``scale``) for a terminal table, or just the mean when there is
    no spread (one seed: std None; a file from before that may say 0.0)."""
    text = fmt.format(scale * mean)
    return text if std is None else f"{text} ± {fmt.format(scale * std)}"


def paired(a, b):
    """Per-run ratios a[i] / b[i] (each run's own pair)."""
    return [float(x) / float(y) for x, y in zip(a, b) if y]


def ran_kernel(runner) -> str:
    """The kernel that ran ("fused" or "torch") for a zg.Engine (``settings.kernel``) or a
    zg.EnvelopeSampler (``kernel``): what a result's settings record."""
    from zg import kernels

    settings = getattr(runner, "settings", None)
    kernel = settings.kernel if settings is not None else runner.kernel
    return kernels.resolve(kernel, runner.device)


# How a headline metric's "where" names the kernel that ran (``ran_kernel``'s answer).
KERNEL_PHRASES = {"fused": "compiled numba kernels", "torch": "torch kernels"}


def kernel_phrase(ran: str) -> str:
    """The words a headline's ``where`` uses for the kernel that ran ("fused" or "torch")."""
    if ran not in KERNEL_PHRASES:
        raise ValueError(f"ran: expected one of {sorted(KERNEL_PHRASES)}, got {ran!r}")
    return KERNEL_PHRASES[ran]


def document(name: str, payload: dict) -> dict:
    """The zg-result/1 document of a bench's payload: the payload's keys mapped, every other key
    kept verbatim under ``detail``, the headline metrics from the bench's own ``headlines``.

    Mapped: ``benchmark`` -> bench (else the file's bench script); ``machine`` (else this
    machine's note); ``command`` or ``argv`` -> command (a str is split as a shell would; else
    this process's argv); ``source`` (this checkout's commit); ``settings`` or ``setting`` ->
    settings; ``seeds`` when a list of int; ``rows`` (or ``results`` / ``runs``) when a list of
    dicts -> rows; ``note`` when a str.
    """
    from _headlines import headlines

    from zg.experiments import results

    if not isinstance(payload, dict):
        raise TypeError(f"payload must be a dict, got {type(payload).__name__}")
    if payload.get("format") == results.FORMAT:
        doc = dict(payload)
        doc["source"] = SOURCE
        doc["headline"] = headlines(doc)
        return results.validate(doc, where=name)
    rest = dict(payload)
    bench = rest.pop("benchmark") if isinstance(rest.get("benchmark"), str) else bench_of(name)
    machine = rest.pop("machine", None)
    if machine is None:
        machine = machine_note()
    command = None
    for key in ("command", "argv"):
        value = rest.get(key)
        if isinstance(value, str):
            command = shlex.split(rest.pop(key))
            break
        if isinstance(value, list) and all(isinstance(c, str) for c in value):
            command = rest.pop(key)
            break
    if command is None:
        command = list(sys.argv)
    rest.pop("source", None)
    source = SOURCE
    settings = {}
    for key in ("settings", "setting"):
        if isinstance(rest.get(key), dict):
            settings = rest.pop(key)
            break

    def int_list(value) -> bool:
        return isinstance(value, list) and all(
            isinstance(s, int) and not isinstance(s, bool) for s in value
        )

    seeds = []
    if int_list(rest.get("seeds")):
        seeds = rest.pop("seeds")
    elif int_list(settings.get("seeds")):  # the seeds a bench lists among its settings
        seeds = list(settings["seeds"])
    rows = []
    for key in ("rows", "results", "runs"):
        value = rest.get(key)
        if isinstance(value, list) and all(isinstance(r, dict) for r in value):
            rows = rest.pop(key)
            break
    note = rest.pop("note") if isinstance(rest.get("note"), str) else None
    if LOAD_BEFORE is not None and not any(
        k in rest for k in ("load_average_before", "load_average_start")
    ):
        rest["load_average_before"] = LOAD_BEFORE  # when this process started
    doc = {
        "format": results.FORMAT,
        "bench": bench,
        "machine": machine,
        "command": command,
        "source": source,
        "settings": settings,
        "seeds": seeds,
        "rows": rows,
        "headline": [],
        "detail": rest,
        "note": note,
    }
    doc["headline"] = headlines(doc)
    return results.validate(doc, where=name)


def write_json(name: str, payload: dict) -> Path:
    """Write ``bench/results/<name>.json`` atomically in the zg-result/1 format (see
    :func:`document` and zg.experiments.results), with the source commit; returns the path."""
    from zg.experiments import results

    return results.write(RESULTS / f"{name}.json", document(name, payload))


def read_json(name_or_path) -> dict:
    """A committed result (a name or a path) as the bench wrote it: the legacy payload view of a
    zg-result/1 document (detail's keys at the top, with rows and settings), for benches that
    extend or join their own earlier files."""
    from zg.experiments import results

    path = Path(name_or_path)
    doc = results.load(path if path.suffix == ".json" else RESULTS / f"{path}.json")
    view = {**doc["detail"], "machine": doc["machine"], "settings": doc["settings"]}
    view.update(seeds=doc["seeds"], rows=doc["rows"], command=doc["command"], source=doc["source"])
    if doc["note"] is not None:
        view["note"] = doc["note"]
    return view


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
