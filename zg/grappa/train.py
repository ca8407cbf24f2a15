"""Grappa training for real: P worker processes, isolated local graphs, gradient-only exchange.

Where it sits: the top of the Grappa half. ``train(g, config=None, **overrides)`` (e.g.
``train(g, workers=P, ...)``) validates a :class:`TrainConfig`, partitions the graph, spawns P
processes (:mod:`zg.grappa.launch`: gloo on CPU, nccl on GPUs, timeouts everywhere) and runs :func:`run_worker` in each; the same
function runs under ``torchrun ... -m zg.grappa --config cfg.json``. The package is split by
concept: :mod:`~zg.grappa.config` (the record, TrainConfig), :mod:`~zg.grappa.plan` (what it
implies for a graph: partition, iterations), :mod:`~zg.grappa.local` (a worker's local data),
:mod:`~zg.grappa.exchange` (the one gradient exchange), :mod:`~zg.grappa.collectives` (the workers' few other collectives), :mod:`~zg.grappa.worker` (the worker: a
``zg.Engine`` on its local graph), :mod:`~zg.grappa.trainers` (one policy class per trainer),
:mod:`~zg.grappa.roles` (what a worker of each trainer builds), :mod:`~zg.grappa.checkpoint`,
:mod:`~zg.grappa.history`; this module holds the entry points. One
iteration of a worker (the one training step, :func:`zg.step.train_step`):

    seeds (its own training nodes) -> sample on its LOCAL graph -> gather LOCAL features
    -> forward -> per-seed loss l_v -> [all_gather 3 scalars] -> loss = sum f_v l_v
    -> backward -> exchange (grad * s_p, one all_reduce SUM, + the overflow flag) -> step (gated)

with ``f_v`` and ``s_p`` from the estimator (:mod:`zg.grappa.estimators`). Nothing but
gradients and those scalars crosses the wire; every ``repartition_every`` epochs a new
super-epoch regroups the chunks (:mod:`zg.grappa.partition`) and each worker rebuilds its
local graph, sampler and coverage weights. Rank 0 evaluates on the full graph every
``eval_every`` epochs and writes the history JSON, and reports each epoch to the calling
process, which draws the run's progress bar (:mod:`~zg.grappa.progress`: a widget in the
notebook cell that called ``train``; the workers draw none). An epoch's ``seconds`` is the
whole epoch (steps, evaluation, regrouping, bookkeeping), and its ``account`` says where they
went, per worker (:mod:`zg.grappa.account`).

Trainers (``trainer=``, one class each in :mod:`zg.grappa.trainers`), all through
:func:`run_worker`, so they differ only where they must:

    grappa          the above
    isolated        the same workers, estimator "mean", never repartitioned (no correction)
    psgd_pa         isolated local training, each worker its own optimizer, and every
                    ``average_every`` iterations (default: once per epoch) the parameters are
                    averaged with one all_reduce (periodic model averaging)
    feature_fetch   every worker samples on the whole graph's structure (as ``single`` does),
                    owns only its partition's features and fetches the remote ones every
                    iteration (:mod:`zg.grappa.remote`); gradients averaged ("mean")
    single          one process, the whole graph: the accuracy ceiling

Iterations: ``batch_size`` is the *global* number of seeds per iteration. An epoch has
``I = ceil(|train| / batch_size)`` iterations on every worker (a collective needs everyone),
and each worker splits its own shuffled training nodes into I near-equal batches, so every
training node is a seed once per epoch whatever the trainer. ``batching="full"``: one iteration
per epoch on the whole local graph (all neighbours, all local training nodes).

Reproducible: the same config and seed give the same losses, accuracies and byte counts on the
same machine and torch version (seeded init, seeded samplers, deterministic gloo reductions at
fixed P). Every random draw derives from (seed, rank, epoch, batch) (:mod:`zg.rng`): the
shuffle, the sampler's keys and the dropout generator, which is reseeded before every batch. No
random stream runs across batches, so a batch can be rerun (after an envelope overflow) or a run
resumed exactly.

Envelope overflow (``step_shapes="envelope"``): the one overflow policy of :mod:`zg.step`. An
overflowed batch is never applied: the flag rides the gradient all-reduce, so an overflow on any
worker stops every worker's optimizer step from that batch on, on the device; the host polls the
flag every few iterations (every worker at the same ones), the overflowing workers grow their
envelopes, and all resume from the first overflowed batch. The history counts
``envelope_overflows`` and ``rewound_batches`` per epoch.

Failure and restart: with ``checkpoint_dir`` set, rank 0 writes a checkpoint every
``checkpoint_every`` epochs (atomically: a temporary file, then a rename): the parameters and
Adam state (one copy under DDP, where every worker holds the same ones, which is checked when
writing; one per worker for psgd_pa), the epoch to resume at, the history records so far and
the config. A run that finds a checkpoint there resumes from it on every rank: the epochs before
it are kept in the history, none is run twice, and the result is the same as an uninterrupted
run's. That is what makes ``torchrun --max-restarts=N`` useful: when a worker dies, torchrun
restarts all of them and they continue from the last checkpoint. A checkpoint that cannot be
read, or was written by a run with another config or graph, stops every rank with
:class:`CheckpointError` before any training; the graph is compared by content (a digest each
of its structure, features, labels and splits, :func:`zg._io.graph_fingerprint`), so a graph of
the same sizes with other features is refused, the differing part named. A peer that stops
answering makes every other worker fail after ``timeout`` seconds with a ``TimeoutError``
naming the timeout (gloo enforces it on every collective; under nccl, torch's watchdog does).

Stopping a run: an interrupt (Ctrl-C, JupyterLab's "interrupt kernel") or ``SIGTERM`` sent to
the calling process alone stops every worker within seconds, removes the run's temporary
folders, writes no history (a history means the run finished) and re-raises
(``KeyboardInterrupt``; ``SIGTERM`` as ``SystemExit(143)``); checkpoints already written stay
and a later run resumes from them. ``zg grappa`` then exits 130 (interrupt) or 143 (SIGTERM).
See :func:`zg.grappa.launch.spawn`; tested in ``tests/core/test_runs_end_cleanly.py``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from dataclasses import fields, replace
from typing import Any

from .. import log
from ..graph import Graph
from ._checks import blamed_on, check_output_paths, graph_arg
from .checkpoint import (
    CheckpointError,
    checkpoint_file,
    checkpoint_locks,
    read_checkpoint,
)
from .collectives import average_parameters, gather_stats
from .config import (
    BATCHINGS,
    STEP_SHAPES,
    TRAINERS,
    UNSET,
    Experiment,
    Output,
    Runtime,
    TrainConfig,
    map_deprecated,
    super_epoch_of,
)
from .history import bytes_by_kind, bytes_per_worker, write_json
from .launch import spawn
from .local import LocalData
from .partition import Partition
from .plan import check_plan, iterations_per_epoch, make_partition
from .presets import apply_preset
from .progress import ParentBar, show_bar
from .worker import run_worker

__all__ = [
    "TrainConfig",
    "Experiment",
    "Runtime",
    "Output",
    "train",
    "train_many",
    "run_worker",
    "TRAINERS",
    "BATCHINGS",
    "STEP_SHAPES",
    "make_partition",
    "iterations_per_epoch",
    "super_epoch_of",
    "CheckpointError",
    "checkpoint_file",
    "read_checkpoint",
    "LocalData",
    "bytes_by_kind",
    "bytes_per_worker",
    "write_json",
]

# Kept for callers of the one-module layout (tests, notebooks of earlier rounds).
_check_plan = check_plan
_average_parameters = average_parameters
_gather_stats = gather_stats


# ----------------------------------------------------------------------------- the entry point


def train(
    g: Graph,
    config: TrainConfig | None = None,
    *,
    partition: Partition | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Train with P worker processes on this machine and return the history.

    ``train(g, workers=4, epochs=20, seed=0)``: the fields given, every other one its default;
    ``train(g, cfg)``: a :class:`TrainConfig` as it is; ``train(g, cfg, seed=1)``: that config
    with some fields replaced. What these defaults give, and where they hold, is measured in
    docs/grappa.md, section "What grappa.train runs by default, and where it holds".

    Args:
        g: the graph, with features, labels, train and val splits (rank 0 evaluates on val).
        config: a :class:`TrainConfig`, or None (the default). None: every field not given in
            ``overrides`` takes train()'s default below (or, with ``preset=``, the preset's).
            A config: its fields as they are, each field given in ``overrides`` replaced (as
            ``dataclasses.replace``). A TrainConfig resolves the defaults that depend on
            another field when it is built (its own ``workers`` default is 2; estimator and
            repartition_every follow the trainer, fanouts num_layers, checkpoint_every
            repartition_every), and an override does not resolve them again: overriding
            ``trainer`` or ``num_layers`` may need those fields too (the ValueError names
            them). A config's ``preset`` is a record of its name only: build a preset's config
            with ``TrainConfig.from_dict({"preset": "reference", ...})``, or pass ``preset=``
            without a config (``preset=`` together with a config is a ValueError).
        partition: a precomputed :class:`Partition` for P workers (default None: made from the
            config); its method, chunks, halo and schedule then replace the config's.
        **overrides: :class:`TrainConfig` fields, by keyword (every field of its three groups
            is accepted; a name that is not one is a TypeError). The ones most runs set, with
            train()'s defaults:

            workers: P, 1 <= P <= nodes; default 4 (the trainer's own where it has one:
                single 1).
            epochs: 20. seed: 0, an int in [0, 2**63 - 1] (:func:`zg._checks.seed_arg`).
            trainer: "grappa" (default) | "isolated" | "psgd_pa" | "feature_fetch" | "single"
                (:mod:`zg.grappa.trainers`).
            estimator: how the gradients combine, a name of :mod:`zg.grappa.estimators`
                ("mean", "node", "batch", "shrink", "reference": the public code's weighting,
                "uniform": a control, ...); default "batch" for grappa, "mean" (the only
                choice) for the other trainers.
                weighting "inverse", coverage_floor 0.05, shrink "auto": its settings.
            repartition_every: epochs per super-epoch; default 5 for grappa, None (never) for
                the others; 0 also means never.
            method "metis", num_chunks None (2P; P under schedule "partner_sweep"), halo True,
                schedule "round_robin": the partition (:func:`zg.grappa.partition`).
            batching "minibatch", step_shapes "dynamic", model "sage", hidden_dim 64,
                num_layers 2, dropout 0.5, fanouts 10 per layer, batch_size 512 (global seeds
                per iteration), lr 0.01, weight_decay 0.0 (Adam).
            preset: None (default) or "reference", the authors' public code
                (:mod:`zg.grappa.presets`): every field not given comes from it; fields given
                override it and the history lists them (``preset.overrides``). With
                ``trainer="single"`` or ``"isolated"`` the same preset runs the same model and
                training settings.
            history_path: where to keep the history JSON (default None: a temporary file,
                removed).
            The rest (timeout, run_timeout, threads, kernel, backend, envelope, model_path,
            checkpoint_dir, checkpoint_every, eval_every, progress, ...): see
            :class:`TrainConfig`.

            A setting that contradicts the trainer (``trainer="isolated", estimator="batch"``)
            is a ValueError naming both; nothing is silently rewritten. The paper's ablations
            are settings: unweighted aggregation ``estimator="mean"``, fixed partitions
            ``repartition_every=None``. Deprecated names, mapped with a DeprecationWarning:
            ``ablation=`` (to those settings), ``mode=`` (now ``batching=``), ``sampler=``
            (now ``step_shapes=``).

    Returns:
        The history dict (also the JSON's content): ``epochs`` (loss, val_acc, test_acc,
        seconds, account, bytes_sent per worker, bytes_by_kind, rounds per epoch), ``final``,
        ``bytes_sent_per_worker``, ``bytes_per_epoch_per_worker``, ``seconds_per_epoch``,
        ``partition``, ``config``, ``path`` (``history_path``, or None).

    Raises:
        TypeError / ValueError naming the field, before any process starts (a bad seed too).
        Options given by position are refused: up to release 0.4, ``train(g, workers,
        estimator, repartition_every, epochs, seed)`` took them in that order; now the second
        argument is ``config`` and the rest are keywords (no caller passed them by position).
    """
    return train_many(g, [dict(overrides, config=config, partition=partition)])[0]


