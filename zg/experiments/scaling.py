"""zg.experiments.scaling: how each pipeline's cost grows with graph size and batch size (notebook 04).

Where it sits: after ``bench/scaling.py`` has measured. That benchmark times DGL, zg dynamic and
zg envelope on :func:`zg.datasets.products_like` graphs of 100k to 2.4M nodes and on batch
sizes 256 to 4096, with the seconds of every stage (sample, compact, gather, forward, loss,
backward, step), and commits ``bench/results/scaling.json``. On two cores that takes about
a quarter of an hour, too long for a notebook, so the notebook reads the committed file:
:func:`load_scaling_results` finds it (or the ``--quick`` run's file, labelled as such),
:func:`cost_growth_rows` flattens it for :func:`zg.viz.cost_growth`, and
:func:`cost_growth_summary` computes what the prose says: per pipeline, where the time goes
at the largest point and how fast it grows (the log-log slope).

    result = ex.load_scaling_results()          # None if neither file is committed
    rows = ex.cost_growth_rows(result)
    summary = ex.cost_growth_summary(result)

Every number comes from the file, which carries the note of the machine that measured it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..step import STAGES

__all__ = [
    "SCALING_RESULTS",
    "SCALING_QUICK_RESULTS",
    "PIPELINE_NAMES",
    "load_scaling_results",
    "cost_growth_rows",
    "cost_growth_summary",
    "log_log_slope",
]

_RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
SCALING_RESULTS = _RESULTS / "scaling.json"  # bench/scaling.py
SCALING_QUICK_RESULTS = _RESULTS / "scaling_quick.json"  # bench/scaling.py --quick
# The benchmark's pipeline keys and the names the kit shows (zg.viz.PIPELINE_COLORS).
PIPELINE_NAMES = {"dgl": "DGL", "zg_dynamic": "zg dynamic", "zg_envelope": "zg envelope"}

_ROW_KEYS = (
    "pipeline",
    "num_nodes",
    "batch_size",
    "seconds_per_batch",
    "projected_epoch_seconds",
    "stage_seconds_per_batch",
)


def load_scaling_results(path: Any = None, *, quick_fallback: bool = True) -> dict | None:
    """The committed ``bench/results/scaling.json`` (or ``path``), checked; None if absent.

    Without ``path``, and if the full run's file is absent, the ``--quick`` run's file is read
    instead when ``quick_fallback`` (its tiny graphs say nothing about scale: the returned
    dict's ``"quick"`` is True so a caller can say so). The dict gains ``"path"``. A file that
    is not a bench/scaling.py result (no machine note, no sweeps, rows missing keys) is a
    ValueError naming it.
    """
    if path is None:
        candidates = [SCALING_RESULTS] + ([SCALING_QUICK_RESULTS] if quick_fallback else [])
    else:
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
        candidates = [Path(path)]
    for candidate in candidates:
        if candidate.is_file():
            break
    else:
        return None
    from .results import load

    try:
        data = load(candidate)  # a zg-result/1 document (zg.experiments.results)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{candidate} is not valid JSON ({exc})") from None
    if data["bench"] != "scaling":
        raise ValueError(
            f"{candidate} is not a bench/scaling.py result (its bench is not 'scaling')"
        )
    for key in ("sweeps",):
        if key not in data["detail"]:
            raise ValueError(
                f"{candidate} has no {key!r}; it is not a complete bench/scaling.py result"
            )
    data["sweeps"] = data["detail"]["sweeps"]  # the sweeps every reader below needs
    for i, row in enumerate(data["rows"]):
        missing = [k for k in _ROW_KEYS if k not in row]
        if missing:
            raise ValueError(f"{candidate}: row {i} lacks {missing}")
    data["path"] = str(candidate)
    data["quick"] = bool(data["settings"].get("quick", False))
    return data


def cost_growth_rows(result: dict) -> list[dict]:
    """Flat rows, one per (pipeline, graph size, batch size): the pipeline's display name, the
    sizes, seconds per batch (mean and std), the projected epoch seconds, and each stage's
    seconds per batch under its own key (``"sample"``, ..., ``"step"``)."""
    _check_result(result)
    rows = []
    for r in result["rows"]:
        row = {
            "pipeline": PIPELINE_NAMES.get(r["pipeline"], r["pipeline"]),
            "num_nodes": int(r["num_nodes"]),
            "batch_size": int(r["batch_size"]),
            "seconds_per_batch": float(r["seconds_per_batch"]),
            # null (one timed batch) in newer files, 0.0 in older ones: no spread either way
            "seconds_per_batch_std": float(r.get("seconds_per_batch_std") or 0.0),
            "projected_epoch_seconds": float(r["projected_epoch_seconds"]),
            "timed_batches": int(r.get("timed_batches", 0)),
        }
        for stage in STAGES:
            row[stage] = float(r["stage_seconds_per_batch"].get(stage, 0.0))
        rows.append(row)
    return rows


def log_log_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The least-squares slope of log(y) against log(x): the exponent k of y ~ x^k.

    None with fewer than two distinct x. Every value must be positive.
    """
    xs, ys = [float(x) for x in xs], [float(y) for y in ys]
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys must have the same length, got {len(xs)} and {len(ys)}")
    if any(v <= 0 or not math.isfinite(v) for v in xs + ys):
        raise ValueError("log_log_slope needs positive, finite values")
    if len(set(xs)) < 2:
        return None
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def cost_growth_summary(result: dict) -> list[dict]:
    """Per pipeline, what the notebook's prose says, computed from the file:

    * ``num_nodes``, ``batch_size``: the largest graph of the size sweep at its batch size;
    * ``seconds_per_batch`` and ``projected_epoch_seconds`` there, and ``dgl_over_this``
      (DGL's seconds per batch over this pipeline's: above 1, this pipeline is faster);
    * ``stage_shares``: each stage's share of the stage-clocked time there, largest first,
      and ``top_stage`` / ``top_share``;
    * ``size_exponent``: the log-log slope of seconds per batch against graph size (1.0:
      linear; a sampler whose work depends only on the batch tends to 0, while cache misses
      over a larger graph raise it);
    * ``batch_exponent``: the same against batch size on the batch sweep's graph (below 1:
      a larger batch shares more neighbours, so each seed costs less).
    """
    _check_result(result)
    rows = cost_growth_rows(result)
    size_batch = int(result["sweeps"]["size"]["batch_size"])
    batch_graph = int(result["sweeps"]["batch"]["num_nodes"])
    out = []
    pipelines = list(dict.fromkeys(r["pipeline"] for r in rows))
    for name in pipelines:
        mine = [r for r in rows if r["pipeline"] == name]
        by_size = sorted(
            (r for r in mine if r["batch_size"] == size_batch), key=lambda r: r["num_nodes"]
        )
        by_batch = sorted(
            (r for r in mine if r["num_nodes"] == batch_graph), key=lambda r: r["batch_size"]
        )
        if not by_size:
            continue
        top = by_size[-1]
        total = sum(top[s] for s in STAGES)
        shares = sorted(
            ((s, top[s] / total if total > 0 else 0.0) for s in STAGES), key=lambda kv: -kv[1]
        )
        dgl = [
            r
            for r in rows
            if r["pipeline"] == "DGL"
            and r["num_nodes"] == top["num_nodes"]
            and r["batch_size"] == top["batch_size"]
        ]
        out.append(
            {
                "pipeline": name,
                "num_nodes": top["num_nodes"],
                "batch_size": top["batch_size"],
                "seconds_per_batch": top["seconds_per_batch"],
                "projected_epoch_seconds": top["projected_epoch_seconds"],
                "dgl_over_this": dgl[0]["seconds_per_batch"] / top["seconds_per_batch"]
                if dgl
                else None,
                "stage_shares": dict(shares),
                "top_stage": shares[0][0],
                "top_share": shares[0][1],
                "size_exponent": log_log_slope(
                    [r["num_nodes"] for r in by_size], [r["seconds_per_batch"] for r in by_size]
                ),
                "batch_exponent": log_log_slope(
                    [r["batch_size"] for r in by_batch], [r["seconds_per_batch"] for r in by_batch]
                )
                if len(by_batch) > 1
                else None,
            }
        )
    return out


def _check_result(result: Any) -> None:
    if not isinstance(result, dict) or "rows" not in result or "sweeps" not in result:
        raise TypeError(
            "result must be the dict load_scaling_results returned (with 'rows' and 'sweeps')"
        )
    if not result["rows"]:
        raise ValueError("result has no rows: nothing was measured")
