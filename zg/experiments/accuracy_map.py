"""Where Grappa keeps its accuracy: the committed map (``bench/results/grappa_map.json``) and
the diagnosis (``bench/results/grappa_diagnosis.json``), read for the notebooks (06-08).

Where it sits: after the benches. ``bench/grappa_map.py`` and ``bench/grappa_diagnosis.py``
train hundreds of runs (too long for a notebook); the notebooks read what they committed through
these functions, so every number a notebook states comes from the JSON, never typed by hand:

    result, reason = ex.load_result("grappa_map")      # (dict, None) or (None, why not)
    cells = result["detail"]["cells_table"]            # a zg-result/1 document: the bench's keys
    rows = ex.map_rows(cells)                          # one flat row per cell, gaps in points
    s = ex.gap_summary(cells, "grappa", method="random")
    paper = ex.paper_regime(cells)                     # the cells that look like the paper's graphs
    for line in ex.map_findings(cells): ...   # the findings, as Markdown sentences

Gaps are a trainer's test accuracy minus single-process test accuracy (negative: below single),
in accuracy fractions in the JSON and in points (x 100) in the rows returned here.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "RESULTS_DIR",
    "load_result",
    "map_rows",
    "gap_summary",
    "paper_regime",
    "map_findings",
    "PAPER_REGIME",
    "diagnosis_findings",
    "lr_rows",
]

RESULTS_DIR = Path(__file__).resolve().parents[2] / "bench" / "results"
MAP_FACTORS = ("method", "avg_degree", "homophily", "feature_snr", "workers", "num_layers")
# The paper trains large, sparse-ish graphs with high homophily (ogbn-products: mean degree 50,
# edge homophily 0.81; ogbn-papers100M: about 30, 0.66-ish), on random chunks as its default
# and METIS as an option, 2-3 layers. On the map: homophily 0.8 with degree 20 or 50.
PAPER_REGIME = {"homophily": (0.8,), "avg_degree": (20, 50)}


def load_result(
    name: str, results_dir: Path | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """``bench/results/<name>.json`` as a dict, or ``(None, reason)`` when it is not there or
    not readable, so a notebook can skip a section with a printed reason instead of failing."""
    if not isinstance(name, str) or not name or "/" in name or name.endswith(".json"):
        raise ValueError(f"name must be a result's bare name such as 'grappa_map', got {name!r}")
    path = Path(results_dir or RESULTS_DIR) / f"{name}.json"
    if not path.exists():
        return (
            None,
            f"{path.name} is not committed yet (run bench/{name.split('_quick')[0]}.py to make it)",
        )
    from .results import load

    try:
        return load(path), None  # a zg-result/1 document: the bench's own keys are in "detail"
    except (OSError, ValueError) as exc:
        return None, f"{path.name} cannot be read: {exc}"


def _cells(cells: Any) -> list[dict]:
    cells = list(cells) if cells is not None else []
    if not cells:
        raise ValueError("cells is empty: pass the cells_table of grappa_map.json")
    for cell in cells:
        missing = [f for f in MAP_FACTORS if f not in cell]
        if missing:
            raise ValueError(
                f"every cell needs the factors {list(MAP_FACTORS)}; one lacks {missing}"
            )
    return cells


def map_rows(
    cells: Sequence[dict],
    trainers: Sequence[str] = ("grappa", "isolated", "psgd_pa", "feature_fetch"),
) -> list[dict[str, Any]]:
    """One flat row per cell for a Markdown table: the factors, single's accuracy (%), and each
    trainer's gap to single as ``"mean ± std"`` in points."""
    rows = []
    for cell in _cells(cells):
        row = {f: cell[f] for f in MAP_FACTORS}
        row["single %"] = _points(cell["single_acc_mean"], cell["single_acc_std"])
        for t in trainers:
            if t not in cell:
                raise ValueError(
                    f"a cell has no {t!r} entry; trainers in the map: "
                    f"{[k for k, v in cell.items() if isinstance(v, dict) or v is None]}"
                )
            row[f"{t} gap"] = (
                "not run"
                if cell[t] is None
                else _points(cell[t]["gap_mean"], cell[t]["gap_std"], "+")
            )
        rows.append(row)
    return rows


def _select(cells: list[dict], where: dict[str, Any]) -> list[dict]:
    unknown = sorted(set(where) - set(MAP_FACTORS))
    if unknown:
        raise ValueError(f"unknown factor(s) {unknown}; the map's factors are {list(MAP_FACTORS)}")
    out = []
    for cell in cells:
        if all(cell[k] in (v if isinstance(v, (tuple, list)) else (v,)) for k, v in where.items()):
            out.append(cell)
    return out