TRAIN_WORKERS = 4  # train()'s default P (TrainConfig's own default is 2)


def _prepare(g: Graph, run: dict[str, Any] | TrainConfig):
    """Validate one run -> (config, partition, history path, keep the file?). ``run``: a
    :class:`TrainConfig`, or a dict of :func:`train` arguments (``config``, ``partition`` and
    TrainConfig fields)."""
    if isinstance(run, TrainConfig):
        run = {"config": run}
    if not isinstance(run, dict):
        raise TypeError(
            f"each run must be a dict of train() arguments or a TrainConfig, got "
            f"{type(run).__name__}"
        )
    options = {k: v for k, v in run.items() if v is not UNSET}
    partition = options.pop("partition", None)
    config = options.pop("config", None)
    if config is not None and not isinstance(config, TrainConfig):
        hint = (
            "; train's options are keywords: train(g, workers=..., epochs=..., seed=...)"
            if not isinstance(config, dict)
            else "; pass a dict's fields as keywords: train(g, **options)"
        )
        raise TypeError(
            f"config must be a zg.grappa.TrainConfig or None, got "
            f"{type(config).__name__} {config!r:.60}{hint}"
        )
    options = map_deprecated(options, stacklevel=4)
    unknown = sorted(set(options) - {f.name for f in fields(TrainConfig)})
    if unknown:
        hint = (
            " ('dataset' is the command line's: pass the graph as g)"
            if "dataset" in unknown
            else ""
        )
        raise TypeError(f"train() got unknown option(s) {unknown}; see zg.grappa.TrainConfig{hint}")
    if config is None:
        if "workers" not in options:  # train()'s default P, unless the trainer has its own
            options["workers"] = _own_workers(options.get("trainer", "grappa")) or TRAIN_WORKERS
        options = apply_preset(options)  # fields not given, from the preset (if any)
        cfg = TrainConfig(**options).validated()
    else:
        if "preset" in options:
            raise ValueError(
                "preset= cannot override a config (a TrainConfig holds every field already); "
                "build the config from the preset, TrainConfig.from_dict({'preset': "
                f"{options['preset']!r}, ...}}), or pass preset= without a config"
            )
        cfg = replace(config, **options).validated()
    if type(cfg.seed) is not int:  # a numpy int: the workers write it into JSON
        cfg = replace(cfg, seed=int(cfg.seed))
    check_output_paths(
        cfg.history_path, cfg.model_path, cfg.checkpoint_dir
    )  # before any worker starts
    g = run_graph(g, cfg)  # the graph this run partitions, trains on and evaluates
    if cfg.workers > g.num_nodes:
        raise blamed_on(
            "workers",
            ValueError(f"workers={cfg.workers} is larger than the graph's {g.num_nodes} nodes"),
        )
    if partition is not None:
        check_plan(g, cfg, partition)
        # The partition given decides how nodes are cut (documented above); the history says so.
        cfg = replace(
            cfg,
            method=partition.method,
            num_chunks=partition.num_chunks,
            halo=partition.halo,
            schedule=partition.schedule_name,
        ).validated()
    part = make_partition(g, cfg) if partition is None else partition
    check_plan(g, cfg, part)
    return cfg, part, cfg.history_path, cfg.history_path is not None


