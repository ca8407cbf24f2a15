"""ZeroGNN data-parallel training: a thin front to ``grappa.train(trainer="data_parallel")``.

Every process holds the whole graph and runs the static envelope step on its share of every
global batch; the one exchange (:mod:`zg.grappa.exchange`) sums gradients, loss and seed count
inside the step, so each update is the single-process update on the global batch. The history
keeps this module's format (0.4); new code can call :func:`zg.grappa.train` directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import grappa
from .graph import Graph
from .grappa.launch import spawn  # noqa: F401 (what tests patch to see no process start)
from .grappa.local import batch_shares as shares

__all__ = ["train", "shares"]


def train(
    g: Graph,
    workers: int = 2,
    epochs: int = 3,
    batch_size: int = 1024,
    fanouts: Sequence[int] = (15, 10, 5),
    *,
    model: str = "sage",
    hidden_dim: int = 256,
    dropout: float = 0.0,
    lr: float = 3e-3,
    envelope: Any = "profiled",
    seed: int = 0,
    poll_every: int = 8,
    threads: int | None = None,
    evaluate: bool = True,
    kernel: str = "torch",
    backend: str | None = None,
    timeout: float = 300.0,
    run_timeout: float | None = None,
    model_path: str | None = None,
) -> dict[str, Any]:
    """Data-parallel training with ``workers`` processes (every argument a
    :class:`zg.grappa.TrainConfig` field of the same name, checked by grappa.train before any
    process starts;
    ``envelope``: "profiled", "worst_case" or one size per block; ``evaluate``: rank 0's
    validation accuracy after every epoch). Returns ``{"epochs": [{epoch, seconds, loss,
    iterations, overflows, rewound_batches, val_acc}], "seconds_per_epoch",
    "bytes_sent_per_worker", "kernel", "captured" (CUDA: the step, exchange included, ran as
    one CUDA Graph), "workers", "backend", "grappa_history"}``."""
    envelope = list(envelope) if isinstance(envelope, (list, tuple)) else envelope
    if not isinstance(evaluate, bool):
        raise TypeError(f"evaluate must be a bool, got {type(evaluate).__name__}")
    options = dict(
        trainer="data_parallel", workers=workers, epochs=epochs, batch_size=batch_size,
        fanouts=list(fanouts) if isinstance(fanouts, (list, tuple)) else fanouts, model=model,
        hidden_dim=hidden_dim, dropout=dropout, lr=lr, envelope=envelope, seed=seed,
        poll_every=poll_every, threads=threads, kernel=kernel, backend=backend, timeout=timeout,
        run_timeout=run_timeout, model_path=model_path, step_shapes="envelope", capture=True,
        method="random", halo=False,
        eval_every=epochs if not evaluate and isinstance(epochs, int) and epochs > 0 else 1,
    )  # fmt: skip
    if isinstance(options["fanouts"], list):
        options["num_layers"] = len(options["fanouts"])
    hist = grappa.train(g, **options)
    keep = ("epoch", "seconds", "loss", "iterations", "rewound_batches")
    rows = [
        {**{k: e.get(k, 0) for k in keep}, "overflows": e.get("envelope_overflows", 0)}
        | ({"val_acc": e["val_acc"]} if evaluate and e["val_acc"] is not None else {})
        for e in hist["epochs"]
    ]
    return {
        "format": "zg.parallel.history", "workers": hist["workers"], "backend": hist["backend"],
        "kernel": hist["kernel"], "captured": hist["captured"], "epochs": rows, "seconds_per_epoch": hist["seconds_per_epoch"],
        "bytes_sent_per_worker": hist["bytes_sent_per_worker"][0], "grappa_history": hist,
    }  # fmt: skip
