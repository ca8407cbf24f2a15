"""Grappa's run configuration: :class:`TrainConfig`, its checks, and the plan it implies.

Where it sits: first thing :func:`zg.grappa.train` does (and ``python -m zg.grappa``); every
worker reads the same config. The iterations per epoch, the super-epoch of an epoch and the
partition a config asks for are defined here once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional

import torch

from .. import models as zg_models
from ..graph import Graph
from ..sampling import check_fanouts
from ._checks import bool_arg, choice_arg, int_arg, real_arg
from .estimators import Estimator
from .partition import METHODS, SCHEDULES, Partition, partition

__all__ = ["TrainConfig", "TRAINERS", "MODES", "SAMPLERS", "ABLATIONS", "super_epoch_of", "iterations_per_epoch",
           "make_partition", "check_plan"]

TRAINERS = ("grappa", "isolated", "psgd_pa", "feature_fetch", "single")
MODES = ("minibatch", "full")
SAMPLERS = ("dynamic", "envelope")
# The paper's ablations of Grappa (trainer="grappa" only), each a shorthand for the setting it
# names: "unweighted" = estimator "mean" (the plain mean of the workers' gradients, no coverage
# correction); "fixed_partitions" = repartition_every None (the chunks never regroup).
ABLATIONS = ("unweighted", "fixed_partitions")
MAX_LAYERS = 64                 # more is a typo, and [10] * num_layers must stay small
MAX_SECONDS = 1e7               # ~4 months: beyond this a timeout is a typo (and overflows timedelta)


# ----------------------------------------------------------------------------- configuration


@dataclass
class TrainConfig:
    """Everything a run needs besides the graph. JSON-serialisable (``asdict``).

    trainer, workers (P), estimator, weighting, coverage_floor, shrink: see the module and
    :mod:`zg.grappa.estimators`. repartition_every: epochs per super-epoch (None or 0: never).
    ablation: None, or one of the paper's ablations of trainer "grappa" (:data:`ABLATIONS`):
    "unweighted" (sets estimator "mean": the plain mean of the workers' gradients, no
    coverage correction) or "fixed_partitions" (sets repartition_every None: no
    repartitioning); it overrides the estimator or repartition_every given with it.
    method, num_chunks, halo, schedule: see :func:`zg.grappa.partition`; the defaults are METIS
    chunks (needs pymetis, a dependency of the kit) with the one-hop halo, because on random
    chunks isolation costs accuracy that no estimator wins back, and METIS without the halo
    still missed the 1-point acceptance bound on one unseen graph (docs/grappa_diagnosis.md);
    ``method="random", halo=False`` is the paper's own setting. mode: "minibatch" or
    "full". model, hidden_dim, num_layers, dropout: see :func:`zg.models.build`. fanouts:
    input layer first (default 10 per layer). sampler: "dynamic" (host-mediated, the
    reference) or "envelope" (each worker runs the ZeroGNN fixed-shape step on its local
    graph: envelope sampler, padded blocks, no host syncs in the iteration). envelope,
    envelope_quantile, envelope_margin: how each worker sizes its envelope for every
    super-epoch ("profiled": :meth:`zg.Envelope.profile` on its local graph with that quantile
    and margin; "worst_case": never overflows). An epoch in which any worker overflowed is
    rewound exactly (parameters, optimizer state and RNG restored on every worker), the
    overflowing envelopes grow, and the epoch runs again; the history counts these replays.
    batch_size: global seeds per iteration. lr,
    weight_decay: Adam. average_every: psgd_pa's averaging period in iterations (default one
    epoch). eval_every: evaluate every k epochs (and after the last). backend: gloo / nccl /
    None (auto). timeout: seconds any collective may wait. run_timeout: seconds the whole run
    may take (None: no limit). threads: torch threads per worker (default cores / P).
    history_path: where rank 0 writes the history JSON. model_path: where rank 0 saves the
    final ``state_dict`` (torch.save), if given. checkpoint_dir: a folder for the run's
    checkpoint (``checkpoint.pt``; None: no checkpoints); a run that finds one there resumes from
    it (see the module docstring). Under torchrun across machines it only needs to be on rank
    0's machine: rank 0 reads it and broadcasts it. checkpoint_every: epochs between checkpoints
    (default: one super-epoch, ``repartition_every``, or every epoch when never repartitioning);
    the last epoch is always checkpointed, so a finished run started again only rewrites its
    history. progress: a tqdm bar on rank 0.
    dataset: only for the command line (``python -m zg.grappa``): which graph to load.
    """

    trainer: str = "grappa"
    workers: int = 2
    estimator: str = "batch"
    weighting: str = "inverse"
    coverage_floor: float = 0.05
    shrink: Any = "auto"
    repartition_every: Optional[int] = 5
    ablation: Optional[str] = None
    epochs: int = 20
    seed: int = 0
    method: str = "metis"
    num_chunks: Optional[int] = None
    halo: bool = True
    schedule: str = "round_robin"
    mode: str = "minibatch"
    model: str = "sage"
    hidden_dim: int = 64
    num_layers: int = 2
    dropout: float = 0.5
    fanouts: Optional[List[int]] = None
    sampler: str = "dynamic"
    envelope: str = "profiled"
    envelope_quantile: float = 0.99
    envelope_margin: float = 0.05
    batch_size: int = 512
    lr: float = 0.01
    weight_decay: float = 0.0
    average_every: Optional[int] = None
    eval_every: int = 1
    backend: Optional[str] = None
    timeout: float = 120.0
    run_timeout: Optional[float] = None
    threads: Optional[int] = None
    history_path: Optional[str] = None
    model_path: Optional[str] = None
    checkpoint_dir: Optional[str] = None
    checkpoint_every: Optional[int] = None
    progress: bool = False
    dataset: Any = None

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "TrainConfig":
        if not isinstance(values, dict):
            raise TypeError(f"config must be a dict (a JSON object), got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; known keys: {sorted(known)}")
        return cls(**values).validated()

    def validated(self) -> "TrainConfig":
        """Check every field (errors name it) and apply what each trainer implies."""
        choice_arg(self.trainer, "trainer", TRAINERS)
        int_arg(self.workers, "workers", low=1)
        Estimator(self.estimator, self.weighting, self.coverage_floor, self.shrink)
        if self.repartition_every is not None:
            int_arg(self.repartition_every, "repartition_every", low=0)
        if self.ablation is not None:
            choice_arg(self.ablation, "ablation", ABLATIONS)
            if self.trainer != "grappa":
                raise ValueError(f"ablation={self.ablation!r} is an ablation of trainer='grappa'; "
                                 f"got trainer={self.trainer!r}")
        int_arg(self.epochs, "epochs", low=1)
        int_arg(self.seed, "seed", low=0, high=2**63 - 1)                # torch.manual_seed's range
        choice_arg(self.method, "method", METHODS)
        if self.num_chunks is not None:
            int_arg(self.num_chunks, "num_chunks", low=1)
        bool_arg(self.halo, "halo")
        choice_arg(self.schedule, "schedule", SCHEDULES)
        choice_arg(self.mode, "mode", MODES)
        choice_arg(self.model, "model", tuple(zg_models.MODELS))
        int_arg(self.hidden_dim, "hidden_dim", low=1)
        int_arg(self.num_layers, "num_layers", low=1, high=MAX_LAYERS)
        real_arg(self.dropout, "dropout", low=0.0, high=0.999)
        if self.fanouts is None:
            self.fanouts = [10] * self.num_layers
        self.fanouts = check_fanouts(self.fanouts)
        if len(self.fanouts) != self.num_layers:
            raise ValueError(f"fanouts has {len(self.fanouts)} entries but num_layers="
                             f"{self.num_layers}; give one fanout per layer")
        choice_arg(self.sampler, "sampler", SAMPLERS)
        choice_arg(self.envelope, "envelope", ("profiled", "worst_case"))
        real_arg(self.envelope_quantile, "envelope_quantile", low=0.0, high=1.0, low_open=True)
        real_arg(self.envelope_margin, "envelope_margin", low=0.0, high=10.0)
        if self.sampler == "envelope" and (self.mode != "minibatch" or self.trainer == "feature_fetch"):
            raise ValueError(f"sampler='envelope' samples each worker's local graph in mode='minibatch' "
                             f"(trainers grappa, isolated, psgd_pa, single); got trainer="
                             f"{self.trainer!r}, mode={self.mode!r}")
        int_arg(self.batch_size, "batch_size", low=1)
        real_arg(self.lr, "lr", low=0.0, low_open=True)
        real_arg(self.weight_decay, "weight_decay", low=0.0)
        if self.average_every is not None:
            int_arg(self.average_every, "average_every", low=1)
        int_arg(self.eval_every, "eval_every", low=1)
        if self.backend is not None:
            choice_arg(self.backend, "backend", ("gloo", "nccl"))
        real_arg(self.timeout, "timeout", low=0.0, high=MAX_SECONDS, low_open=True)
        if self.run_timeout is not None:
            real_arg(self.run_timeout, "run_timeout", low=0.0, high=MAX_SECONDS, low_open=True)
        if self.threads is not None:
            int_arg(self.threads, "threads", low=1)
        for name in ("history_path", "model_path", "checkpoint_dir"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{name} must be a non-empty str (a path) or None, got "
                                f"{type(value).__name__} {value!r}")
        if self.checkpoint_every is not None:
            int_arg(self.checkpoint_every, "checkpoint_every", low=1)
        bool_arg(self.progress, "progress")
        if self.dataset is not None and not isinstance(self.dataset, (str, dict)):
            raise TypeError(f"dataset must be a name, an object or None, got "
                            f"{type(self.dataset).__name__} {self.dataset!r}")
        if self.ablation == "unweighted":
            self.estimator = "mean"
        if self.ablation == "fixed_partitions":
            self.repartition_every = None
        if self.trainer == "single":
            self.workers, self.num_chunks = 1, 1
        if self.trainer in ("single", "isolated", "feature_fetch"):
            self.estimator = "mean"
        if self.trainer != "grappa":
            self.repartition_every = None
        if self.trainer == "feature_fetch" and self.mode != "minibatch":
            raise ValueError("trainer='feature_fetch' trains in mode='minibatch' (it fetches the "
                             "features of sampled neighbourhoods); got mode='full'")
        if self.repartition_every == 0:
            self.repartition_every = None
        if self.checkpoint_every is None:
            self.checkpoint_every = self.repartition_every or 1
        return self

    @property
    def estimator_object(self) -> Estimator:
        return Estimator(self.estimator, self.weighting, self.coverage_floor, self.shrink)


def super_epoch_of(cfg: TrainConfig, epoch: int) -> int:
    return 0 if not cfg.repartition_every else epoch // cfg.repartition_every


def iterations_per_epoch(cfg: TrainConfig, num_train: int) -> int:
    return 1 if cfg.mode == "full" else math.ceil(num_train / cfg.batch_size)


def make_partition(g: Graph, cfg: TrainConfig) -> Partition:
    """The partition a config asks for (what every rank computes identically under torchrun)."""
    return partition(g, cfg.workers, cfg.method, cfg.seed, num_chunks=cfg.num_chunks,
                     halo=cfg.halo, schedule=cfg.schedule)


def check_plan(g: Graph, cfg: TrainConfig, part: Partition) -> None:
    """Every worker needs at least one seed per iteration in every super-epoch it will see."""
    if not isinstance(part, Partition):
        raise TypeError(f"partition must be a zg.grappa.Partition, got {type(part).__name__}")
    if part.num_nodes != g.num_nodes:
        raise ValueError(f"partition was made for {part.num_nodes} nodes but g has {g.num_nodes}")
    if part.num_parts != cfg.workers:
        raise ValueError(f"partition has num_parts={part.num_parts} but workers={cfg.workers}")
    iterations = iterations_per_epoch(cfg, g.train_idx.numel())
    touched = super_epoch_of(cfg, cfg.epochs - 1) + 1                  # super-epochs 0 .. touched-1
    for s in range(min(touched, part.num_super_epochs)):
        counts = torch.bincount(part.owner(s)[g.train_idx.cpu()], minlength=cfg.workers)
        worst = int(torch.argmin(counts))
        if int(counts[worst]) < iterations:
            raise ValueError(
                f"empty partition: worker {worst} owns {int(counts[worst])} training nodes in "
                f"super-epoch {s}, fewer than the {iterations} iterations of an epoch; use fewer "
                "workers or a larger batch_size")