def run_graph(g: Graph, cfg: TrainConfig) -> Graph:
    """The graph a run works on: ``g`` itself, or with ``cfg.self_loops == "add"``
    :meth:`zg.Graph.with_self_loops` (made where it is needed: once for the checks and the
    partition, once in each worker; the caller's graph is never changed)."""
    return g.with_self_loops() if cfg.self_loops == "add" else g


def _own_workers(trainer: Any) -> int | None:
    """The trainer's own P, or None (a bad name is named by TrainConfig.validated)."""
    try:
        return TRAINERS[trainer].workers
    except (KeyError, TypeError):
        return None


def _run_many(
    rank: int, world: int, g: Graph, jobs: list[Any], log_level: int | None = None
) -> None:
    if log_level is not None:  # the starting process shows the zg records: so do the workers
        log.show(log_level)
    for cfg, part, path, progress_file in jobs:
        run_worker(rank, world, cfg, run_graph(g, cfg), part, path, progress_file=progress_file)


def _shown_log_level() -> int | None:
    """The level from which this process shows the ``zg`` records (a handler that is not a
    NullHandler on ``zg`` or a logger above it, as ``logging`` looks for one); None: it shows
    none. A worker process starts with logging unconfigured, so it is given this level."""
    logger: logging.Logger | None = log.LOGGER
    while logger is not None:
        if any(not isinstance(h, logging.NullHandler) for h in logger.handlers):
            return log.LOGGER.getEffectiveLevel()
        logger = logger.parent if logger.propagate else None
    return None


