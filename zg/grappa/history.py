"""Grappa's history: one record per epoch, the run's summary, and the JSON it is written to.

Where it sits: after every epoch of the worker loop (rank 0 builds the record from a table all
workers gather) and at the end of a run. The sums over a history (bytes per kind, per worker)
are defined here once: :func:`bytes_by_kind` and :func:`bytes_per_worker`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch

from .._io import atomic_write
from ..experiments.machine import machine_note
from ..graph import Graph
from .comm import KINDS
from .config import TrainConfig
from .partition import Partition
from .presets import preset_record

__all__ = [
    "epoch_record",
    "history",
    "write_json",
    "bytes_by_kind",
    "bytes_by_kind_per_worker",
    "bytes_per_worker",
]


def _epochs(history_or_epochs: Any) -> list[dict[str, Any]]:
    if isinstance(history_or_epochs, dict):
        if "epochs" not in history_or_epochs:
            raise TypeError("history must be a zg.grappa.train history (a dict with 'epochs')")
        return history_or_epochs["epochs"]
    if not isinstance(history_or_epochs, list):
        raise TypeError(
            f"expected a history or a list of epoch records, got {type(history_or_epochs).__name__}"
        )
    return history_or_epochs


def bytes_by_kind_per_worker(history_or_epochs: Any) -> dict[str, list[int]]:
    """``{kind: [bytes each worker sent]}`` summed over the epochs of a run (or a list of epoch
    records): the one definition of this sum."""
    epochs = _epochs(history_or_epochs)
    if not epochs:
        return {}
    kinds = epochs[0]["bytes_by_kind"]  # {kind: [bytes per worker]}
    return {
        k: [int(sum(int(e["bytes_by_kind"][k][w]) for e in epochs)) for w in range(len(v))]
        for k, v in kinds.items()
    }


def bytes_by_kind(history_or_epochs: Any) -> dict[str, int]:
    """Bytes sent over a run (or a list of epoch records), by kind, summed over workers."""
    return {k: sum(v) for k, v in bytes_by_kind_per_worker(history_or_epochs).items()}


def bytes_per_worker(history_or_epochs: Any) -> list[int]:
    """Bytes each worker sent over a run (or a list of epoch records)."""
    epochs = _epochs(history_or_epochs)
    workers = len(epochs[0]["bytes_sent"]) if epochs else 0
    return [int(sum(e["bytes_sent"][p] for e in epochs)) for p in range(workers)]


def epoch_record(
    epoch: int, s: int, table: torch.Tensor, lambdas: list[float], iterations: int
) -> dict[str, Any]:
    """An epoch's record from the table every worker sent (``table`` [P, 8 + 2 kinds]: loss sum,
    seeds, training seconds, regrouping seconds, mean coverage, bytes and rounds by kind, hook
    scale min/mean/max). ``seconds`` here is the slowest worker's training; the worker loop
    replaces it with the whole epoch's and adds the ``account`` (:mod:`zg.grappa.account`);
    ``worker_seconds`` stays each worker's seconds in its training steps."""
    nk = len(KINDS)
    by_kind = table[:, 5 : 5 + nk]  # [P, kinds]
    rounds = table[:, 5 + nk : 5 + 2 * nk]
    record = {
        "epoch": epoch,
        "super_epoch": s,
        "iterations": iterations,
        "loss": float(table[:, 0].sum() / table[:, 1].sum()),
        "seconds": float(table[:, 2].max()),
        "worker_seconds": table[:, 2].tolist(),
        "repartition_seconds": float(table[:, 3].max()),
        "mean_coverage": table[:, 4].tolist(),
        "bytes_sent": [int(b) for b in by_kind.sum(1)],
        "bytes_by_kind": {k: [int(b) for b in by_kind[:, i]] for i, k in enumerate(KINDS)},
        "rounds": [int(r) for r in rounds.sum(1)],
        "val_acc": None,
        "test_acc": None,
        "eval_seconds": None,
    }
    if lambdas:
        record["shrink_lambda"] = sum(lambdas) / len(lambdas)
    scale = table[:, 5 + 2 * nk : 8 + 2 * nk]  # [P, 3] min, mean, max
    if scale.shape[1] == 3 and bool(torch.isfinite(scale).all()):
        # The scale s_p each worker's hook multiplied its gradient by, over the epoch's batches
        # (the reference estimator: s_p = c_r / P).
        record["worker_scale"] = {
            "min": scale[:, 0].tolist(),
            "mean": scale[:, 1].tolist(),
            "max": scale[:, 2].tolist(),
        }
    return record


def history(
    cfg: TrainConfig,
    g: Graph,
    part: Partition,
    world: int,
    records: list[dict[str, Any]],
    total_seconds: float,
    backend: str,
    resumed_at: list[int] | None = None,
    kernel: str | None = None,
    captured: bool = False,
) -> dict[str, Any]:
    """The history JSON. ``total_seconds`` counts the work kept (after a restart: up to the
    checkpoint, plus the resumed part); ``resumed_at`` lists the epochs resumed from checkpoints;
    ``kernel`` is the kernel rank 0's Engine ran (its ``settings.kernel``; the config's
    ``kernel`` is what was asked for); ``captured``: whether its step ran as a CUDA Graph."""
    evaluated = [r for r in records if r["val_acc"] is not None]
    best = max(evaluated, key=lambda r: r["val_acc"])
    last = evaluated[-1]
    per_worker = bytes_per_worker(records)
    seconds = [r["seconds"] for r in records]
    return {
        "format": "zg.grappa.history",
        "version": 1,
        "config": cfg.to_dict(),
        "workers": world,
        "backend": backend,
        "kernel": kernel,
        "captured": bool(captured),
        "preset": preset_record(cfg.to_dict()),
        "graph": {k: v for k, v in g.summary().items() if k != "device"},
        "partition": {
            **part.summary(),
            "stats": [
                part.stats(g, s)
                for s in sorted({r["super_epoch"] % part.num_super_epochs for r in records})
            ],
        },
        "epochs": records,
        "final": {
            "val_acc": last["val_acc"],
            "test_acc": last["test_acc"],
            "best_val_acc": best["val_acc"],
            "test_acc_at_best_val": best["test_acc"],
            "best_epoch": best["epoch"],
        },
        "bytes_sent_per_worker": per_worker,
        "bytes_per_epoch_per_worker": sum(per_worker) / (world * len(records)),
        "seconds_per_epoch": sorted(seconds)[len(seconds) // 2],  # median epoch
        "total_seconds": total_seconds,
        "resumed_at_epochs": list(resumed_at or []),
        # The machine note, named as zg train's history and the bench results name it (the
        # files of zg 0.4 and before held a smaller "environment" record here instead).
        "machine": machine_note(),
    }


def _strict(obj: Any) -> Any:
    """``obj`` with every non-finite float as None (null: not measured), so the file is strict
    JSON (no ``NaN`` / ``Infinity``, which strict parsers reject) and no non-finite number is
    read as a result."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return obj


def write_json(obj: Any, path: str) -> None:
    """Write JSON atomically (:func:`zg._io.atomic_write`: a temporary file in the same folder,
    then rename; nothing left behind on failure), strict: a non-finite float is written as null
    (an accuracy of a split the graph lacks is not a number)."""
    clean = _strict(obj)
    atomic_write(
        path,
        lambda f: json.dump(clean, f, indent=1, allow_nan=False),
        name="history_path",
        text=True,
        make_parents=True,
    )
