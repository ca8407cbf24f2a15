"""Grappa training for real: P worker processes, isolated local graphs, gradient-only exchange.

Where it sits: the top of the Grappa half. ``train(g, workers=P, ...)`` validates a
:class:`TrainConfig`, partitions the graph, spawns P processes (:mod:`zg.grappa.launch`:
gloo on CPU, nccl on GPUs, timeouts everywhere) and runs :func:`run_worker` in each; the same
function runs under ``torchrun ... -m zg.grappa --config cfg.json``. The package is split by
concept: :mod:`~zg.grappa.config` (the record, TrainConfig), :mod:`~zg.grappa.plan` (what it
implies for a graph: partition, iterations), :mod:`~zg.grappa.sources` (a worker's local data),
:mod:`~zg.grappa.hook` (the DDP hook and collectives), :mod:`~zg.grappa.worker` (the worker: a
``zg.Engine`` on its local graph), :mod:`~zg.grappa.trainers` (one policy class per trainer),
:mod:`~zg.grappa.roles` (what a worker of each trainer builds), :mod:`~zg.grappa.checkpoint`,
:mod:`~zg.grappa.history`; this module holds the entry points. One
iteration of a worker (the one training step, :func:`zg.step.train_step`):

    seeds (its own training nodes) -> sample on its LOCAL graph -> gather LOCAL features
    -> forward -> per-seed loss l_v -> [all_gather 3 scalars] -> loss = sum f_v l_v
    -> backward (DDP hook: grad * s_p, all_reduce SUM, + the overflow flag) -> step (gated)

with ``f_v`` and ``s_p`` from the estimator (:mod:`zg.grappa.estimators`). Nothing but
gradients and those scalars crosses the wire; every ``repartition_every`` epochs a new
super-epoch regroups the chunks (:mod:`zg.grappa.partition`) and each worker rebuilds its
local graph, sampler and coverage weights. Rank 0 evaluates on the full graph every
``eval_every`` epochs and writes the history JSON. An epoch's ``seconds`` is the whole epoch
(steps, evaluation, regrouping, bookkeeping), and its ``account`` says where they went, per
worker (:mod:`zg.grappa.account`).

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
import os
import shutil
import tempfile
from dataclasses import fields, replace
from typing import Any

from ..graph import Graph
from ._checks import check_output_paths, graph_arg
from .checkpoint import (
    CheckpointError,
    checkpoint_file,
    checkpoint_locks,
    read_checkpoint,
)
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
from .hook import HookState, average_parameters, estimator_hook, gather_stats
from .launch import spawn
from .partition import Partition
from .plan import check_plan, iterations_per_epoch, make_partition
from .presets import apply_preset
from .sources import IsolatedSource
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
    "HookState",
    "estimator_hook",
    "make_partition",
    "iterations_per_epoch",
    "super_epoch_of",
    "CheckpointError",
    "checkpoint_file",
    "read_checkpoint",
    "IsolatedSource",
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
    workers: int = UNSET,
    estimator: str = UNSET,
    repartition_every: int | None = UNSET,
    epochs: int = 20,
    seed: int = 0,
    *,
    partition: Partition | None = None,
    history_path: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Train with P real worker processes on this machine and return the history.

    Defaults (what ``train(g, workers=4, epochs=E, seed=s)`` runs): METIS chunks (2P of them,
    ``method="metis"``) with the one-hop halo (``halo=True``: each worker also stores the
    features of its nodes' outside in-neighbours), a new super-epoch every 5 epochs
    (round-robin schedule), the
    ``batch`` estimator with inverse-coverage weights, mini-batches of 512 seeds, fanouts 10
    per layer, a 2-layer SAGE (hidden 64, dropout 0.5), Adam lr 0.01. METIS is the default
    because that is where gradient-only training keeps its accuracy: on *random* chunks every
    worker sees about 1/P of each neighbourhood, and on Cora (4 workers) Grappa then ends
    several points below single-process training whichever estimator combines the gradients
    (the paper's ``reference`` weighting included), fewer with repartitioning every epoch;
    on METIS chunks it is level with it. METIS without the halo still ended below
    single-process training on one of two graphs no test uses, so the halo is on by default.
    The measurements and the acceptance check are in docs/grappa_diagnosis.md and
    bench/results/grappa_defaults_check.json. The map of where this holds
    (bench/results/grappa_map.json, notebook 06 section 3) finds the defaults close to
    single-process training for 2-layer models across degree, homophily, feature signal and
    P = 2-8, but well below it in its 3-layer cell at the map's budget (2,000 nodes, 32
    epochs), where ``trainer="feature_fetch"`` is level; trained for 100 epochs the defaults
    catch up there (bench/results/grappa_map_deep.json: at 32 epochs they already fit their
    workers' local graphs, but three layers reach past the one-hop halo). The measured gaps are
    in docs/grappa.md and CLAIMS.md, read from those files. On Cora and a 200k-node csbm graph the defaults
    hold with 3 layers too (bench/results/grappa.json, B9). Give deeper models more epochs and
    measure on your graph before relying on isolation. ``method="random", halo=False`` is the
    kit's isolation stress test (random chunks without a halo: the place to see what isolation
    costs), not the paper's setting. The authors' public code (chongyang-xu/grappa) trains on
    random chunks with the complete one-hop halo of the worker's own chunk and of a partner
    chunk that sweeps every 50 epochs, seeds from its own chunk, and the unnormalised per-worker
    weight c_r in the DDP hook: ``preset="reference"`` runs exactly that
    (:mod:`zg.grappa.presets`, its sources and every deliberate difference; measured beside
    these defaults in bench/results/grappa_reference.json).

    Args:
        g: graph with features, labels, train and val splits.
        workers: P (1 <= P <= number of nodes; default 4, or the trainer's own: single 1).
            estimator (default: "batch" for grappa, "mean", the only choice, for the others):
            "mean" | "node" | "batch" | "shrink"
            | "reference" (the public code's weighting: each worker's gradient times the mean of
            min(1, d_local / (d_global + 1)) over its seeds, divided by P) (or the "uniform"
            control); see :mod:`zg.grappa.estimators`.
        repartition_every: epochs per super-epoch (None or 0: never repartition; default 5 for
            grappa, never for the others).
        The paper's ablations are settings: unweighted aggregation is ``estimator="mean"``,
        fixed partitions ``repartition_every=None``. (The old ``ablation=`` keyword still maps
        to them, with a DeprecationWarning; together with a conflicting value it is an error.)
        A setting that contradicts the trainer (``trainer="isolated", estimator="batch"``) is a
        ValueError naming both; nothing is silently rewritten.
        epochs, seed: as named.
        preset (in options): "reference" fills every option not given from the authors' public
            code's configuration (:mod:`zg.grappa.presets`); options given explicitly override
            it and the history lists them (``preset.overrides``). With ``trainer="single"`` or
            ``"isolated"`` the same preset runs the same model and training settings.
        partition: a precomputed :class:`Partition` for P workers (default: from the config);
            its method, chunks, halo and schedule then replace the config's.
        history_path: where to keep the history JSON (default: a temporary file, removed).
        options: any other :class:`TrainConfig` field, of any of its three groups (experiment:
            trainer, mode, model, num_layers, fanouts, batch_size, lr, method, halo, ...;
            runtime: sampler, timeout, run_timeout, threads, ...; output: checkpoint_dir,
            model_path, progress, ...).
    Returns:
        The history dict (also the JSON's content): ``epochs`` (loss, val_acc, test_acc,
        seconds, account, bytes_sent per worker, bytes_by_kind, rounds per epoch), ``final``,
        ``bytes_sent_per_worker``, ``bytes_per_epoch_per_worker``, ``seconds_per_epoch``,
        ``partition``, ``config``.
    """
    run = dict(
        workers=workers,
        estimator=estimator,
        repartition_every=repartition_every,
        epochs=epochs,
        seed=seed,
        partition=partition,
        history_path=history_path,
        **options,
    )
    return train_many(g, [run])[0]


