"""The plan a config implies for a graph: iterations per epoch, the partition, and the check that
every worker can run it.

Where it sits: after the record (:mod:`zg.grappa.config`: what a run is), before any worker
starts. :func:`zg.grappa.train` makes the partition and checks the plan here once; every worker
(and every rank under torchrun, from the same config and seed) computes the same plan. The
super-epoch of an epoch follows from the config alone (:func:`zg.grappa.config.super_epoch_of`).
"""

from __future__ import annotations

import math

import torch

from ..graph import Graph
from ._checks import blamed_on, blames
from .config import TrainConfig, super_epoch_of
from .partition import EmptyPartitionError, Partition, partition

__all__ = ["iterations_per_epoch", "make_partition", "check_plan", "super_epoch_of"]


def iterations_per_epoch(cfg: TrainConfig, num_train: int) -> int:
    """I: the iterations every worker runs per epoch (one with batching="full"), from the number of
    training nodes of the whole graph and the global batch size."""
    return 1 if cfg.batching == "full" else math.ceil(num_train / cfg.batch_size)


def make_partition(g: Graph, cfg: TrainConfig) -> Partition:
    """The partition a config asks for (what every rank computes identically under torchrun).
    A chunk left empty is blamed on ``num_chunks`` (``workers`` when num_chunks is None: the
    chunks are the workers' parts)."""
    with blames("workers" if cfg.num_chunks is None else "num_chunks", (EmptyPartitionError,)):
        return partition(
            g,
            cfg.workers,
            cfg.method,
            cfg.seed,
            num_chunks=cfg.num_chunks,
            halo=cfg.halo,
            schedule=cfg.schedule,
        )


def check_plan(g: Graph, cfg: TrainConfig, part: Partition) -> None:
    """Every worker needs at least one seed per iteration in every super-epoch it will see."""
    if not isinstance(part, Partition):
        raise TypeError(f"partition must be a zg.grappa.Partition, got {type(part).__name__}")
    if part.num_nodes != g.num_nodes:
        raise ValueError(f"partition was made for {part.num_nodes} nodes but g has {g.num_nodes}")
    if part.num_parts != cfg.workers:
        raise blamed_on(
            "workers",
            ValueError(f"partition has num_parts={part.num_parts} but workers={cfg.workers}"),
        )
    if cfg.trainer_object.shares_batches:  # every worker holds the whole graph
        if cfg.batch_size < cfg.workers:
            raise blamed_on(
                "batch_size",
                ValueError(
                    f"batch_size={cfg.batch_size} is smaller than workers={cfg.workers}: every "
                    "worker needs a share of each global batch"
                ),
            )
        return
    iterations = iterations_per_epoch(cfg, g.train_idx.numel())
    touched = super_epoch_of(cfg, cfg.epochs - 1) + 1  # super-epochs 0 .. touched-1
    for s in range(min(touched, part.num_super_epochs)):
        counts = torch.bincount(part.owner(s)[g.train_idx.cpu()], minlength=cfg.workers)
        worst = int(torch.argmin(counts))
        if int(counts[worst]) < iterations:
            raise blamed_on(
                "batch_size",
                ValueError(
                    f"batch_size={cfg.batch_size} makes {iterations} iterations per epoch, but "
                    f"worker {worst} owns only {int(counts[worst])} training nodes in super-epoch "
                    f"{s} (empty partition: every worker runs the same number of iterations, "
                    "each with at least one seed of its own); use a larger batch_size or fewer "
                    "workers"
                ),
            )
