"""zg.experiments.results: the one format every committed measurement is stored in.

Where it sits: every bench in ``bench/`` writes its file through :func:`write`; the notebooks,
the docs renderer and ``tools/claims.py`` read files back through :func:`load` and quote
numbers through :func:`metric` and :func:`fmt`, so no measured number is typed by hand.

A result file (``bench/results/<name>.json``) is one JSON object with these keys:

    format     "zg-result/1"
    bench      the bench that wrote it ("engine", "sampling", ...; its script is bench/<bench>.py)
    machine    zg.experiments.machine_note() of the machine it ran on
    command    the command line that produced it (a list of str), or null for a converted file
    source     {"commit": git commit or null, "modified": whether zg/ or bench/ had changes}
    settings   the settings the rows were measured with (dict)
    seeds      the seeds measured (list of int; [] when nothing random was drawn)
    rows       per-row measurements (list of flat-ish dicts): what a table of the file shows
    headline   the few numbers the file is for (list of metrics, below)
    detail     anything else the bench records (dict; {} when nothing)
    note       a sentence on how to read the file, or null

A headline metric:

    {"name": "captured_vs_dynamic_b1024",     unique within the file
     "value": 5.39, "unit": "x",              unit: "x" (a ratio), "ms", "s", "MiB", "acc", ...
     "std": 0.12, "n": 3,                     sample std over n runs (null std when n == 1)
     "compared_to": "dynamic pipeline",       what the value is measured against (or null)
     "where": "csbm 1M, batch 1024, H200",    the workload in words
     "higher_is_better": true}

    doc = results.load("engine")                       # validated; ValueError names what is wrong
    m = results.metric(doc, "envelope_vs_dynamic")     # one headline metric
    results.fmt(m)                                     # "1.62x ± 0.05 (n=3)"
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "FORMAT",
    "RESULTS_DIR",
    "source_version",
    "mean_std",
    "headline",
    "headline_from",
    "make",
    "write",
    "validate",
    "load",
    "load_all",
    "metric",
    "fmt",
]

FORMAT = "zg-result/1"
ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
KEYS = (
    "format",
    "bench",
    "machine",
    "command",
    "source",
    "settings",
    "seeds",
    "rows",
    "headline",
    "detail",
    "note",
)
METRIC_KEYS = ("name", "value", "unit", "std", "n", "compared_to", "where", "higher_is_better")


def source_version(root: Path = ROOT) -> dict:
    """The commit the measured code came from, and whether zg/ or bench/ had other changes."""
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
    return {"commit": commit or None, "modified": bool(dirty) if commit else None}


def mean_std(values: Iterable[float]) -> tuple[float, float | None]:
    """The mean and the *sample* std (n - 1) of one value per seed (or run); the std is None
    for a single value (one seed has no spread, and "± 0.0" would claim one). Every bench
    and headline metric takes its spread from here."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_std: values is empty")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def spread(values: Iterable[float | None]) -> dict[str, Any] | None:
    """``{"mean", "std", "n", "values"}`` of the values that were measured (None entries are
    skipped; None when none was): :func:`mean_std` as a result row records it."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return None
    mean, std = mean_std(values)
    return {"mean": mean, "std": std, "n": len(values), "values": values}


def headline(
    name: str,
    value: float | None,
    unit: str,
    *,
    std: float | None = None,
    n: int = 1,
    compared_to: str | None = None,
    where: str = "",
    higher_is_better: bool = True,
) -> dict:
    """One headline metric (see the module docstring); ``value`` None: not measured here."""
    m = {
        "name": name,
        "value": None if value is None else float(value),
        "unit": unit,
        "std": None if std is None else float(std),
        "n": int(n),
        "compared_to": compared_to,
        "where": where,
        "higher_is_better": bool(higher_is_better),
    }
    _check_metric(m, "headline")
    return m


def headline_from(name: str, values: Sequence[float], unit: str, **kwargs: Any) -> dict:
    """A headline metric from one value per seed: the mean, the sample std (n - 1), n."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError(f"headline_from({name!r}): values is empty")
    mean, std = mean_std(values)
    return headline(name, mean, unit, std=std, n=len(values), **kwargs)


def make(
    bench: str,
    *,
    settings: dict,
    rows: list,
    headline: Iterable[dict] = (),
    seeds: Iterable[int] = (),
    detail: dict | None = None,
    note: str | None = None,
    machine: dict | None = None,
    command: list | None = None,
    source: dict | None = None,
) -> dict:
    """A result document: the machine note, command line and source commit filled in."""
    if machine is None:
        from .machine import machine_note

        machine = machine_note()
    doc = {
        "format": FORMAT,
        "bench": bench,
        "machine": machine,
        "command": list(sys.argv) if command is None else command,
        "source": source_version() if source is None else source,
        "settings": settings,
        "seeds": [int(s) for s in seeds],
        "rows": rows,
        "headline": list(headline),
        "detail": {} if detail is None else detail,
        "note": note,
    }
    validate(doc)
    return doc