TRAIN_WORKERS = 4  # train()'s default P (TrainConfig's own default is 2)


def _prepare(g: Graph, run: dict[str, Any]):
    """Validate one run's options -> (config, partition, history path, keep the file?)."""
    if not isinstance(run, dict):
        raise TypeError(f"each run must be a dict of train() options, got {type(run).__name__}")
    options = {k: v for k, v in run.items() if v is not UNSET}
    partition = options.pop("partition", None)
    options = map_deprecated(options, stacklevel=4)
    unknown = sorted(set(options) - {f.name for f in fields(TrainConfig)})
    if unknown:
        hint = (
            " ('dataset' is the command line's: pass the graph as g)"
            if "dataset" in unknown
            else ""
        )
        raise TypeError(f"train() got unknown option(s) {unknown}; see zg.grappa.TrainConfig{hint}")
    if "workers" not in options:  # train()'s default P, unless the trainer has its own
        options["workers"] = _own_workers(options.get("trainer", "grappa")) or TRAIN_WORKERS
    options = apply_preset(options)  # fields not given, from the preset (if any)
    cfg = TrainConfig(**options).validated()
    check_output_paths(
        cfg.history_path, cfg.model_path, cfg.checkpoint_dir
    )  # before any worker starts
    if cfg.workers > g.num_nodes:
        raise ValueError(f"workers={cfg.workers} is larger than the graph's {g.num_nodes} nodes")
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


def _own_workers(trainer: Any) -> int | None:
    """The trainer's own P, or None (a bad name is named by TrainConfig.validated)."""
    try:
        return TRAINERS[trainer].workers
    except (KeyError, TypeError):
        return None


def _run_many(rank: int, world: int, g: Graph, jobs: list[Any]) -> None:
    for cfg, part, path in jobs:
        run_worker(rank, world, cfg, g, part, path)


def train_many(g: Graph, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several runs, one after the other, in *one* set of worker processes.

    Each run is a dict of :func:`train` arguments (``workers``, ``estimator``, ...,
    ``partition``, ``history_path``); all must have the same number of workers, backend and
    timeouts. A run here gives the same history as the same :func:`train` call (every run
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
        raise TypeError("runs must be a non-empty list of dicts of train() options")
    prepared = [_prepare(g, run) for run in runs]
    first = prepared[0][0]
    folders = [cfg.checkpoint_dir for cfg, *_ in prepared if cfg.checkpoint_dir is not None]
    if len(folders) != len({os.path.abspath(f) for f in folders}):
        raise ValueError(
            "every run of train_many needs its own checkpoint_dir (a run would resume "
            "from another's checkpoint)"
        )
    for cfg, *_ in prepared[1:]:
        for name in ("workers", "backend", "timeout", "run_timeout"):
            if getattr(cfg, name) != getattr(first, name):
                raise ValueError(
                    f"every run of train_many needs the same {name}; got "
                    f"{getattr(first, name)!r} and {getattr(cfg, name)!r}"
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
    """Start the workers for runs checked by :func:`prepare_many`; their histories."""
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
    jobs = [(cfg, part, path) for cfg, part, path, _ in prepared]
    histories = []
    try:
        # Each checkpoint folder is this run's alone while it runs (refused if in use).
        with checkpoint_locks(cfg.checkpoint_dir for cfg, *_ in prepared), _passive_waits():
            spawn(
                _run_many,
                first.workers,
                args=(g.to("cpu"), jobs),
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
