"""Grappa: distributed GNN training where partitions train in isolation and exchange only
gradients (the idea of arXiv 2602.01872), built on ``torch.distributed``.

The flow, one module per stage:

    partition.py    chunks, the sweeping schedule of super-epochs, local graphs, statistics
    coverage.py     how much of each node's L-hop neighbourhood its worker sees
    estimators.py   mean / node / batch / shrink, the paper's "reference" weighting (+ a uniform
                    control): how gradients combine
    trainers.py     one policy class per trainer (grappa, isolated, psgd_pa, feature_fetch,
                    single): its flags, the defaults it resolves, the settings it fixes
    presets.py      named configurations: "reference" = the authors' public code
    config.py       the record: TrainConfig = Experiment + Runtime + Output, its checks
    plan.py         what a config implies for a graph: iterations per epoch, the partition
    local.py        what a worker trains on, its local data: its isolated local graph;
                    remote.py: the feature-fetching baseline's (whole structure, remote
                    features)
    exchange.py     the one gradient exchange: a flat all-reduce inside the step
    collectives.py  parameter averaging, per-iteration scalars, checkpoint rows
    roles.py        what a worker of a trainer builds: its local data, its exchange or averaging
    worker.py       the worker loop (a zg.Engine on its local graph), hooks for tests
    checkpoint.py   checkpoints and resuming; history.py: the history JSON
    launch.py       worker processes (torch.multiprocessing or torchrun), timeouts, free ports
    train.py        the entry points: train, train_many
    comm.py         bytes sent per worker by kind, and a link model that projects epoch time
    gradient.py     each estimator's error against the exact full-graph gradient
    fullgraph.py    full-neighbourhood forward with autograd (the exact reference, full mode);
                    evaluation is zg.inference.evaluate, the kit's one full-graph evaluator

    from zg import grappa
    part = grappa.partition(g, num_parts=4, method="random", seed=0)
    cov  = grappa.coverage(g, part, hops=2)
    hist = grappa.train(g, workers=4, estimator="batch", repartition_every=5, epochs=20, seed=0)
    hist = grappa.train(g, workers=4, preset="reference", epochs=20, seed=0)   # the public code
    err  = grappa.gradient_error(g, model, part, estimator="batch")

A worker's exception reaches the caller as itself (``except grappa.CheckpointError`` works
around ``grappa.train``; see :func:`zg.grappa.launch.spawn`). Scripts that call
``grappa.train`` put the call under ``if __name__ == "__main__":`` (the workers re-import the
main script); without it, ``grappa.MainGuardError`` says so.

Nothing here imports DGL; pymetis is imported only for ``method="metis"``.
"""

from ..errors import MainGuardError, WorkerFailed, ZgError
from . import comm, estimators, presets
from .comm import LINKS, CommLedger, Link, project_seconds
from .config import ABLATIONS, Experiment, Output, Runtime
from .coverage import coverage, local_coverage
from .estimators import (
    ESTIMATOR_CLASSES,
    ESTIMATORS,
    WEIGHTINGS,
    Estimator,
    register_estimator,
    unregister_estimator,
)
from .fullgraph import evaluate, whole_graph_block
from .gradient import exact_gradient, gradient_error, random_partitions
from .partition import METHODS, SCHEDULES, LocalGraph, Partition, partition
from .presets import PRESETS
from .train import CheckpointError, TrainConfig, train, train_many
from .trainers import TRAINERS, Trainer, get_trainer

__all__ = [
    "partition",
    "Partition",
    "LocalGraph",
    "coverage",
    "local_coverage",
    "Estimator",
    "register_estimator",
    "unregister_estimator",
    "train",
    "train_many",
    "TrainConfig",
    "Experiment",
    "Runtime",
    "Output",
    "Trainer",
    "get_trainer",
    "gradient_error",
    "exact_gradient",
    "random_partitions",
    "evaluate",
    "whole_graph_block",
    "comm",
    "estimators",
    "CommLedger",
    "Link",
    "LINKS",
    "project_seconds",
    "ESTIMATORS",
    "ESTIMATOR_CLASSES",
    "WEIGHTINGS",
    "METHODS",
    "SCHEDULES",
    "TRAINERS",
    "ABLATIONS",
    "PRESETS",
    "presets",
    "CheckpointError",
    "MainGuardError",
    "WorkerFailed",
    "ZgError",
]