def gap_summary(cells: Sequence[dict], trainer: str, **where: Any) -> dict[str, Any]:
    """The gap of ``trainer`` over the cells matching ``where`` (a factor = a value or a tuple of
    values) where it was run, in points: the mean over those cells of each cell's mean gap, the worst and the
    best cell (with its label), and how many cells lie within 1 point of single."""
    chosen = _select(_cells(cells), where)
    if not chosen:
        raise ValueError(f"no cell of the map matches {where}")
    if any(trainer not in c for c in chosen):
        raise ValueError(f"trainer {trainer!r} is not in the map")
    chosen = [c for c in chosen if c[trainer] is not None]  # cells the design ran it in
    if not chosen:
        raise ValueError(f"trainer {trainer!r} was not run in any cell matching {where}")
    gaps = [100 * c[trainer]["gap_mean"] for c in chosen]
    worst = min(range(len(chosen)), key=lambda i: gaps[i])
    best = max(range(len(chosen)), key=lambda i: gaps[i])
    label = lambda c: ", ".join(f"{f}={c[f]}" for f in MAP_FACTORS)  # noqa: E731
    return {
        "trainer": trainer,
        "cells": len(chosen),
        "mean_gap_points": statistics.mean(gaps),
        "worst_gap_points": gaps[worst],
        "worst_cell": label(chosen[worst]),
        "best_gap_points": gaps[best],
        "best_cell": label(chosen[best]),
        "within_1_point": sum(g >= -1.0 for g in gaps),
    }


def paper_regime(cells: Sequence[dict]) -> list[dict]:
    """The map's cells that look like the graphs the paper trains (:data:`PAPER_REGIME`)."""
    return _select(_cells(cells), dict(PAPER_REGIME))


def _points(mean: float, std: float | None, sign: str = "") -> str:
    """ "mean ± std" in points (x 100); just the mean when a file has no spread (one seed: a
    null std, or 0.0 in files written before the spread was null)."""
    text = f"{100 * mean:{sign}.1f}"
    return text if std is None else f"{text} ± {100 * std:.1f}"


def _gap(cell: dict, trainer: str) -> str:
    entry = cell.get(trainer)
    if entry is None:
        return "not run"
    return _points(entry["gap_mean"], entry["gap_std"], "+")


def _partition(cell: dict) -> str:
    return f"{cell['method']} + halo" if cell.get("halo") else cell["method"]


def map_findings(cells: Sequence[dict]) -> list[str]:
    """The map's findings as Markdown sentences, every number read from ``cells`` (gaps in
    points, mean ± std over seeds): the base cells, each partition's cells, what Grappa wins back
    over isolated training, and the cells in the paper's regime."""
    cells = _cells(cells)
    out = []
    for cell in _select(
        cells,
        {"workers": 4, "avg_degree": 20, "homophily": 0.8, "feature_snr": 0.5, "num_layers": 2},
    ):
        out.append(
            f"**{_partition(cell)} chunks, base cell** (degree 20, homophily 0.8, SNR 0.5, P=4, 2 layers): "
            f"single {_points(cell['single_acc_mean'], cell['single_acc_std'])} %; "
            f"gap to single: grappa {_gap(cell, 'grappa')}, isolated {_gap(cell, 'isolated')}, "
            f"psgd_pa {_gap(cell, 'psgd_pa')}, feature_fetch {_gap(cell, 'feature_fetch')} points."
        )
    for method in ("random", "metis"):
        chosen = [c for c in _select(cells, {"method": method}) if c.get("grappa") is not None]
        if not chosen:
            continue
        s = gap_summary(chosen, "grappa")
        method = _partition(chosen[0])
        out.append(
            f"**{method} chunks, all {s['cells']} cells:** grappa's gap averages "
            f"{s['mean_gap_points']:+.1f} points; within 1 point of single in {s['within_1_point']} "
            f"of {s['cells']} cells; worst {s['worst_gap_points']:+.1f} ({s['worst_cell']}), best "
            f"{s['best_gap_points']:+.1f} ({s['best_cell']})."
        )
        both = [c for c in chosen if c.get("isolated") is not None]
        if both:
            wins = [100 * (c["grappa"]["gap_mean"] - c["isolated"]["gap_mean"]) for c in both]
            out.append(
                f"**{method} chunks, what grappa wins back over isolated training:** "
                f"{statistics.mean(wins):+.1f} points on average over {len(both)} cells "
                f"(from {min(wins):+.1f} to {max(wins):+.1f})."
            )
    paper = [c for c in paper_regime(cells) if c.get("grappa") is not None]
    if paper:
        listed = "; ".join(
            f"{_partition(c)}, degree {c['avg_degree']:g}, P={c['workers']}, "
            f"{c['num_layers']} layers, SNR {c['feature_snr']:g}: {_gap(c, 'grappa')}"
            for c in paper
        )
        out.append(f"**The paper's regime** (homophily 0.8, degree 20-50): grappa's gap {listed}.")
    return out


ESTIMATOR_RUNS = ("grappa/mean", "grappa/node", "grappa/batch", "grappa/shrink", "grappa/reference")


def _pm(m: dict | None) -> str:
    if m is None:
        return "n/a"
    if m.get("n") == 1 or m.get("std") is None:  # one seed: no spread to show
        return f"{100 * m['mean']:.1f} %"
    return f"{100 * m['mean']:.1f} ± {100 * m['std']:.1f} %"