def train_many(g: Graph, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several runs, one after the other, in *one* set of worker processes.

    Each run is a :class:`TrainConfig` or a dict of :func:`train` arguments (``config``,
    ``partition`` and TrainConfig fields: ``workers``, ``estimator``, ..., ``history_path``);
    all must have the same number of workers, backend and timeouts. A run here gives the same history as the same :func:`train` call (every run
    reseeds everything at its start); it only saves starting P processes per run.
    """
    return launch_prepared(g, prepare_many(g, runs))


def prepare_many(g: Graph, runs: list[dict[str, Any]]) -> list[Any]:
    """Everything :func:`train_many` checks before a worker starts: every run's config, its
    partition and plan, where it writes. Raises ``TypeError`` / ``ValueError`` naming the
    option; returns what :func:`launch_prepared` runs. Nothing is written."""
    graph_arg(g, train=True)
    if g.val_idx is None or g.val_idx.numel() == 0:
        raise ValueError("g has no validation nodes (val_idx); rank 0 evaluates on them")
    if isinstance(runs, dict) or not isinstance(runs, (list, tuple)) or not runs:
        raise TypeError(
            "runs must be a non-empty list of dicts of train() options (or TrainConfigs)"
        )
    prepared = [_prepare(g, run) for run in runs]
    first = prepared[0][0]
    folders = [cfg.checkpoint_dir for cfg, *_ in prepared if cfg.checkpoint_dir is not None]
    if len(folders) != len({os.path.abspath(f) for f in folders}):
        raise blamed_on(
            "checkpoint_dir",
            ValueError(
                "every run of train_many needs its own checkpoint_dir (a run would resume "
                "from another's checkpoint)"
            ),
        )
    for cfg, *_ in prepared[1:]:
        for name in ("workers", "backend", "timeout", "run_timeout"):
            if getattr(cfg, name) != getattr(first, name):
                raise blamed_on(
                    name,
                    ValueError(
                        f"every run of train_many needs the same {name}; got "
                        f"{getattr(first, name)!r} and {getattr(cfg, name)!r}"
                    ),
                )
    return prepared


@contextlib.contextmanager
def _passive_waits():
    """``OMP_WAIT_POLICY=PASSIVE`` for the workers (unless the caller set it): P processes on
    a few cores, each waiting on the others at every all-reduce, must not spin OpenMP threads
    while they wait. The children read it when they start; the caller's environment is restored
    right after the workers exit."""
    name = "OMP_WAIT_POLICY"
    if name in os.environ:
        yield
        return
    os.environ[name] = "PASSIVE"
    try:
        yield
    finally:
        os.environ.pop(name, None)


def launch_prepared(g: Graph, prepared: list[Any]) -> list[dict[str, Any]]:
    """Start the workers for runs checked by :func:`prepare_many`; their histories.

    While the workers run, this process draws the progress bar (:mod:`zg.grappa.progress`:
    rank 0 reports each epoch, a thread here reads it) for the runs whose ``progress`` says
    so (:func:`~zg.grappa.progress.show_bar`); the workers draw none."""
    first = prepared[0][0]
    # Temporary history files only once every run is known to be valid.
    prepared = [
        (
            cfg,
            part,
            path if keep else os.path.join(tempfile.mkdtemp(prefix="zg-grappa-"), "history.json"),
            keep,
        )
        for cfg, part, path, keep in prepared
    ]
    shown = [show_bar(cfg.progress) for cfg, *_ in prepared]
    watched = next((cfg for (cfg, *_), show in zip(prepared, shown) if show), first)
    histories = []
    try:
        # Each checkpoint folder is this run's alone while it runs (refused if in use).
        with (
            checkpoint_locks(cfg.checkpoint_dir for cfg, *_ in prepared),
            _passive_waits(),
            ParentBar(
                any(shown),
                desc=f"{watched.trainer} P={watched.workers}",
                total=watched.epochs,
            ) as bar,
        ):
            # Rank 0 of each run reports to the bar's file, or to os.devnull (no bar for it).
            jobs = [
                (cfg, part, path, bar.channel if show else os.devnull)
                for (cfg, part, path, _), show in zip(prepared, shown)
            ]
            spawn(
                _run_many,
                first.workers,
                args=(g.to("cpu"), jobs, _shown_log_level()),
                timeout=first.timeout,
                run_timeout=first.run_timeout,
                backend=first.backend,
            )
        for _, _, path, keep in prepared:
            with open(path) as f:
                history = json.load(f)
            history["path"] = path if keep else None
            histories.append(history)
    finally:
        for _, _, path, keep in prepared:
            if not keep:  # the temporary folder, also after a failure
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return histories


def __getattr__(name: str) -> Any:
    """``IsolatedSource``, :class:`LocalData`'s name up to release 0.4: read with a warning."""
    if name == "IsolatedSource":
        warnings.warn(
            "zg.grappa.train.IsolatedSource is now zg.grappa.local.LocalData (a worker's local "
            "data); the old name goes in zg 0.6",
            DeprecationWarning,
            stacklevel=2,
        )
        return LocalData
    raise AttributeError(f"module 'zg.grappa.train' has no attribute {name!r}")
