"""zg.experiments.together: Grappa workers that each run the ZeroGNN fixed-shape step, against
both baselines (notebook 09).

Where it sits: at the end of both halves. :func:`worker_syncs` counts the host syncs of one
step of the :class:`zg.Engine` a Grappa worker runs, per sampler; :func:`train_together`
trains the :data:`TOGETHER` variants with real worker processes in one launch. Figures:
:func:`zg.viz.host_syncs`, :func:`zg.viz.variant_summary`, :func:`zg.viz.bytes_by_kind`.

    syncs = ex.worker_syncs(g, workers=2, fanouts=[10, 10], batch_size=256)
    result = ex.train_together(g, workers=2, epochs=10)       # {"rows": [...], "histories": {...}}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .._checks import seed_arg
from ..audit import SyncAudit
from ..graph import Graph
from ..sampling import check_fanouts
from ._progress import RunProgress
from .host_syncs import _audit_summary

__all__ = ["TOGETHER", "worker_syncs", "train_together"]

TOGETHER = {
    "grappa + envelope": dict(trainer="grappa", step_shapes="envelope"),
    "grappa + dynamic": dict(trainer="grappa", step_shapes="dynamic"),
    "feature fetch": dict(trainer="feature_fetch", step_shapes="dynamic"),
}


def worker_syncs(
    g: Graph,
    *,
    workers: int = 2,
    fanouts: Sequence[int] = (10, 10),
    batch_size: int = 256,
    seed: int = 0,
    rank: int = 0,
) -> dict:
    """Host syncs of one training step of a Grappa worker's Engine, per sampler.

    Builds worker ``rank``'s local data of a ``workers``-way random partition exactly as
    :func:`zg.grappa.train` does (its local graph, coverage weights and envelope) and the
    ``zg.Engine`` a worker runs on it (without the process group: the collectives are not
    counted), warms it up, then runs one step under a :class:`~zg.audit.SyncAudit` with each
    sampler, on the torch path (``kernel="torch"``, the ops a GPU runs and the audit can see).
    Returns ``{"dynamic": summary, "envelope": summary, "envelope_sizes": [...],
    "local_nodes": n, "rows": batch rows}`` (summaries as :func:`~zg.experiments.host_syncs.audit_samplers`).
    """
    from ..engine import Engine, StepHooks
    from ..grappa import partition as make_partition
    from ..grappa.config import TrainConfig
    from ..grappa.local import LocalData
    from ..grappa.worker import worker_model

    fanouts, seed = check_fanouts(fanouts), seed_arg(seed)
    part = make_partition(g, workers, method="random", seed=seed)
    out: dict = {}
    for sampler in ("dynamic", "envelope"):
        cfg = TrainConfig(
            workers=workers,
            step_shapes=sampler,
            fanouts=list(fanouts),
            num_layers=len(fanouts),
            batch_size=batch_size,
            seed=seed,
        ).validated()
        local = LocalData(cfg, g, part, rank, workers, torch.device("cpu"), cfg.estimator_object)
        local.start_super_epoch(0)
        model = worker_model(cfg, g, torch.device("cpu"))
        # The worker's own Engine (as zg.grappa.worker builds it, minus the process group).
        eng = Engine(
            local.graph,
            model,
            cfg.fanouts,
            local.rows,
            envelope=local.envelope if sampler == "envelope" else "worst_case",
            mode="static" if sampler == "envelope" else "dynamic",
            seed=local.seed,
            hooks=StepHooks(nodes=local.train_nodes, batches=local.batches),
            kernel="torch",  # the ops SyncAudit sees (the CPU's numba kernel runs below it)
        )
        eng.observers = []
        eng.run_batch(0)  # warm-up: first calls allocate lazily
        with SyncAudit(where=True) as audit:
            eng.run_batch(1)
        out[sampler] = _audit_summary(audit)
        if sampler == "envelope":
            out["envelope_sizes"] = eng.envelope.sizes
            out["local_nodes"] = local.graph.num_nodes
            out["rows"] = eng.rows
    return out


def train_together(
    g: Graph,
    *,
    workers: int = 2,
    epochs: int = 10,
    batch_size: int = 256,
    fanouts: Sequence[int] = (10, 10),
    hidden_dim: int = 64,
    seed: int = 0,
    variants: Sequence[str] | None = None,
    **options: Any,
) -> dict:
    """Train the :data:`TOGETHER` variants with real worker processes in one launch.

    ``grappa + envelope``: Grappa workers each running the ZeroGNN fixed-shape step on their
    local graph (``step_shapes="envelope"``). Baselines: the same Grappa workers with the
    host-mediated dynamic sampler, and feature fetching (every worker samples the whole
    graph's structure and fetches remote features each iteration). Same model, seed and
    batches everywhere; ``options`` go to every run (``lr``, ``repartition_every``, ...) whose
    trainer does not fix them (:meth:`zg.grappa.Trainer.shared_options`: feature fetching never
    repartitions).

    Returns ``{"rows": [...], "histories": {variant: history}}``; a row holds the variant,
    ``seconds_per_epoch`` (median), ``bytes_per_epoch_per_worker``, ``test_acc`` (final),
    ``best_val_acc``, ``envelope_overflows`` and ``rewound_batches`` (totals: each overflow
    rewinds every worker to the first overflowed batch) and ``bytes_by_kind`` (summed over
    epochs, per worker). A bar ticks once per finished variant (:mod:`zg.experiments._progress`).
    """
    from ..grappa import train_many
    from ..grappa.history import bytes_by_kind_per_worker
    from ..grappa.trainers import get_trainer

    names = list(TOGETHER) if variants is None else list(variants)
    unknown = [n for n in names if n not in TOGETHER]
    if unknown or not names:
        raise ValueError(
            f"variants must be a non-empty list drawn from {list(TOGETHER)}, got {variants!r}"
        )
    fanouts, seed = check_fanouts(fanouts), seed_arg(seed)
    common = dict(
        workers=workers,
        epochs=epochs,
        batch_size=batch_size,
        fanouts=list(fanouts),
        num_layers=len(fanouts),
        hidden_dim=hidden_dim,
        seed=seed,
        **options,
    )
    runs = [
        dict(get_trainer(TOGETHER[n]["trainer"]).shared_options(common), **TOGETHER[n])
        for n in names
    ]
    with RunProgress(len(runs), desc="training runs") as bar:
        histories = [bar.forget(h) for h in train_many(g, [bar.watch(o) for o in runs])]
    rows = []
    for name, h in zip(names, histories):
        kinds = bytes_by_kind_per_worker(h)
        rows.append(
            {
                "variant": name,
                "seconds_per_epoch": h["seconds_per_epoch"],
                "bytes_per_epoch_per_worker": h["bytes_per_epoch_per_worker"],
                "test_acc": h["final"]["test_acc"],
                "best_val_acc": h["final"]["best_val_acc"],
                "envelope_overflows": sum(e.get("envelope_overflows", 0) for e in h["epochs"]),
                "rewound_batches": sum(e.get("rewound_batches", 0) for e in h["epochs"]),
                "bytes_by_kind": {k: v for k, v in kinds.items() if any(v)},
            }
        )
    return {"rows": rows, "histories": dict(zip(names, histories))}