def diagnosis_findings(datasets: dict[str, Any]) -> list[str]:
    """The diagnosis (``grappa_diagnosis.json``'s ``datasets``) as Markdown sentences, every
    number read from it: per dataset the end-of-training gap to single of every run, whether the
    gap closes with training (gap a third of the way in vs at the end), the estimators' spread,
    and what the three evaluations of the same models say. Gaps: single minus run, in points
    (positive: below single), as the diagnosis records them."""
    if not isinstance(datasets, dict) or not datasets:
        raise ValueError("datasets must be the non-empty 'datasets' dict of grappa_diagnosis.json")
    out = []
    for name, d in datasets.items():
        summary = d.get("summary") or {}
        if "single" not in summary:
            raise ValueError(f"dataset {name!r} has no 'single' run in its summary")
        epochs = d["epochs"]
        lr = (d.get("settings") or {}).get("lr")
        seeds = (d.get("settings") or {}).get("seeds")
        count = (
            len(seeds)
            if seeds is not None
            else (summary["single"].get("final_test_acc") or {}).get("n")
        )
        seed_text = "" if count is None else f", {count} seed{'s' if count != 1 else ''}"
        head = f"**{name}** ({epochs} epochs{'' if lr is None else f', lr {lr:g}'}{seed_text})"
        gaps = ", ".join(
            f"{run} {s['gap_points_final']:+.1f}" for run, s in summary.items() if run != "single"
        )
        out.append(
            f"{head}: single ends at {_pm(summary['single']['final_test_acc'])}; gap to single at the end "
            f"(points, single - run): {gaps}."
        )
        third = max(0, epochs // 3 - 1)
        closing = [
            f"{run} {s['test_gap_points_curve'][third]:+.1f} → {s['test_gap_points_curve'][-1]:+.1f}"
            for run, s in summary.items()
            if run != "single" and s.get("test_gap_points_curve")
        ]
        if closing and epochs >= 6:
            out.append(
                f"{head}, does the gap close with training? Gap after epoch {third + 1} → after epoch {epochs}: "
                + ", ".join(closing)
                + "."
            )
        est = {
            run: summary[run]["final_test_acc"]["mean"] for run in ESTIMATOR_RUNS if run in summary
        }
        if len(est) >= 2:
            out.append(
                f"{head}, the estimators: final test accuracy from {100 * min(est.values()):.1f} % "
                f"({min(est, key=est.get)}) to {100 * max(est.values()):.1f} % ({max(est, key=est.get)}), "
                f"a spread of {100 * (max(est.values()) - min(est.values())):.1f} points."
            )
        diffs = [
            100 * (s["eval_sampled"]["mean"] - s["eval_full"]["mean"])
            for s in summary.values()
            if s.get("eval_sampled") and s.get("eval_full")
        ]
        local = {
            run: 100 * (s["eval_local"]["mean"] - s["eval_full"]["mean"])
            for run, s in summary.items()
            if s.get("eval_local") and s.get("eval_full")
        }
        if diffs:
            text = (
                f"{head}, evaluation: sampled (training fanouts, whole graph) minus full neighbourhoods is "
                f"{min(diffs):+.1f} to {max(diffs):+.1f} points over the runs"
            )
            if local:
                text += (
                    f"; each worker's local graph minus full is {min(local.values()):+.1f} to "
                    f"{max(local.values()):+.1f} points"
                )
            out.append(text + ".")
    return out


def lr_rows(datasets: dict[str, Any], base: str = "cora") -> list[dict[str, Any]]:
    """The learning-rate check of the diagnosis: for ``base`` and every ``"<base> lr=<x>"``
    dataset, each run's gap to single (points, single - run) after the epochs all of them
    trained (the shortest run's length), with the dataset's learning rate. Runs measured at only
    some learning rates are left out. Rows sorted by learning rate, then run."""
    if not isinstance(datasets, dict):
        raise ValueError("datasets must be the 'datasets' dict of grappa_diagnosis.json")
    chosen = {
        name: d for name, d in datasets.items() if name == base or name.startswith(f"{base} lr=")
    }
    if len(chosen) < 2:
        return []
    epochs = min(d["epochs"] for d in chosen.values())
    runs = set.intersection(*(set(d["summary"]) for d in chosen.values())) - {"single"}
    rows = []
    for name, d in chosen.items():
        lr = (d.get("settings") or {}).get("lr")
        if lr is None:
            raise ValueError(f"dataset {name!r} does not record its learning rate (settings.lr)")
        for run in sorted(runs):
            s = d["summary"][run]
            rows.append(
                {
                    "lr": lr,
                    "run": run,
                    "epochs": epochs,
                    "gap to single (points)": round(s["test_gap_points_curve"][epochs - 1], 1),
                    "single test %": round(
                        100 * d["summary"]["single"]["test_curve"][epochs - 1]["mean"], 1
                    ),
                }
            )
    return sorted(rows, key=lambda r: (r["lr"], r["run"]))