def write(name_or_path: str | Path, doc: dict) -> Path:
    """Validate ``doc`` and write it atomically to bench/results/<name>.json (or the path)."""
    from zg._io import atomic_write

    validate(doc)
    path = _path(name_or_path)

    def dump(f):
        json.dump(doc, f, indent=2, default=_json_default, allow_nan=False)
        f.write("\n")

    return atomic_write(path, dump, text=True, make_parents=True)


def _json_default(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def _path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix == ".json" or p.parent != Path("."):
        return p
    return RESULTS_DIR / f"{p.name}.json"


def _check_metric(m: Any, where: str) -> None:
    if not isinstance(m, dict):
        raise ValueError(f"{where}: a headline metric must be an object, got {type(m).__name__}")
    missing = [k for k in METRIC_KEYS if k not in m]
    extra = [k for k in m if k not in METRIC_KEYS]
    if missing or extra:
        raise ValueError(f"{where}: metric {m.get('name')!r} missing {missing}, unknown {extra}")
    name = m["name"]
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: metric name must be a non-empty str, got {name!r}")
    for key in ("value", "std"):
        v = m[key]
        if v is not None and (
            not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
        ):
            raise ValueError(f"{where}: metric {name!r}: {key} must be a finite number or null")
    if not isinstance(m["n"], int) or isinstance(m["n"], bool) or m["n"] < 0:
        raise ValueError(f"{where}: metric {name!r}: n must be an int >= 0, got {m['n']!r}")
    if m["std"] is not None and m["n"] < 2:
        raise ValueError(f"{where}: metric {name!r}: a std needs n >= 2 (got n={m['n']})")
    if m["std"] is not None and m["std"] < 0:
        raise ValueError(f"{where}: metric {name!r}: std must be >= 0")
    if not isinstance(m["unit"], str):
        raise ValueError(f"{where}: metric {name!r}: unit must be a str")
    if m["compared_to"] is not None and not isinstance(m["compared_to"], str):
        raise ValueError(f"{where}: metric {name!r}: compared_to must be a str or null")
    if not isinstance(m["where"], str):
        raise ValueError(f"{where}: metric {name!r}: where must be a str")
    if not isinstance(m["higher_is_better"], bool):
        raise ValueError(f"{where}: metric {name!r}: higher_is_better must be true or false")


def validate(doc: Any, where: str = "result") -> dict:
    """Raise ValueError naming the first problem with ``doc``; return it when it is valid."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: a result must be a JSON object, got {type(doc).__name__}")
    missing = [k for k in KEYS if k not in doc]
    extra = [k for k in doc if k not in KEYS]
    if missing or extra:
        raise ValueError(f"{where}: missing keys {missing}, unknown keys {extra} (format {FORMAT})")
    if doc["format"] != FORMAT:
        raise ValueError(f"{where}: format is {doc['format']!r}, expected {FORMAT!r}")
    if not isinstance(doc["bench"], str) or not doc["bench"]:
        raise ValueError(f"{where}: bench must be a non-empty str")
    if not isinstance(doc["machine"], dict) or "cores" not in doc["machine"]:
        raise ValueError(f"{where}: machine must be a machine note (zg.experiments.machine_note)")
    cmd = doc["command"]
    if cmd is not None and not (isinstance(cmd, list) and all(isinstance(c, str) for c in cmd)):
        raise ValueError(f"{where}: command must be a list of str or null")
    src = doc["source"]
    if not isinstance(src, dict) or set(src) != {"commit", "modified"}:
        raise ValueError(f"{where}: source must be {{'commit': ..., 'modified': ...}}, got {src!r}")
    for key, kind in (("settings", dict), ("rows", list), ("headline", list), ("detail", dict)):
        if not isinstance(doc[key], kind):
            raise ValueError(f"{where}: {key} must be a {kind.__name__}")
    if not isinstance(doc["seeds"], list) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in doc["seeds"]
    ):
        raise ValueError(f"{where}: seeds must be a list of int")
    if doc["note"] is not None and not isinstance(doc["note"], str):
        raise ValueError(f"{where}: note must be a str or null")
    names = set()
    for m in doc["headline"]:
        _check_metric(m, where)
        if m["name"] in names:
            raise ValueError(f"{where}: headline metric {m['name']!r} appears twice")
        names.add(m["name"])
    _check_summaries(doc["rows"], f"{where}: rows")
    _check_summaries(doc["detail"], f"{where}: detail")
    return doc


def _check_summaries(node: Any, where: str) -> None:
    """Every summary ``{"values": [...], "mean": m, "std": s}`` in ``node`` says what its values
    give: ``mean`` their mean and ``std`` their sample std (n - 1; None for one value), so a
    figure's error bars and a table's spread are never the population std or a stale number."""
    if isinstance(node, dict):
        values = node.get("values")
        if (
            isinstance(values, list)
            and values
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            and all(math.isfinite(v) for v in values)
        ):
            want_mean, want_std = mean_std(values)
            for key, want in (("mean", want_mean), ("std", want_std)):
                got = node.get(key, _ABSENT)
                if got is _ABSENT or (got is None and want is None):
                    continue
                if (
                    not isinstance(got, (int, float))
                    or isinstance(got, bool)
                    or want is None
                    or not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
                ):
                    kind = "mean" if key == "mean" else "sample std (n - 1)"
                    raise ValueError(
                        f"{where}: {key} is {got!r} but the {kind} of its {len(values)} values "
                        f"{values} is {want!r}"
                    )
        for key, child in node.items():
            _check_summaries(child, f"{where}.{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            _check_summaries(child, f"{where}[{i}]")


_ABSENT = object()


# The largest result file a reader takes. The committed ones are under 2 MB (the largest,
# bench/results/grappa_diagnosis.json, 1.6 MB); a file over this is not a result.
RESULT_LIMIT = 64 << 20


def _read_result(path: Path, where: str) -> Any:
    """A result file's JSON, read with a size bound and no recursion error: a file over
    :data:`RESULT_LIMIT`, nested too deeply, not JSON or not a regular file is a ValueError
    naming it (``zg._io.read_json_file``), never a MemoryError or a RecursionError traceback."""
    from .._io import read_json_file

    try:
        return read_json_file(
            path, f"result file {where}", limit=RESULT_LIMIT, what="a result file"
        )
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no result file {path} (run bench/{path.stem}.py to make it)"
        ) from None


def load(name_or_path: str | Path) -> dict:
    """Read and validate one result file: a name ("engine") or a path.

    Raises FileNotFoundError when there is none, ValueError naming the file when it is over
    :data:`RESULT_LIMIT` bytes (64 MiB), nested too deeply, not JSON, not a regular file, or
    not a valid result."""
    path = _path(name_or_path)
    if not (path.exists() or path.is_symlink()):
        raise FileNotFoundError(f"no result file {path} (run bench/{path.stem}.py to make it)")
    where = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    doc = _read_result(path, where)
    return validate(doc, where=where)


def load_all(folder: str | Path = RESULTS_DIR) -> dict[str, dict]:
    """Every result file directly in ``folder`` (not archive/), by name."""
    return {p.stem: load(p) for p in sorted(Path(folder).glob("*.json"))}


def metric(doc_or_name: dict | str, name: str) -> dict:
    """The headline metric ``name`` of a result (a loaded doc, or a file name)."""
    doc = load(doc_or_name) if isinstance(doc_or_name, str) else doc_or_name
    for m in doc["headline"]:
        if m["name"] == name:
            return m
    have = [m["name"] for m in doc["headline"]]
    raise KeyError(f"{doc['bench']}: no headline metric {name!r} (has {have})")


def fmt(m: dict, digits: int = 2, near: Sequence[float] = ()) -> str:
    """A metric as prose: "1.62x ± 0.05 (n=3)", "0.712 acc (n=1)", "not measured".

    ``digits`` decimals at least; more where fewer would hide something: a spread that is not
    zero is never printed as "± 0.00" (it gets two significant digits, and the value as many
    decimals), and a value is never rounded onto one of the thresholds in ``near`` (a claim's
    criterion) that it does not equal."""
    if m["value"] is None:
        return "not measured"
    unit, value, std = m["unit"], float(m["value"]), m["std"]
    small = 0 < abs(value) < 10**-digits  # 2.98e-07, not 0.00
    if not small:
        if std and 0 < std < 0.5 * 10**-digits:
            digits = min(4, max(digits, 1 - math.floor(math.log10(std))))
        while digits < 10 and any(
            value != t and f"{value:.{digits}f}" == f"{float(t):.{digits}f}" for t in near
        ):
            digits += 1

    def num(x):
        return f"{x:.{digits}e}" if small else f"{x:.{digits}f}"

    body = f"{num(value)}x" if unit == "x" else f"{num(value)} {unit}".rstrip()
    if std is not None:
        tiny = not small and 0 < std < 0.5 * 10**-digits  # below 4 decimals: 1.0e-05
        body += f" ± {std:.1e}" if tiny else f" ± {num(std)}"
    return f"{body} (n={m['n']})"
