"""One Grappa worker: the same :class:`zg.Engine` a single-process user runs, on its local graph.

Where it sits: inside every worker process that :func:`zg.grappa.train` (or ``torchrun -m
zg.grappa``) starts. Per super-epoch the worker's local data (:mod:`zg.grappa.local`, ``worker.local``) builds
its local graph, weights and envelope, and the worker hands them to its one ``zg.Engine``
(built at the first super-epoch, :meth:`zg.Engine.regroup` at every repartition), with

* ``reduce``: the worker's gradient exchange (:mod:`zg.grappa.exchange`): after backward, one
  flat all-reduce of ``s_p * gradient`` with the overflow flag riding along (psgd_pa: the flag
  alone; its parameters are averaged every ``average_every`` iterations, an ``after`` hook);
* ``loss``: the estimator's weighted loss ``sum_v f_v l_v``, its scalars all-gathered and combined
  on the device (no host read in the step);
* ``guard``: the one overflow policy shared by every worker. The flag rides the gradient
  all-reduce, so one worker's overflow stops every worker's step for that iteration; all
  workers read it at the same iterations and resume from the same batch (no epoch reruns, no
  copies of the model);
* ``batches``: the worker's own training nodes, cut into the I iterations every worker runs;
* ``optimizer``: one DeviceAdam for the whole run (its state survives repartitioning).

What differs between the trainers (grappa, isolated, psgd_pa, feature_fetch, single) is asked of
the worker's role (:mod:`zg.grappa.roles`, chosen by the trainer's flags in
:mod:`zg.grappa.trainers`): its local data, its exchange, what happens after a step (psgd_pa's
averaging). :func:`run_worker` builds those pieces, then runs a short loop per epoch:
regroup if a new super-epoch starts, train the epoch, record, checkpoint.

The Engine runs the kernels ``cfg.kernel`` names (:data:`zg.kernels.KERNELS`; default "torch");
the history records the kernel that ran (``history["kernel"]``: the Engine's
``settings.kernel``).

Hooks: :data:`on_iteration` is a list of callables ``hook(rank, epoch, batch)`` that every worker
calls at the start of every training iteration (before sampling). Workers are separate
processes (``torch.multiprocessing`` or torchrun), so a hook reaches them through a plugin file:
``ZG_GRAPPA_WORKER_PLUGIN=/path/to/plugin.py`` (several: separated by ``os.pathsep``) is
imported once in every worker process before training, and the file appends its hooks to
``zg.grappa.worker.on_iteration``. The kit's tests inject faults this way
(``tests/grappa_fault_plugin.py``: a worker that kills itself or stalls at a given iteration).

With ``step_shapes="envelope"`` the Engine runs the static step (the ZeroGNN fixed-shape envelope
step: seeds from the device table, keys derived on the device), the exchange included: fixed
buffers and no host read in a steady iteration (``tests/grappa/test_grappa_exchange.py``).
``batching="full"`` is a sampler of the same Engine, which the local data holds
(:class:`zg.grappa.fullgraph.WholeGraph`: one batch, the whole local graph, its last block
ending at the seeds as every sampler's does; one iteration per epoch): one loop, one step and
one loss for every trainer and batching.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from .. import models as zg_models
from .._checks import one_memory_reading, worst_value
from .._io import atomic_write
from ..engine import Engine, StepHooks
from ..graph import Graph
from ..inference import evaluate
from ..log import get as _logger
from ..optim import make_optimizer
from ..sampling import MiniBatch
from ..step import OverflowGuard, per_seed_cross_entropy
from .account import PARTS, AccountTimes, EpochAccount, account_record
from .checkpoint import checkpoint_file, resume, write_checkpoint
from .comm import KINDS, CommLedger
from .config import TrainConfig, super_epoch_of
from .estimators import check_factor_values, check_scale_values, masked_batch_stats
from .history import epoch_record, history, write_json
from .launch import worker_device
from .partition import Partition
from .plan import check_plan, make_partition
from .progress import epoch_report
from .roles import role_for

_log = _logger(__name__)  # "zg.grappa.worker": rank 0 says when a run resumes (zg.log)

__all__ = ["run_worker", "worker_model", "on_iteration", "PLUGIN_ENV", "load_plugins"]

on_iteration: list[Callable[[int, int, int], None]] = []
PLUGIN_ENV = "ZG_GRAPPA_WORKER_PLUGIN"
# The width of a worker's epoch sums (_EstimatorLoss.take): loss sum, seeds, lambda, the worker
# scale's min / mean / max, the estimator's factors' worst value; the host numbers follow.
SUMS = 7
_loaded_plugins: set = set()


def load_plugins() -> None:
    """Import each file named in ``$ZG_GRAPPA_WORKER_PLUGIN`` once per process (see the module
    docstring); a file that cannot be imported raises, naming the variable."""
    for path in filter(None, os.environ.get(PLUGIN_ENV, "").split(os.pathsep)):
        if path in _loaded_plugins:
            continue
        spec = importlib.util.spec_from_file_location(
            f"zg_grappa_plugin_{len(_loaded_plugins)}", path
        )
        if spec is None or not os.path.isfile(path):
            raise ValueError(f"{PLUGIN_ENV}: {path!r} is not a Python file")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        _loaded_plugins.add(path)


def run_worker(
    rank: int,
    world: int,
    cfg: TrainConfig,
    g: Graph,
    part: Partition | None,
    history_path: str | None,
    local_rank: int | None = None,
    progress_file: str | None = None,
) -> None:
    """One worker of any trainer, inside an initialised default process group.

    ``part`` None: compute it from the config (every rank gets the same one). Rank 0 writes the
    history JSON to ``history_path`` (if given). ``progress_file``: where rank 0 reports each
    epoch for the bar the calling process draws (:mod:`zg.grappa.progress`; spawned workers
    always get one, ``os.devnull`` when no bar is shown); None (torchrun: no calling process)
    makes rank 0 draw its own bar on its stderr, as ``cfg.progress`` says. With
    ``cfg.checkpoint_dir`` it resumes from the checkpoint there, if any, and writes one every
    ``cfg.checkpoint_every`` epochs. A collective that waits longer than ``cfg.timeout`` raises
    ``TimeoutError`` naming the timeout.
    """
    try:
        _run_worker(rank, world, cfg, g, part, history_path, local_rank, progress_file)
    except RuntimeError as exc:
        text = str(exc).lower()
        if "timed out" not in text and "operation timeout" not in text:
            raise
        raise TimeoutError(
            f"worker {rank}: a collective waited longer than timeout={cfg.timeout} s "
            f"(TrainConfig.timeout), so a peer is gone or stuck. The backend said: "
            f"{str(exc)[:300]}"
        ) from exc


def _run_worker(
    rank: int,
    world: int,
    cfg: TrainConfig,
    g: Graph,
    part: Partition | None,
    history_path: str | None,
    local_rank: int | None,
    progress_file: str | None,
) -> None:
    if world != cfg.workers:
        raise ValueError(
            f"the process group has {world} workers but the config says workers="
            f"{cfg.workers} (trainer={cfg.trainer!r})"
        )
    device = worker_device(dist.get_backend(), rank if local_rank is None else local_rank)
    pin_threads(cfg.threads or max(1, (os.cpu_count() or 1) // world))
    part = make_partition(g, cfg) if part is None else part
    check_plan(g, cfg, part)
    load_plugins()
    worker = _Worker(cfg, g, part, rank, world, device)
    run = _Run(worker, g, progress_file)
    # One epoch: regroup (a new super-epoch only), the steps, rank 0's evaluation, the epoch's
    # one exchange of numbers, a checkpoint when due. No barrier: the steps' all-reduces and
    # the exchange are the only points where workers wait for each other.
    for epoch in range(run.first_epoch, cfg.epochs):
        worker.enter(super_epoch_of(cfg, epoch))
        overflows, rewound = worker.train_epoch(epoch)
        run.evaluate(epoch)
        run.record(epoch, overflows, rewound)
        run.checkpoint(epoch)
    run.finish(part, history_path)


def worker_model(cfg: TrainConfig, g: Graph, device: torch.device) -> torch.nn.Module:
    """The model every worker of a run starts from (the one place a worker's model is built:
    :mod:`zg.grappa.worker`, :mod:`zg.parallel` through it, :mod:`zg.experiments.together`):
    ``cfg.model`` over ``g``'s widths, its parameters drawn from ``cfg.seed``, so every worker
    holds the same ones."""
    return zg_models.build_seeded(
        cfg.model,
        g.feat_dim,
        cfg.hidden_dim,
        g.num_classes,
        cfg.num_layers,
        seed=cfg.seed,
        dropout=cfg.dropout,
    ).to(device)


def pin_threads(threads: int) -> None:
    """``threads`` torch threads and one inter-op thread in this worker process, so P workers
    on a few cores do not spin against each other (the launcher also asks OpenMP to wait
    passively, ``OMP_WAIT_POLICY=PASSIVE``, unless the caller set it). The inter-op pool can
    only be sized before its first use: a process that already used it keeps its own."""
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass


class _Worker:
    """A worker's pieces: its trainer and role, local data, model (and what wraps it), optimizer,
    loss, overflow guard, ledger, its one Engine (handed each super-epoch's local data) and the
    kernel that ran."""

    def __init__(
        self,
        cfg: TrainConfig,
        g: Graph,
        part: Partition,
        rank: int,
        world: int,
        device: torch.device,
    ):
        self.cfg, self.rank, self.world, self.device = cfg, rank, world, device
        self.trainer = cfg.trainer_object
        self.role = role_for(self.trainer)
        self.ledger = CommLedger(world)
        self.envelope_step = cfg.step_shapes == "envelope"  # (never with batching "full")
        self.guard = (
            OverflowGuard(cfg.num_layers, device, distributed=True) if self.envelope_step else None
        )
        self.model = worker_model(cfg, g, device)
        self.kernel = cfg.kernel  # the kernel that ran: the Engine's settings say it (_engine)
        self.local = self.role.make_local_data(cfg, g, part, rank, world, device, self.ledger)
        # The one gradient exchange (zg.grappa.exchange), the step's reduce.
        self.exchange = self.role.exchange(self.model, self.ledger, self.guard)
        self.account = EpochAccount()  # the epoch in progress (zg.grappa.account)
        self.times = AccountTimes(device)  # the steps' clock; the exchange marks its hand-off
        self.exchange.account = self.times
        self.optimizer = make_optimizer(self.model, "adam", cfg.lr, cfg.weight_decay)
        self.iterations = self.local.iterations
        self.loss = _EstimatorLoss(cfg, self.local, rank, world, self.ledger, self.exchange)
        self.engine: Engine | None = None

    def enter(self, s: int) -> None:
        """Regroup into super-epoch ``s`` (nothing if it is the current one): the local graph,
        weights and envelope of the super-epoch, handed to the worker's one Engine (built at
        the first; :meth:`zg.Engine.regroup`'s checked twin after).

        Checked once: the first build checks the Engine's arguments as a user's are checked
        (:class:`zg.Engine`); a repartition hands the Engine only the kit's own values, built
        from what was checked (the local graph the partition cuts from the run's checked
        graph, the envelope profiled on it, its seeds), through the internal paths that check
        nothing again (:meth:`zg.Engine._regroup_checked`, the partition's, the envelope's).
        Each regrouping reads the machine's memory once (:func:`zg._checks.one_memory_reading`).
        ``bench/regroup_checks.py`` counts both."""
        if s == self.local.super_epoch:
            return
        start = time.perf_counter()
        with one_memory_reading():
            self.local.start_super_epoch(s)
            if self.engine is None:
                self.engine = self._engine()
            else:
                local = self.local
                self.engine._regroup_checked(
                    local.graph, local.rows, seed=local.seed, nodes=local.train_nodes,
                    **self._sampling(),
                )  # fmt: skip
                self._built(self.engine)
        self.account.add("repartitioning", time.perf_counter() - start)

    def before_step(self, epoch: int, b: int) -> None:
        for hook in on_iteration:
            hook(self.rank, epoch, b)

    def after_step(self, epoch: int, b: int) -> None:
        self.loss.keep(b)
        if self.engine is not None and self.engine.cuda_graph is not None:
            self.ledger.replayed()  # the replay sent what the captured step recorded
        start = time.perf_counter()
        exchanged = self.role.after_step(
            self.exchange,
            self.model,
            epoch * self.iterations + b,
            self.cfg.average_every or self.iterations,
            self.world,
        )
        if exchanged:  # psgd_pa's averaging: its exchange (host-timed)
            self.times.seconds["exchange"] = (
                self.times.seconds.get("exchange", 0.0) + time.perf_counter() - start
            )

    def train_epoch(self, epoch: int):
        """(envelope overflows, rewound batches) of one epoch of training; the steps' seconds
        go into the account, their sum into ``self.train_seconds``."""
        start = time.perf_counter()
        self.engine.seek(epoch)
        try:
            stats = self.engine.train_epoch()
        except FloatingPointError:
            # A bad worker scale or factor of the estimator is the cause to name, not the loss
            # it made non-finite (read here, after the failure: no read on the steps' path).
            self.loss.check_finite(epoch)
            raise
        self.train_seconds = time.perf_counter() - start
        self.account.add_stages(self.times.seconds)
        return stats.overflows, stats.rewound_batches

    def _engine(self) -> Engine:
        """The worker's one Engine (the class a single process runs), over the first
        super-epoch's local data."""
        cfg, local = self.cfg, self.local
        hooks = StepHooks(
            nodes=local.train_nodes,
            batches=local.batches,
            loss=self.loss,
            reduce=self.exchange,
            features=local.features,
            guard=self.guard,  # the shared one (envelope step), or None: the Engine's own
            before=self.before_step,
            after=self.after_step,
            poll_every=cfg.poll_every,
        )
        # "static": the fixed-shape step, the exchange included; with cfg.capture (CUDA) that
        # step, exchange included, is captured as one CUDA Graph and replayed ("graph").
        capture = self.envelope_step and cfg.capture
        if capture:
            hooks.reduce = self._exchange_and_record
        engine = Engine(
            local.graph,
            self.model,
            cfg.fanouts,
            local.rows,
            mode=self._mode(capture),
            device=self.device,
            seed=local.seed,
            optimizer=self.optimizer,
            kernel=self.cfg.kernel,
            hooks=hooks,
            **self._sampling(),
        )
        engine.observers = [self.times]  # the account's clock; no sync audit in a worker
        self._built(engine)
        return engine

    def _built(self, engine: Engine) -> None:
        """After the Engine is built or regrouped: a captured step writes the batches' numbers
        at its (new) device counter; the kernel that ran."""
        if self.envelope_step and self.cfg.capture:  # a CUDA Graph runs whole: the account
            self.times.lend_clock = False  # cannot split its stages
            self.loss.capture_into(engine.counter, self.iterations, self.guard.enabled)
        self.kernel = engine.settings.kernel

    def _sampling(self) -> dict[str, Any]:
        """What samples the local graph: the whole local graph as one batch (batching "full",
        :class:`zg.grappa.fullgraph.WholeGraph`), the envelope sampler sized by the local
        data's envelope (step_shapes "envelope"), or the mode's own (dynamic)."""
        if self.local.whole_graph is not None:
            return {"sampler": self.local.whole_graph}
        return {"envelope": self.local.envelope} if self.envelope_step else {}

    def _mode(self, capture: bool) -> str:
        """The Engine's mode: "dynamic", "eager" (the whole graph as one batch), "static", or
        "graph" (captured) on CUDA; the CPU runs a captured step's twin, "static"."""
        if self.local.whole_graph is not None:
            return "eager"
        if not self.envelope_step:
            return "dynamic"
        return "graph" if capture and self.device.type == "cuda" else "static"

    def _exchange_and_record(self) -> None:
        """The captured step's reduce: the exchange, then this batch's numbers on the device."""
        self.exchange()
        self.loss.record()


class _Run:
    """A run's bookkeeping around the loop: resuming, the epoch records (rank 0), evaluation,
    checkpoints, the progress report (rank 0, :mod:`zg.grappa.progress`) and the history at the
    end."""

    def __init__(self, worker: _Worker, g: Graph, progress_file: str | None = None):
        self.worker, self.g, self.cfg = worker, g, worker.cfg
        self.rank, self.world = worker.rank, worker.world
        self.records: list[dict[str, Any]] = []
        self.first_epoch, self.seconds_before, self.resumed_at = 0, 0.0, []
        self.path = checkpoint_file(self.cfg)
        if self.path is not None:
            state = resume(
                self.path,
                self.cfg,
                g,
                self.rank,
                self.world,
                worker.model,
                worker.optimizer,
                worker.device,
            )
            if state is not None:
                self.first_epoch, self.seconds_before = state["next_epoch"], state["seconds"]
                self.records = state["records"] if self.rank == 0 else []
                self.resumed_at = state["resumed_at"] + [self.first_epoch]
                if self.rank == 0 and self.first_epoch < self.cfg.epochs:
                    _log.info(
                        "resumed from checkpoint %s at epoch %d (epochs %d-%d to train)",
                        self.path,
                        self.first_epoch,
                        self.first_epoch,
                        self.cfg.epochs - 1,
                    )
                elif self.rank == 0:
                    _log.info(
                        "checkpoint %s holds all %d epochs of this run: nothing left to train "
                        "(give more epochs to extend it)",
                        self.path,
                        self.cfg.epochs,
                    )
        self.eval_graph = g.to(worker.device) if self.rank == 0 else None
        self.progress = self._progress(progress_file)
        self.accuracy, self.eval_seconds = None, None
        self.pending: _Pending | None = None  # the last epoch's exchange, in flight
        self.start = time.perf_counter()
        worker.account.restart()  # the first epoch starts here

    def _progress(self, progress_file: str | None):
        """Rank 0's progress report (None on the other ranks): to the calling process's bar
        through ``progress_file``, or (torchrun, None) to a bar of its own."""
        if self.rank != 0:
            return None
        return epoch_report(
            progress_file,
            self.cfg.progress,
            desc=f"{self.cfg.trainer} P={self.world}",
            epochs=self.cfg.epochs,
            first_epoch=self.first_epoch,
        )

    def seconds(self) -> float:
        return self.seconds_before + time.perf_counter() - self.start

    def evaluate(self, epoch: int) -> None:
        """Rank 0, when due: the full-graph accuracies of the epoch (the other workers go on to
        the epoch's exchange and wait there)."""
        cfg = self.cfg
        self.accuracy = None
        if self.rank != 0 or not ((epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1):
            return
        start = time.perf_counter()
        self.flush()  # the epochs before are checked first: a non-finite loss names the loss
        try:
            self.accuracy = evaluate(self.worker.model, self.eval_graph, ("val", "test"))
        except FloatingPointError:
            # This epoch's loss, not yet exchanged, is the cause to name when it is not finite.
            self.worker.loss.check_finite(epoch)
            raise
        self.eval_seconds = time.perf_counter() - start
        self.worker.account.add("evaluation", self.eval_seconds)

    def record(self, epoch: int, overflows: int, rewound: int) -> None:
        """The epoch's one exchange of numbers: every worker's sums and account in one
        all-gather, started without waiting for it. It completes (one host read) at the next
        epoch's exchange, before a checkpoint, or at the end, where rank 0 keeps the record; so
        no worker waits for the others here: they meet at the next step's all-reduce."""
        worker = self.worker
        sums = worker.loss.take()  # [SUMS] float64, device: loss, seeds, lambda, scale x3, factor
        comm = worker.ledger.take()
        host = [worker.train_seconds, worker.account.parts["repartitioning"]]
        host += [worker.local.mean_coverage]
        host += [float(comm["bytes"][k]) for k in KINDS] + [float(comm["rounds"][k]) for k in KINDS]
        host += worker.account.row()  # the account's parts but "other" (PARTS order)
        host.append(worker.account.elapsed())  # this worker's epoch: since its last exchange
        row = torch.cat([sums, torch.tensor(host, dtype=torch.float64).to(worker.device)])
        rows = [torch.empty_like(row) for _ in range(self.world)]  # P x [SUMS + 3 + 2 kinds + 10]
        exchange = dist.all_gather(rows, row, async_op=True)
        pending = _Pending(epoch, rows, exchange, overflows, rewound)
        pending.accuracy, pending.eval_seconds = self.accuracy, self.eval_seconds
        pending.row = row  # the exchange reads it until it completes
        worker.account.restart()
        if self.progress is not None:  # the epoch is trained (and evaluated: host numbers)
            self.progress.trained(epoch, None if self.accuracy is None else self.accuracy["val"])
        previous, self.pending = self.pending, pending
        if previous is not None:
            self._complete(previous)

    def flush(self) -> None:
        """Complete the exchange in flight (before a checkpoint and at the end of the run)."""
        previous, self.pending = self.pending, None
        if previous is not None:
            self._complete(previous)

    def _complete(self, pending: _Pending) -> None:
        """Wait for an epoch's exchange (long done: a step's all-reduce came after it); every
        rank checks the losses, rank 0 keeps the record."""
        worker, cfg, epoch = self.worker, self.cfg, pending.epoch
        pending.exchange.wait()
        table = torch.stack(pending.rows).cpu()  # [P, SUMS + 3 + 2 kinds + 10]
        # Every rank holds the table, so every rank stops at the same epoch (no one waits).
        losses = table[:, 0]  # [P] each worker's loss sum
        if worker.loss.runs_estimator:  # its scales' values, read here with the rest
            for r in range(self.world):
                check_scale_values(
                    worker.loss.estimator,
                    float(table[r, 3]),
                    float(table[r, 5]),
                    f"worker {r} in epoch {epoch}",
                )
            for r in range(self.world):  # its factors' worst value, the same way
                check_factor_values(
                    worker.loss.estimator, float(table[r, 6]), f"worker {r} in epoch {epoch}"
                )
        if not bool(torch.isfinite(losses).all()):
            bad = [r for r in range(self.world) if not bool(torch.isfinite(losses[r]))]
            raise FloatingPointError(
                f"epoch {epoch}: the training loss is {float(losses[bad[0]])} on worker(s) {bad}. "
                "Likely causes: non-finite features (g.x holds NaN/inf), a learning rate too "
                "large for this model, or labels outside [0, num_classes). Training stopped; the "
                "epoch is not recorded"
            )
        if self.rank != 0:
            return
        nk, parts = len(KINDS), len(PARTS) - 1
        # The history's table: loss sum, seeds, seconds, repartition seconds, coverage, bytes
        # and rounds by kind, hook scale min/mean/max (zg.grappa.history.epoch_record).
        lam = float(table[0, 2])
        host = SUMS + 3 + 2 * nk  # where the host numbers after the comm's end
        legacy = torch.cat([table[:, :2], table[:, SUMS:host], table[:, 3:6]], dim=1)
        record = epoch_record(
            epoch,
            super_epoch_of(cfg, epoch),
            legacy,
            [lam] if math.isfinite(lam) else [],
            worker.iterations,
        )
        if worker.envelope_step:
            record["envelope_overflows"] = pending.overflows
            record["rewound_batches"] = pending.rewound
        if pending.accuracy is not None:
            record.update(
                val_acc=pending.accuracy["val"],
                test_acc=pending.accuracy["test"],
                eval_seconds=pending.eval_seconds,
            )
        accounts = table[:, host : host + parts].tolist()  # [P, 9] but "other"
        record["account"] = account_record(table[:, -1].tolist(), accounts)
        record["seconds"] = max(record["account"]["seconds"])
        self.records.append(record)
        if self.progress is not None:
            self.progress.loss(epoch, record["loss"])

    def checkpoint(self, epoch: int) -> None:
        """Every ``checkpoint_every`` epochs and after the last: the run so far, written after
        the epoch's record is complete, so its time is the next epoch's "checkpointing" (the
        last one's is in ``total_seconds`` only)."""
        cfg, worker = self.cfg, self.worker
        if self.path is None or not (
            (epoch + 1) % cfg.checkpoint_every == 0 or epoch == cfg.epochs - 1
        ):
            return
        start = time.perf_counter()
        self.flush()  # a checkpoint holds complete records
        write_checkpoint(
            self.path,
            cfg,
            self.g,
            self.rank,
            self.world,
            worker.model,
            worker.optimizer,
            worker.device,
            epoch + 1,
            (epoch + 1) * worker.iterations,
            self.records,
            self.seconds(),
            self.resumed_at,
        )
        dist.barrier()  # every worker goes on once the file is written
        worker.account.add("checkpointing", time.perf_counter() - start)

    def finish(self, part: Partition, history_path: str | None) -> None:
        self.flush()
        if self.progress is not None:
            self.progress.close()
        if self.rank != 0:
            return
        result = history(
            self.cfg,
            self.g,
            part,
            self.world,
            self.records,
            self.seconds(),
            dist.get_backend(),
            self.resumed_at,
            kernel=self.worker.kernel,
            captured=self.worker.engine is not None and self.worker.engine.cuda_graph is not None,
        )
        if history_path:
            write_json(result, history_path)
        if self.cfg.model_path:
            params = {k: v.cpu() for k, v in self.worker.model.state_dict().items()}
            atomic_write(self.cfg.model_path, lambda f: torch.save(params, f), name="model_path")


class _Pending:
    """An epoch's exchange of numbers in flight: what rank 0 needs to write its record once
    it completes."""

    def __init__(self, epoch, rows, exchange, overflows, rewound):
        self.epoch, self.rows, self.exchange = epoch, rows, exchange
        self.overflows, self.rewound = overflows, rewound
        self.accuracy, self.eval_seconds, self.row = None, None, None


class _EstimatorLoss:
    """The worker's loss ``sum_v f_v l_v`` (:func:`zg.step.per_seed_cross_entropy` times the
    estimator's factors), with the estimator's scalars all-gathered and combined on the device.
    It also keeps, per executed batch, the sums the history reports (mean loss, shrinkage
    lambda)."""

    def __init__(
        self,
        cfg: TrainConfig,
        local,
        rank: int,
        world: int,
        ledger: CommLedger,
        exchange,
    ):
        self.trainer, self.local, self.rank, self.world = cfg.trainer_object, local, rank, world
        self.estimator = cfg.estimator_object
        # The estimator combines this trainer's gradients (its worker scales are checked).
        self.runs_estimator = not (self.trainer.averages_models or self.trainer.shares_batches)
        self.ledger, self.exchange = ledger, exchange
        self.current: dict[str, torch.Tensor] = {}
        self.per_batch: dict[int, dict[str, torch.Tensor]] = {}
        # A captured step (cfg.capture): each replay rewrites the same tensors, so the step
        # itself writes its batch's numbers into row ``batch_index`` (the Engine's device batch
        # counter) of a table that lives outside the graph (:meth:`record`).
        self.batch_index: torch.Tensor | None = None
        # float64 [I, 5]: loss sum, count, lambda, scale, the factors' worst value
        self.table: torch.Tensor | None = None
        self.enabled: torch.Tensor | None = None  # bool []: False while a capture warms up

    def __call__(self, logits: torch.Tensor, labels: torch.Tensor, mb: MiniBatch) -> torch.Tensor:
        per_seed, counted = per_seed_cross_entropy(logits, labels, mb.valid)  # [B], [B]
        weights = self.local.weights.index_select(0, mb.seeds)  # [B]
        lam = factor = None
        if self.trainer.averages_models:  # its own mean; no gradient exchange
            counted_f = counted.to(per_seed.dtype)
            factors = counted_f / counted_f.sum().clamp(min=1.0)
        elif self.trainer.shares_batches:  # sums; the exchange divides by the global count
            factors = counted.to(per_seed.dtype)
            total = (per_seed * factors).sum()  # [] the share's summed loss
            self.exchange.counted = {"loss": total.detach(), "count": counted.sum().to(total.dtype)}
        else:
            stats = None
            if self.estimator.needs_stats:
                mine = masked_batch_stats(weights, counted)  # [3] float64
                self.ledger.record("scalars", "all_gather", mine.numel() * mine.element_size())
                gathered = [torch.empty_like(mine) for _ in range(self.world)]
                dist.all_gather(gathered, mine)
                stats = torch.stack(gathered)  # [P, 3], device
            factors, scale, info = self.estimator.combine_device(
                weights, counted, self.rank, self.world, stats
            )
            self.exchange.scale = scale
            lam = info.get("lambda")
            # The factors' values ride the epoch's exchange (checked there): no host read here.
            factor = worst_value(factors)  # float64 []
        self.current = {
            "loss_sum": per_seed.detach().sum().double(),
            "count": counted.sum().double(),
        }
        if self.trainer.shares_batches:
            # The exchange writes the global batch's mean loss into ``total`` after backward:
            # one batch counts once on every worker, so the epoch's loss is the mean over its
            # global batches of their mean per-seed loss, what one process's Engine reports.
            one = torch.ones((), dtype=torch.float64, device=per_seed.device)
            self.current = {"loss_sum": self.exchange.counted["loss"], "count": one}
        if not self.trainer.averages_models:
            self.current["scale"] = torch.as_tensor(
                self.exchange.scale, dtype=torch.float64, device=per_seed.device
            )
        if lam is not None:
            self.current["lambda"] = lam
        if factor is not None:
            self.current["factor"] = factor
        if self.trainer.shares_batches:
            return total  # the exchange turns it into the global batch's mean after backward
        return (per_seed * factors.to(per_seed.dtype)).sum()

    def check_finite(self, epoch: int) -> None:
        """This worker's loss of the epoch so far (a host read: only when something already
        failed); FloatingPointError naming the loss when it is not finite."""
        records = [k for k in [*self.per_batch.values(), self.current] if k]
        if self.runs_estimator:  # a bad worker scale is the cause to name first
            scales = [k["scale"].double().view(1) for k in records if "scale" in k]
            if self.table is not None:
                scales.append(self.table[:, 3][~torch.isnan(self.table[:, 0])])
            if scales:
                s = torch.cat(scales)
                bad = s[~torch.isfinite(s) | (s < 0)]
                if bad.numel():
                    value = float(bad[0])
                    check_scale_values(
                        self.estimator, value, value, f"worker {self.rank} in epoch {epoch}"
                    )
            factors = [k["factor"].view(1) for k in records if "factor" in k]
            if self.table is not None:
                factors.append(self.table[:, 4][~torch.isnan(self.table[:, 0])])
            if factors:
                worst = float(worst_value(torch.cat(factors)))
                check_factor_values(self.estimator, worst, f"worker {self.rank} in epoch {epoch}")
        sums = [k["loss_sum"].double() for k in records]
        if self.table is not None:
            sums.append(self.table[:, 0].nan_to_num(0.0).sum())
        if sums and not bool(torch.isfinite(torch.stack(sums)).all()):
            raise FloatingPointError(
                f"epoch {epoch}: the training loss is not finite on worker {self.rank}. Likely "
                "causes: non-finite features (g.x holds NaN/inf), a learning rate too large for "
                "this model, or labels outside [0, num_classes). Training stopped"
            )

    def capture_into(
        self, batch_index: torch.Tensor, iterations: int, enabled: torch.Tensor | None = None
    ) -> None:
        """Record every batch's numbers on the device, at row ``batch_index`` (int64 [], read
        when the step runs) of a table of ``iterations`` rows: what a captured step needs.
        ``enabled`` (bool [], the guard's): where False (a capture's warm-up steps, which run
        batch 0 again with the optimizer off), the row is left as it was."""
        self.batch_index, self.enabled = batch_index, enabled
        self.table = torch.full(
            (iterations, 5), float("nan"), dtype=torch.float64, device=batch_index.device
        )

    def record(self) -> None:
        """Inside the step, after the exchange (data parallel: the loss is the global mean by
        then): this batch's numbers into its row of the table (nothing without a table)."""
        if self.table is None:
            return
        c, nan = self.current, self.table.new_full((), float("nan"))
        row = [c["loss_sum"].double(), c["count"].double()]
        row += [c["lambda"].double() if "lambda" in c else nan]
        row += [c["scale"].double() if "scale" in c else nan]
        row += [c["factor"] if "factor" in c else nan]
        at = self.batch_index.view(1)
        new = torch.stack(row).view(1, 5)
        if self.enabled is not None:  # a capture's warm-up steps leave the table as it was
            new = torch.where(self.enabled, new, self.table.index_select(0, at))
        self.table.index_copy_(0, at, new)

    def keep(self, batch: int) -> None:
        """After batch ``batch`` ran: its sums replace any earlier (rewound) execution's."""
        if self.table is None:
            self.per_batch[batch] = self.current

    def take(self) -> torch.Tensor:
        """float64 [SUMS] on the device: the loss sum and the seeds over the epoch's applied
        batches, the mean lambda (NaN without one), the min, mean and max of this worker's hook
        scale s_p over the batches (NaN without a hook), and the worst value of the estimator's
        factors over the batches (:func:`zg._checks.worst_value`; 0 when it gave none). No
        host read: the epoch's exchange carries it, and checks the scales and factors there."""
        if self.table is not None:  # every batch's last execution, in batch order
            t = self.table
            lam = t[:, 2].mean()  # NaN when the estimator has none
            s = t[:, 3]
            factor = worst_value(t[:, 4])  # NaN when the estimator ran no factors: not checked
            sums = [t[:, 0].sum(), t[:, 1].sum(), lam, s.min(), s.mean(), s.max(), factor]
            return torch.stack(sums)
        kept = [self.per_batch[b] for b in sorted(self.per_batch)]
        self.per_batch = {}
        device = self.local.weights.device
        nan = torch.full((), float("nan"), dtype=torch.float64, device=device)
        zero = torch.zeros((), dtype=torch.float64, device=device)
        loss_sum = torch.stack([k["loss_sum"].double() for k in kept]).sum() if kept else zero
        seen = torch.stack([k["count"] for k in kept]).sum() if kept else zero
        lams = [k["lambda"].double() for k in kept if "lambda" in k]
        lam = torch.stack(lams).mean() if lams else nan
        scales = [k["scale"] for k in kept if "scale" in k]
        s = torch.stack(scales) if scales else nan.reshape(1)  # [batches] float64
        factors = [k["factor"] for k in kept if "factor" in k]
        factor = worst_value(torch.stack(factors)) if factors else zero
        return torch.stack([loss_sum, seen, lam, s.min(), s.mean(), s.max(), factor])
