"""zg.Engine: one training iteration, written out once, run in one of six modes.

Where it sits: on top of the samplers (:mod:`zg.sampling`) and the one training step
(:func:`zg.step.train_step`). Every batch runs the same chain, with the same stage names in
code, profiler labels, plots and notebooks:

    seeds -> sample -> compact -> gather -> forward -> loss -> backward -> step

``mode`` says what runs: a *sampler* of mini-batches times a *launch style* of the step
(:data:`zg.settings.MODE_PARTS`; ``engine.sampler``, ``engine.launch``):

=========== ============ ========= ==========================================================
mode        sampler      launch
=========== ============ ========= ==========================================================
"dgl"       dgl          eager
"dynamic"   dynamic      eager
"eager"     envelope     eager
"static"    envelope     static
"graph"     envelope     graph     (CUDA)
"compiled"  envelope     compiled  (:mod:`zg.compiled`)
=========== ============ ========= ==========================================================

``Engine(..., sampler=...)`` takes any :class:`zg.Sampler` (a :class:`zg.StaticSampler` for
the static launches) in place of the mode's own; ``mode`` then names the launch alone.

=========== ===================================================================================
"dgl"       DGL's ``NeighborSampler`` behind its ``DataLoader``, with a ``dgl.nn`` model
            (``zg.baselines.dgl.DGLModel``): the standard DGL recipe, the baseline. A
            shorthand: ``mode="eager", sampler=zg.DGLSampler(g, fanouts, seed=seed)``
            trains the same, bit for bit (the model kind and ``kernel="dgl"`` follow the
            sampler's blocks, its per-epoch loader starts through ``Sampler.prepare``).
"dynamic"   :class:`zg.DynamicSampler`: host-mediated, exact sizes (what frameworks do: every
            hop asks the host how many nodes it found).
"eager"     :class:`zg.EnvelopeSampler`: fixed shapes sized by the envelope, 0 host syncs,
            fresh tensors every step.
"static"    the same envelope step on buffers allocated once. The epoch's seed order goes to
            the device once per epoch (an ``[I, B]`` table); the step reads its batch at a
            device-resident counter, derives the batch's key on the device and advances the
            counter: nothing in it depends on the host. On the CPU this is the capturable
            step run eagerly; ``zg.audit.SyncAudit`` (0 host syncs) and stable buffer
            addresses are the evidence that it could be captured.
"graph"     (CUDA only) the static step captured once into a ``torch.cuda.CUDAGraph`` and
            replayed: per iteration the host only reseeds dropout and replays.
"compiled"  the static step compiled whole by ``torch.compile`` (sampling, gather, forward,
            loss, backward, optimizer step, overflow flag; ``fullgraph=True``), once per
            envelope, from the same torch code (:mod:`zg.compiled`); on CUDA then captured
            as in "graph". ``engine.compiled`` records the graphs compiled and their seconds.
=========== ===================================================================================

All six share the seed order of every epoch (:func:`zg.rng.epoch_batches`), the batches,
the step, the optimizer and the overflow policy, so a comparison is one argument apart.

The overflow policy (:class:`zg.step.OverflowGuard`, :class:`zg.step.OverflowPoll`): an
overflowed batch never changes parameters or optimizer state (the skip happens on the device);
every ``poll_every`` iterations the host reads a copy of the flag, and on an overflow it grows
the envelope from the first overflowed batch's counts, rebuilds (re-captures) the step and
resumes from that batch. Whatever the envelope, the same batches are applied in the same order
as in a run that never overflowed.

Randomness (:mod:`zg.rng`): sampling is keyed by (seed, epoch, batch); dropout is reseeded from
the same key before every iteration, so a rewound batch draws the same masks. Every public
method that trains or evaluates puts torch's global generators back as it found them when it
returns (:func:`zg.rng.keeps_global_rng`): the caller's own draws are not the kit's business.

What other trainers change (Grappa workers, the data-parallel trainer) is one :class:`StepHooks`
(their batches, loss, gradient reduction, shared overflow guard, ...). What measures an epoch
(sync audit, trace, progress, stage times) is an observer (:mod:`zg.observe`), attached from
outside the loop. Checkpoints are :mod:`zg.checkpoint`'s.

Kernels: by default every step runs the torch code the kit shows (``kernel="torch"``: the
sampler's torch ops, the layers' explicit gather), so an edit of that code is what runs. On the
CPU, ``kernel="auto"`` or ``"fused"`` opts into the compiled numba kernels of
:mod:`zg.kernels`, which compute the same tensors (``zg train`` and the benches do).
``settings.kernel``, ``repr(engine)`` and every :class:`EpochStats` record the kernel that ran.

Precision: TF32 matrix products on CUDA are a process setting of torch
(``torch.backends.cuda.matmul.allow_tf32``, off by default), never changed by the engine. The
engine records the setting it was built under (``settings.allow_tf32``); set it before building
an engine, since a captured step keeps the precision it was captured with.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from . import checkpoint, inference
from ._checks import INT64_MAX, int_arg, memory_arg, one_memory_reading
from ._interrupt import held_interrupt
from .compiled import CompiledStep
from .envelope import Envelope, block_bytes
from .graph import Graph
from .models import BlockModel
from .observe import AuditSyncs, Callbacks, Observer, Progress, Trace
from .rng import (
    EVAL_EPOCH,
    batch_key,
    epoch_batches,
    epoch_key_table,
    keeps_global_rng,
    seed_dropout,
)
from .sampling import DynamicSampler, EnvelopeSampler, Sampler, max_in_degree
from .settings import (
    MODE_PARTS,
    MODES,
    EngineArgs,
    EngineSettings,
    EpochStats,
    StepHooks,
    build_optimizer,
    check_batches,
    check_engine_args,
    checked_hooks,
    checked_minibatch,
    shorthand_sampler,
)
from .step import (
    OverflowGuard,
    OverflowPoll,
    StageClock,
    labels_in_range,
    mean_loss,
    train_step,
)

__all__ = [
    "Engine",
    "StepHooks",
    "EngineSettings",
    "EpochStats",
    "MODES",
]

_STATIC_MODES = ("static", "graph", "compiled")  # the modes that run on the static buffers


def _renamed(old: str, new: str) -> None:
    """A DeprecationWarning for an old attribute name (zg 0.4 -> 0.5, kept one release)."""
    warnings.warn(f"{old} is renamed {new} (the old name goes in zg 0.6)", DeprecationWarning, 3)


class Engine:
    """Train a zg model: the chain of :mod:`zg.engine`'s docstring in one of :data:`MODES`.

    Args:
        g: the graph (features, labels, ``train_idx``); moved to ``device``. The Engine keeps
            its own Graph object and a copy of the training nodes, so a later reassignment of
            ``g.x`` or ``g.y`` is not seen (build a new Engine); in-place changes to the feature
            and label tensors are (they are shared).
        model: a zg model (``zg.models.SAGE`` / ``GCN`` / ``GAT``; with DGL's sampler, mode
            "dgl" or :class:`zg.DGLSampler`, a ``zg.baselines.dgl.DGLModel``); moved to
            ``device``.
        fanouts: per layer, input layer first. batch_size: seeds per iteration (buffers are
            sized by ``min(batch_size, training nodes)``).
        envelope: the envelope sampler's sizes: "profiled" (None, the default), "worst_case",
            or a :class:`zg.Envelope` (used by modes "eager", "static" and "graph").
        mode: "dgl" | "dynamic" | "eager" | "static" (default) | "graph" (CUDA) |
            "compiled": a sampler times a launch style (:data:`zg.settings.MODE_PARTS`; see the
            module). With ``sampler`` given, the launch style alone: "eager", "static",
            "graph" or "compiled".
        device: "cpu" or "cuda[:i]".
        seed: fixes sampling, dropout and the seed order of every epoch.
        optimizer: "adam" (default) | "sgd" | ``zg.optim.adam(lr=..., weight_decay=...)`` |
            ``zg.optim.sgd(...)`` | a ``zg.optim.DeviceAdam`` / ``DeviceSGD`` over the model's
            parameters. The learning rate lives in a device tensor: :meth:`set_lr` changes it,
            also after capture.
        kernel: "torch" (default: the torch code of every kernel, sampling and aggregation, as
            CUDA runs it and as the kit shows it), "auto" (the compiled numba kernels on the CPU
            when numba is installed, else torch) or "fused" (those kernels). The same samples
            either way, bit for bit; the fused sampler runs below torch's dispatcher, so
            SyncAudit sees the rest of the step only. ``settings.kernel`` says what ran.
        hooks: a :class:`StepHooks` (what another trainer changes; default: single process).
            (``step=``, its name up to 0.4, is retired.)
        sampler: a :class:`zg.Sampler` to use instead of the mode's own (a
            :class:`zg.StaticSampler` for the static launches), built for the same fanouts
            and batch rows; then ``envelope`` is left out. CONTRIBUTING.md "Add a sampler".
            A sampler's options travel with it: sampling with replacement is
            ``sampler=zg.EnvelopeSampler(g, fanouts, batch_size, replace=True)`` (any launch)
            or ``mode="eager", sampler=zg.DynamicSampler(g, fanouts, replace=True, seed=seed)``
            (what ``mode="dynamic"`` runs, with replacement), ``mode="eager",
            sampler=zg.DGLSampler(g, fanouts, replace=True, seed=seed)`` (``mode="dgl"``'s);
            ``settings.replace`` records the sampler's (the built-in samplers sample without
            replacement).

    Every argument is checked once (:func:`zg.settings.check_engine_args`); then the Engine
    builds, in named steps: the model and optimizer on the device, the step
    (:meth:`_build_step`), the position, the sampler and the static buffers
    (:meth:`_build_sampler`).

    Attributes: ``sampler`` (what samples: the mode's own or the one given), ``hooks``
    (the :class:`StepHooks`), ``observers`` (list of :class:`zg.observe.Observer`; default audits one steady
    iteration per epoch), ``settings`` (:class:`EngineSettings`), ``history`` (EpochStats of
    every call of :meth:`train_epoch`), ``envelope`` (None in modes "dgl" and "dynamic"),
    ``cuda_graph`` (the captured ``torch.cuda.CUDAGraph`` in mode "graph", else None),
    ``compiled`` (the :class:`zg.compiled.CompiledStep` in mode "compiled", else None),
    ``applied`` (bool [] device: whether the last step was applied).
    """

    @one_memory_reading()  # one build, one read of the machine's memory
    def __init__(
        self,
        g: Graph,
        model: torch.nn.Module,
        fanouts: Sequence[int],
        batch_size: int,
        envelope: Any = None,
        *,
        mode: str = "static",
        device: Any = "cpu",
        seed: int = 0,
        optimizer: Any = "adam",
        kernel: str = "torch",
        hooks: StepHooks | None = None,
        sampler: Sampler | None = None,
    ):
        # 1. Every argument checked once, in one place (zg.settings.check_engine_args).
        args = check_engine_args(
            g, model, fanouts, batch_size, envelope, mode=mode, device=device, seed=seed,
            optimizer=optimizer, kernel=kernel, hooks=hooks, sampler=sampler,
        )  # fmt: skip
        # 2. The graph, the model and its optimizer on the device; the settings recorded once.
        self._adopt(args)
        # 3. The one call of the step, the observers and the position.
        self._build_step()
        self.observers: list[Observer] = [AuditSyncs(1)]
        self._start_position()
        # 4. The sampler (and, in the static launches, the buffers the step reads).
        self._build_sampler(args)

    def _adopt(self, args: EngineArgs) -> None:
        """The checked arguments' data, model and optimizer on the device; the settings."""
        self.hooks, self.device = args.hooks, args.device
        self.nodes, self.rows = args.nodes, args.rows  # host int64 [T]; the batch rows
        self.g = args.g.to(self.device)
        self.model = args.model.to(self.device)
        if isinstance(self.model, BlockModel):
            self.model._use_kernel(args.kernel)
        self.optimizer = build_optimizer(args.optimizer, self.model)
        self.settings = EngineSettings.of(args, self.optimizer)

    def _build_step(self) -> None:
        """The step every mode calls (:func:`zg.step.train_step` with this engine's model,
        optimizer, features, labels, overflow guard and hooks) and the hooks' callbacks."""
        hooks = self.hooks
        # What every epoch checks of the labels (they may be changed in place: they are shared).
        self._label_nodes = self.nodes.to(self.device)
        self._num_labels = max(int(self.g.num_classes), 1)
        # The hooks' results are checked (type, shape, device) where they come back.
        wrapped = checked_hooks(hooks, self.model, self._num_labels, self.device)
        self._checked_hooks = wrapped  # what zg.experiments.floor's step calls too
        self.features = wrapped["features"] or self.g.x
        self.guard = (
            OverflowGuard(len(self.fanouts), self.device) if hooks.guard is None else hooks.guard
        )
        # The built-in samplers of exact sizes (dynamic, dgl) never overflow: without a shared
        # guard their step is not gated (the optimizer writes its results instead of selecting
        # them through the gate: the same values, fewer passes over the parameters).
        ungated = self.mode in ("dynamic", "dgl") and hooks.guard is None
        self._train_step = functools.partial(
            train_step,
            model=self.model,
            optimizer=self.optimizer,
            features=self.features,
            labels=self.g.y,
            guard=None if ungated else self.guard,
            loss=wrapped["loss"],
            forward=wrapped["forward"],
            reduce=hooks.reduce,
        )
        self._callbacks = (
            [Callbacks(hooks.before, hooks.after)] if hooks.before or hooks.after else []
        )

    def _start_position(self) -> None:
        """Epoch 0, batch 0, nothing trained; the epoch's tables not loaded yet."""
        self.epoch, self.batch = 0, 0  # the position: the next batch to train
        self.steps_done = 0
        self._torn: tuple[int, int] | None = None  # (epoch, batch) of a torn optimizer step
        self.history: list[EpochStats] = []
        self.last_batch = None  # the MiniBatch of the last executed step
        self._captured_batch = None  # mode "graph": the captured step's MiniBatch
        self.cuda_graph: torch.cuda.CUDAGraph | None = None  # mode "graph"
        self.compiled: CompiledStep | None = None  # mode "compiled" (zg.compiled)
        self.epoch_table: torch.Tensor | None = None  # int64 [I, rows + 2 + hops]: the batches
        self.epoch_seeds: torch.Tensor | None = None  # int64 [I, rows]: this epoch's batches
        self._loaded_epoch: int | None = None
        self._epoch_batches: tuple | None = None  # (epoch, its batch list)
        self._next_batch = 0  # where the device counter points
        self._running_epoch: int | None = None  # the epoch train_epoch is in, else None

    def _build_sampler(self, args: EngineArgs) -> None:
        """The sampler of the mode (or the one given), the envelope it is sized by, and in the
        static launches the buffers the step reads (the batch counter, the loss)."""
        self.envelope: Envelope | None = None
        self._given_sampler = args.sampler is not None
        if self.mode in _STATIC_MODES:
            # The static buffers: the step's inputs and outputs, and the flags the host polls.
            self.counter = torch.zeros((), dtype=torch.int64, device=self.device)  # batch counter
            self.loss_buf = torch.zeros((), dtype=torch.float32, device=self.device)
        if args.sampler is not None:
            self.envelope = getattr(args.sampler, "envelope", None)
            self.sampler = args.sampler
            self._check_step_fits()
            return
        max_degree = max_in_degree(self.g)  # one host read, shared by everything built here
        if self.mode == "dynamic":
            self._check_step_fits()
            self.sampler = DynamicSampler._checked(
                self.g, self.fanouts, self.replace, self.seed, max_degree
            )
            return
        self.envelope = Envelope._resolved(
            args.envelope, self.g, self.fanouts, self.rows, self.replace, self.seed,
            self.nodes, max_degree,
        )  # fmt: skip
        self._max_degree = max_degree
        self.rebuild()

    # The settings live in one record; these read it.
    mode = property(lambda self: self.settings.mode, doc="What runs (:data:`MODES`).")
    fanouts = property(lambda self: self.settings.fanouts, doc="Per layer, input layer first.")
    batch_size = property(lambda self: self.settings.batch_size, doc="Seeds per iteration.")
    seed = property(lambda self: self.settings.seed, doc="Sampling, dropout and seed order.")
    replace = property(
        lambda self: self.settings.replace,
        doc="Sampling with replacement: the given sampler's option (the built-in ones: False).",
    )
    kernel = property(
        lambda self: self.settings.kernel, doc='What runs: "torch" | "fused" | "dgl".'
    )
    launch = property(
        lambda self: MODE_PARTS[self.settings.mode][1],
        doc='How the step is launched: "eager" | "static" | "graph" | "compiled" (the mode\'s second half).',
    )
    applied = property(
        lambda self: self.guard.applied,
        doc="bool [] device: whether the last step was applied (the overflow guard's gate).",
    )

    @property
    def step(self) -> StepHooks:
        """The old name of :attr:`hooks` (zg 0.4), for one release."""
        _renamed("engine.step", "engine.hooks")
        return self.hooks

    @property
    def source(self):
        """The old name of :attr:`sampler` (zg 0.4), for one release."""
        _renamed("engine.source", "engine.sampler")
        return self.sampler

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"zg.Engine(mode={s.mode!r}, kernel={s.kernel!r}, device={s.device!r}, "
            f"model={s.model}, fanouts={s.fanouts}, batch_size={s.batch_size}, seed={s.seed}, "
            f"epoch={self.epoch}, batch={self.batch})"
        )

    # ------------------------------------------------------------------------- the loop

    @keeps_global_rng
    def train_epoch(
        self, max_batches: int | None = None, observers: Sequence[Observer] = ()
    ) -> EpochStats:
        """Train from the current position to the end of the epoch (or ``max_batches`` batches).

        Returns the :class:`EpochStats` of this call. A call that stops mid-epoch leaves the
        position (epoch, batch) for the next call or a checkpoint. ``observers``: more
        :class:`zg.observe.Observer` s for this call, after ``self.observers``. A non-finite
        epoch loss stops training with a FloatingPointError naming the likely causes; labels of
        training nodes outside ``[-1, num_classes)`` (changed in place after the engine was
        built) with a ValueError. Both are read with the epoch's loss, in one host read.
        """
        if max_batches is not None:
            max_batches = int_arg(max_batches, "max_batches", low=1)
        if isinstance(observers, (str, bytes)) or not isinstance(observers, Sequence):
            raise TypeError(
                f"observers must be a list of zg.observe.Observer, got {type(observers).__name__}"
            )
        for i, o in enumerate(observers):
            if not isinstance(o, Observer):
                raise TypeError(
                    f"observers[{i}] must be a zg.observe.Observer (subclass it), got "
                    f"{type(o).__name__} {o!r:.60}"
                )
        self._refuse_torn("train_epoch")
        if self.batch >= len(self._load_epoch(self.epoch)):  # (an old checkpoint's end)
            self.epoch, self.batch = self.epoch + 1, 0
        epoch, first = self.epoch, self.batch
        batches = self._load_epoch(epoch)
        end = len(batches) if max_batches is None else min(len(batches), first + max_batches)
        watch = [*self.observers, *observers, *self._callbacks]
        poll = OverflowPoll(self.guard, self.settings.poll_every, first, end)
        losses: dict[int, torch.Tensor] = {}
        # What an exception must settle: (b, the optimizer's steps_taken before it) while batch
        # b's step may have run and is not yet published, else None. Cleared in the statement
        # that publishes the position, so no line of the loop sees the one without the other.
        inflight: tuple[int, int | None] | None = None
        stats: EpochStats | None = None  # this call's record, once appended
        held = held_interrupt()
        start_time = time.perf_counter()
        # Training needs autograd whatever the caller's mode (a call under torch.no_grad());
        # the caller's mode comes back however the call ends, also when an exception stopped a
        # no_grad block of the step before it restored the mode (torch >= 2.3 restores it
        # through the active TorchFunctionModes, such as an audit's).
        grad_was = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(True)
            self._running_epoch = epoch
            self.model.train()
            self.guard.reset()
            for o in watch:
                o.epoch_start(self, epoch, first)
            # A sampler of one stream per epoch (DGL's loader) starts before the clock, as
            # zg's table loads.
            self._prepare_sampler(epoch, first, batches)
            # Checked on the device now, read with the epoch's loss: no host sync of its own.
            labels_ok = labels_in_range(self.g.y, self._label_nodes, self._num_labels)
            b = first
            while b < end:
                for o in watch:
                    o.batch_start(self, epoch, b)
                clock = next((c for o in watch if (c := o.clock()) is not None), None)
                with held:  # Ctrl-C waits for this batch to be published
                    inflight = (b, getattr(self.optimizer, "steps_taken", None))
                    # sample -> compact -> gather -> forward -> loss -> backward -> step (gated)
                    losses[b] = self._train_batch(batches, epoch, b, clock)
                    # Published with every batch, in one statement (its stores run with no line
                    # between them), so an interruption leaves it true.
                    self.epoch, self.batch, self.steps_done, inflight = (
                        *self._after(epoch, b, len(batches)),
                        self.steps_done + 1,
                        None,
                    )
                for o in reversed(watch):
                    o.batch_end(self, epoch, b)
                overflowed_at = poll.after(b)  # the host looks every poll_every batches
                if overflowed_at is None:
                    b += 1
                    continue
                # Never applied: the position rewinds there first (the guard still says so
                # until _grow resets it, last), then the envelope grows and the step is rebuilt.
                self.epoch, self.batch, b = epoch, overflowed_at, overflowed_at
                losses = {k: v for k, v in losses.items() if k < overflowed_at}
                self._grow()
            seconds = time.perf_counter() - start_time
            loss, labels_ok = mean_loss(losses, labels_ok)
            stats = self._stats(epoch, seconds, loss, len(losses), poll)
            # The record first: an observer that raises (Ctrl-C while a logger closes the
            # epoch) loses neither the epoch's row nor its checks.
            self.history.append(stats)
        except BaseException:
            if not (self.history and self.history[-1] is stats):
                self._interrupted(epoch, batches, watch, inflight, losses, start_time, poll)
            raise
        finally:
            self._running_epoch = None
            torch.set_grad_enabled(grad_was)
            held.release()  # an interruption inside its own lines leaves no handler behind
        try:
            for o in watch:
                o.epoch_end(self, stats)
        finally:
            self._check_epoch(epoch, loss, labels_ok)
        return stats

    def seek(self, epoch: int) -> None:
        """Put the position at the start of ``epoch``: the next :meth:`train_epoch` trains its
        batch 0 (sampling, dropout and seed order are keyed by the epoch, so epoch ``e`` trains
        the same batches whatever came before). For a trainer that keeps the epoch count itself:
        a Grappa worker's Engine of a new super-epoch, or of a run resumed from its own
        checkpoint. ``epoch``: an int in ``[0, 2**63 - 2]`` (TypeError / ValueError naming it).

        Refused with a RuntimeError while :meth:`train_epoch` runs (from a hook or observer),
        after a torn optimizer step (see :meth:`train_epoch`), and when the engine stands inside
        an epoch (``batch > 0``, an interrupted epoch): seeking from there would drop or repeat
        batches, and the rewind guarantee (every batch applied once, in order) would not hold.
        Finish the epoch with :meth:`train_epoch`, or :meth:`load` a checkpoint."""
        epoch = int_arg(epoch, "epoch", low=0, high=INT64_MAX - 1)
        self._refuse_moving("seek")
        self.epoch = epoch
        self.rewound()

    @one_memory_reading()  # one build, one read of the machine's memory
    @keeps_global_rng
    def regroup(
        self,
        g: Graph,
        batch_size: int,
        envelope: Any = None,
        *,
        seed: int | None = None,
        nodes: Any = None,
        sampler: Sampler | None = None,
    ) -> None:
        """Train on new data from the next epoch on: the graph ``g`` (its features, labels and
        training nodes; ``nodes``: new ``StepHooks.nodes``), ``batch_size``, ``seed`` (default:
        the engine's) and what samples it (``envelope`` or ``sampler``, as :class:`Engine`
        takes them). The model, the optimizer and its state, the other hooks, the observers,
        the mode, the kernel, the position and the history stay. What a Grappa worker does at
        every repartition: its local graph changes, its Engine does not.

        Every argument is checked as the constructor checks it (TypeError / ValueError naming
        it), before anything changes. Refused (RuntimeError) where :meth:`seek` is: while an
        epoch runs, after a torn step, inside an epoch an interruption left partly applied.

        What is checked where: this public call checks what a user hands it, every time. The
        kit's own regrouping (a Grappa worker's, :mod:`zg.grappa.worker`) hands values it built
        and checked itself (the local graph the kit's partition cut from the checked graph,
        the envelope it profiled there, its seeds) to :meth:`_regroup_checked`, which checks
        nothing again; both read the machine's memory once
        (:func:`zg._checks.one_memory_reading`)."""
        self._refuse_moving("regroup")
        hooks = self.hooks if nodes is None else dataclasses.replace(self.hooks, nodes=nodes)
        args = check_engine_args(
            g, self.model, self.fanouts, batch_size, envelope, mode=self.mode,
            device=self.device, seed=self.seed if seed is None else seed,
            optimizer=self.optimizer, kernel=self.settings.kernel, hooks=hooks, sampler=sampler,
        )  # fmt: skip
        self._regroup(args)

    @one_memory_reading()
    @keeps_global_rng
    def _regroup_checked(
        self,
        g: Graph,
        batch_size: int,
        envelope: Any = None,
        *,
        seed: int | None = None,
        nodes: torch.Tensor | None = None,
        sampler: Sampler | None = None,
    ) -> None:
        """:meth:`regroup` of values the caller built and checked (the kit's own, never a
        user's): ``g`` a zg.Graph on the engine's device that fits the model (same features
        and classes), ``batch_size`` an int >= 1, ``envelope`` None, "profiled", "worst_case"
        or an :class:`zg.Envelope` that fits ``g``, ``fanouts`` and the batch rows (or
        ``sampler``, built for them), ``nodes`` int64 distinct ids of ``g``. The record
        :func:`zg.settings.check_engine_args` would return, made without a check."""
        self._refuse_moving("regroup")  # the engine's state, not a value: still refused
        hooks = self.hooks
        if nodes is not None:  # a copy: StepHooks(...) would check its fields again
            hooks = copy.copy(self.hooks)
            hooks.nodes = nodes
        given = hooks.nodes if hooks.nodes is not None else g.train_idx
        ids = given.to("cpu", torch.int64).contiguous().clone()  # host int64 [T]: its own copy
        rows = batch_size if hooks.batches is not None else min(batch_size, ids.numel())
        replace = sampler is not None and getattr(sampler, "replace", False) is True
        if envelope is None and sampler is None:
            envelope = "profiled"
        seed = self.seed if seed is None else seed
        if sampler is None:  # mode "dgl": its sampler over the new graph
            sampler = shorthand_sampler(self.mode, g, self.fanouts, seed)
        args = EngineArgs(
            g=g,
            model=self.model,
            fanouts=self.fanouts,
            batch_size=batch_size,
            envelope=envelope,
            mode=self.mode,
            device=self.device,
            seed=seed,
            replace=replace,
            optimizer=self.optimizer,
            kernel=self.settings.kernel,
            hooks=hooks,
            sampler=sampler,
            nodes=ids,
            rows=rows,
        )
        self._regroup(args)

    def _regroup(self, args: EngineArgs) -> None:
        """Regroup onto ``args`` (checked, or built by the kit from checked values)."""
        self._adopt(args)
        self._build_step()
        # Nothing loaded, sampled or captured for the old data is used again.
        self._epoch_batches = self._loaded_epoch = None
        self.epoch_table = self.epoch_seeds = None
        self.cuda_graph = self._captured_batch = self.last_batch = None
        self._build_sampler(args)
        self.rewound()

    def _refuse_moving(self, what: str) -> None:
        """The position may move only between epochs (see :meth:`seek`)."""
        self._refuse_torn(what)
        if self._running_epoch is not None:
            raise RuntimeError(
                f"{what}: train_epoch is running epoch {self._running_epoch}; the position "
                "moves only between calls of train_epoch (not from a hook or observer)"
            )
        if self.batch != 0:
            raise RuntimeError(
                f"{what}: the engine stands at batch {self.batch} of epoch {self.epoch}, an "
                "epoch an interruption left partly applied; moving now would drop or repeat "
                "its batches. Finish it with train_epoch() or load a checkpoint"
            )

    def _place(self, epoch: int, batch: int) -> None:
        """Set the position to ``(epoch, batch)``, checked by the caller (:func:`zg.checkpoint.load`
        restoring a saved one); the device counter is set again before the next static step."""
        self.epoch, self.batch = epoch, batch
        self.rewound()

    def _after(self, epoch: int, b: int, count: int) -> tuple[int, int]:
        """The position after batch ``b`` of an epoch of ``count`` batches."""
        return (epoch + 1, 0) if b + 1 == count else (epoch, b + 1)

    def _interrupted(self, epoch, batches, watch, inflight, losses, start_time, poll) -> None:
        """An exception stopped :meth:`train_epoch`: the observers release what they took, the
        batch in flight is settled (applied, torn, or not run), the position names the first
        batch not applied, and the history records what this call applied (one host read)."""
        for o in reversed(watch):
            o.interrupted(self)
        self._settle_batch(epoch, inflight, len(batches))
        self._settle_position(epoch)  # Ctrl-C, a hook's error: the next batch not applied
        kept = {k: v for k, v in losses.items() if (epoch, k) < (self.epoch, self.batch)}
        seconds = time.perf_counter() - start_time
        stats = self._stats(epoch, seconds, mean_loss(kept), len(kept), poll)
        stats.interrupted = True
        self.history.append(stats)

    def _check_epoch(self, epoch: int, loss: float, labels_ok: bool) -> None:
        """The epoch's checks, read with its loss: labels in range, a finite loss."""
        if not labels_ok:
            raise ValueError(
                f"epoch {epoch}: g.y holds labels outside [-1, {self._num_labels}) for training "
                "nodes (changed in place after the engine was built?); the step clamped them, "
                "so this epoch trained on wrong labels. Fix g.y (-1 marks an unlabelled node) "
                "and build a new Engine"
            )
        if not math.isfinite(loss):
            raise FloatingPointError(
                f"epoch {epoch}: the mean training loss is {loss}. Likely causes: non-finite "
                "features (g.x holds NaN/inf), a learning rate too large for this model, or "
                "labels outside [0, num_classes). Training stopped; the parameters are those "
                "after the epoch"
            )

    def _stats(self, epoch: int, seconds: float, loss: float, iterations: int, poll) -> EpochStats:
        """The EpochStats of a call of :meth:`train_epoch` (its loop took ``seconds``)."""
        return EpochStats(
            epoch=epoch,
            seconds=seconds,
            iterations=iterations,
            host_syncs=None,
            overflows=poll.overflows,
            replays=poll.executed,
            rewound_batches=poll.rewound,
            peak_bytes=self._peak_bytes(),
            loss=loss,
            polls=poll.polls,
            envelope_sizes=list(self.envelope.sizes) if self.envelope else [],
            kernel=self.kernel,
        )

    def applied_position(self) -> tuple[int, int]:
        """(epoch, batch): the next batch not yet applied. Between epochs this is the position;
        inside one (a hook writing a checkpoint) a batch that overflowed was skipped on the
        device, and so was every one after it, though the host may not have polled yet: one
        host read of the overflow guard tells."""
        first = self.guard.read_now() if self._running_epoch is not None else None
        if first is None:
            return self.epoch, self.batch
        return min((self.epoch, self.batch), (self._running_epoch, first))

    def _settle_batch(self, epoch: int, inflight: tuple | None, count: int) -> None:
        """After an exception: whether the step of the batch in flight (``inflight``: its index
        and the optimizer's ``steps_taken`` before it, or None when no step is unpublished) ran
        whole (then it is published, as it would have been a moment later), was torn inside
        the optimizer's in-place update (then the engine refuses to go on until a checkpoint
        is loaded), or did not run (nothing to do)."""
        opt = self.optimizer
        if getattr(opt, "writing", False):  # parameters and moments partly written
            opt.writing = False
            self._torn = (epoch, self.batch if inflight is None else inflight[0])
            return
        if inflight is None:  # published, or no step begun since the last publication
            return
        b, taken = inflight
        if self._captures and self.cuda_graph is not None:
            # The replay advances the counter inside the graph; _train_batch sets _next_batch
            # once the counter is b (a counter left at b + 1 by the batch before a rewind to b
            # is not this batch's replay).
            ran = self._next_batch == b + 1 and int(self.counter) == b + 1
        else:
            ran = taken is not None and getattr(opt, "steps_taken", taken) > taken
        if ran:
            self.epoch, self.batch = self._after(epoch, b, count)
            self.steps_done += 1

    def _refuse_torn(self, what: str) -> None:
        if self._torn is not None:
            epoch, b = self._torn
            raise RuntimeError(
                f"{what}: an exception landed inside the optimizer's in-place update of batch "
                f"{b} of epoch {epoch}, so the parameters and Adam moments are partly written "
                "(Ctrl-C waits for a batch to end; a second Ctrl-C or a signal handler that "
                "raises does not). Load a checkpoint (Engine.load) or build a new Engine"
            )

    def _settle_position(self, epoch: int) -> None:
        """After an interrupted epoch: the position names the first batch not applied (see
        :meth:`applied_position`); the device counter is set again before the next static step."""
        self._running_epoch = epoch
        self.epoch, self.batch = self.applied_position()
        self.rewound()

    def _train_batch(
        self, batches: list[torch.Tensor], epoch: int, b: int, clock: StageClock | None = None
    ) -> torch.Tensor:
        """Batch ``b`` of ``epoch``, its step gated by the overflow guard; its loss (device)."""
        # Drop the last batch's tensors before sampling this one: kept alive, they would make
        # the next step allocate (and on the CPU page-fault) fresh buffers instead of reusing.
        self.last_batch = None
        seed_dropout(batch_key(self.seed, epoch, b))  # the same masks if rerun
        if self.mode not in _STATIC_MODES:
            mb = self.sampler.sample(batches[b], epoch, b, clock=clock)  # sample -> compact
            mb = checked_minibatch(mb, self.sampler, "sample", len(self.fanouts), None, self.device)
            loss, self.last_batch, _ = self._train_step(mb, batch=b, clock=clock)
            return loss
        if self._next_batch != b:  # the device reads batch b itself; only a jump resets it
            self.counter.fill_(b)
        self._next_batch = b + 1
        if self.cuda_graph is not None and clock is None:
            self.cuda_graph.replay()
            self.last_batch = self._captured_batch  # rewritten by every replay
        else:
            self._static_step(clock)
        return self.loss_buf.clone()

    def _static_step(self, clock: StageClock | None = None) -> None:
        """The capturable step on static buffers: it reads batch ``counter`` of the epoch table,
        derives its key on the device and advances the counter; nothing depends on the host."""
        if self.compiled is not None and clock is None:  # mode "compiled": the same, compiled
            self.last_batch = self.compiled()
            return
        b, rows = self.counter, self.rows  # int64 [], int
        row = self.epoch_table.index_select(0, b.view(1)).view(-1)  # [rows + 2 + hops]
        seeds, num_seeds, keys = row[:rows], row[rows], row[rows + 1 :]  # views
        mb = self.sampler.sample_static(seeds, num_seeds, keys[0], clock=clock, hop_keys=keys[1:])
        hops = len(self.fanouts)
        mb = checked_minibatch(mb, self.sampler, "sample_static", hops, rows, self.device)
        loss, self.last_batch, _ = self._train_step(mb, batch=b, clock=clock)
        self.loss_buf.copy_(loss)
        self.counter.add_(1)

    # ------------------------------------------------------------------------- the envelope

    @property
    def overflowed(self) -> torch.Tensor:
        """bool [] device: the sticky overflow flag (see :class:`zg.step.OverflowGuard`)."""
        return self.guard.overflowed

    def step_bytes(self) -> int:
        """A lower bound on the bytes one step holds at once: each block's index, input and
        output rows at the envelope's sizes (:func:`zg.envelope.block_bytes`; without an
        envelope, a batch's rows in every block), and the parameters with their gradients and
        optimizer state. What :meth:`rebuild` checks against the device's memory."""
        return self._step_bytes(self.envelope)

    def _step_bytes(self, envelope: Envelope | None) -> int:
        dims = getattr(self.model, "feature_dims", None)
        if dims is None:
            return 0
        src = list(envelope.sizes) if envelope is not None else [self.rows] * len(dims[1:])
        hidden = max(dims[1:-1], default=dims[-1])
        blocks = block_bytes(src, src[1:] + [self.rows], self.fanouts, dims[0], hidden, dims[-1])
        params = sum(p.numel() * p.element_size() for p in self.model.parameters())
        return sum(b["total"] for b in blocks) + 4 * params  # weights, grads, two moments

    def _check_step_fits(self, envelope: Envelope | None = None) -> None:
        """Refuse a step at ``envelope`` (default: the engine's) that cannot fit in memory."""
        envelope = self.envelope if envelope is None else envelope
        memory_arg(
            self._step_bytes(envelope),
            f"one step at batch {self.rows}, fanouts {self.fanouts}, envelope "
            f"{envelope.sizes if envelope is not None else 'none'}, "
            f"layer widths {getattr(self.model, 'feature_dims', None)}",
            self.device,
        )

    @keeps_global_rng
    def rebuild(self) -> None:
        """(Re)build the sampler for the current envelope and, in mode "graph", (re)capture.
        Sizes whose step cannot fit in the device's memory are refused first (MemoryError with
        the estimate and the memory there), not met by the allocator's traceback mid-step.
        A sampler given to the Engine is rebuilt only if it is a :class:`zg.EnvelopeSampler`
        (from its own graph, seed and kernel); another one is kept as it is."""
        self._rebuild(self.envelope)

    def _rebuild(self, envelope: Envelope | None) -> None:
        """:meth:`rebuild` for ``envelope``: the sampler is built first and the engine takes
        the envelope and its sampler in one line, so an interruption leaves the old pair or
        the new one, never an envelope with a sampler sized by another."""
        self._check_step_fits(envelope)
        given = self.sampler if self._given_sampler else None
        sampler = given
        if given is None:
            sampler = EnvelopeSampler._checked(
                self.g, self.fanouts, self.rows, envelope, self.replace, self.seed,
                self.kernel, self._max_degree,
            )  # fmt: skip
        elif isinstance(given, EnvelopeSampler):
            sampler = EnvelopeSampler._checked(
                given.g, given.fanouts, given.batch_size, envelope, given.replace,
                given.seed, given.kernel, given.max_degree,
            )  # fmt: skip
        self.envelope, self.sampler, self.cuda_graph = envelope, sampler, None
        if self.mode == "compiled":  # compiled once per envelope, at its first step
            self.compiled = CompiledStep(self, self.compiled)
        if self._captures and self.epoch_seeds is not None:
            self._capture()

    def _grow(self) -> None:
        """After an overflow: grow the envelope from the first overflowed batch's counts and
        rebuild. Under a shared guard only the processes that overflowed grow; all resume.
        The caller has published the rewound position already; the guard is reset last, so
        until then it still names the overflowed batch (see :meth:`applied_position`)."""
        if self.envelope is None:
            raise RuntimeError(
                f"mode {self.mode!r} reported an overflow; it has no envelope to grow (a "
                f"sampler given to the Engine, {type(self.sampler).__name__}, sizes its own "
                "buffers: build it with room for every batch)"
            )
        if bool(self.guard.local):  # a rewind is rare: plain reads are fine
            wanted = self.guard.first_wanted.cpu().tolist()
            self._rebuild(self.envelope.grow(self.settings.grow_factor, observed=wanted))
        elif self._captures and self.guard.distributed:
            # The others capture again too, at the same batch: a capture's warm-up runs the
            # step, collectives included, which every process must meet in the same order.
            self.rebuild()
        self.rewound()
        self.guard.reset()

    @property
    def _captures(self) -> bool:
        """The step is captured as one CUDA Graph: mode "graph", and "compiled" on CUDA."""
        return self.mode == "graph" or (self.mode == "compiled" and self.device.type == "cuda")

    def rewound(self) -> None:
        """The position was moved from outside the loop (a rewind, a loaded checkpoint): the
        device's batch counter is set again before the next static step."""
        self._next_batch = -1

    def _capture(self) -> None:
        """Warm up on a side stream (optimizer disabled), then capture one CUDA Graph."""
        dev = self.device
        with torch.cuda.device(dev):
            self.guard.enabled.fill_(False)
            try:
                side = torch.cuda.Stream(device=dev)
                side.wait_stream(torch.cuda.current_stream(dev))
                with torch.cuda.stream(side):
                    for _ in range(3):
                        self.counter.fill_(0)
                        self._static_step()
                torch.cuda.current_stream(dev).wait_stream(side)
                torch.cuda.synchronize(dev)  # the warm-up's collectives done before the capture
                self.counter.fill_(0)
                graph = torch.cuda.CUDAGraph()  # the engine's once captured whole
                # With a process group (NCCL), its watchdog thread queries the events of earlier
                # collectives while this thread captures: "thread_local" allows other threads such
                # calls (this thread is held to the strict rules all the same).
                shared = dist.is_available() and dist.is_initialized()
                errors = "thread_local" if shared else "global"
                with torch.cuda.graph(graph, stream=side, capture_error_mode=errors):
                    self._static_step()
                torch.cuda.synchronize(dev)
                # Its tensors live in the graph's pool.
                self.cuda_graph, self._captured_batch = graph, self.last_batch
                self.guard.reset()
            finally:  # an interruption never leaves every later step skipped
                self.guard.enabled.fill_(True)
            self.counter.fill_(self._next_batch)

    def _load_epoch(self, epoch: int) -> list[torch.Tensor]:
        """The epoch's batches; in the static modes also uploaded to the device table once.
        The list is kept, so :meth:`run_batch` in a loop (profilers, benchmarks) does not redo
        the epoch's permutation on every call."""
        if self._epoch_batches is not None and self._epoch_batches[0] == epoch:
            batches = self._epoch_batches[1]
        else:
            batches = self.batches(epoch)
            self._epoch_batches = (epoch, batches)
        if self.mode not in _STATIC_MODES or self._loaded_epoch == epoch:
            return batches
        count, rows = len(batches), self.rows
        # One int64 table, one row per batch: [seeds (padded) | count | key | hop keys], so the
        # step reads its batch with one index_select; epoch_seeds / epoch_counts / epoch_keys
        # are views of it.
        keys = epoch_key_table(self.seed, epoch, count, len(self.fanouts))  # [I, 1 + hops]
        host = torch.zeros(count, rows + 1 + keys.shape[1], dtype=torch.int64)
        for i, seeds in enumerate(batches):
            host[i, : seeds.numel()] = seeds
            host[i, rows] = seeds.numel()
        host[:, rows + 1 :] = keys
        if self.device.type == "cuda":
            host = host.pin_memory()
        rebuilt = self.epoch_table is None or self.epoch_table.shape != host.shape
        if rebuilt:
            self.epoch_table = torch.zeros(host.shape, dtype=torch.int64, device=self.device)
            self.epoch_seeds = self.epoch_table[:, :rows]  # [I, rows]
            self.epoch_counts = self.epoch_table[:, rows]  # [I]
            self.epoch_keys = self.epoch_table[:, rows + 1 :]  # [I, 1 + hops] (zg.rng)
        # Stream-ordered after every earlier replay; the pinned source stays referenced (and the
        # caching host allocator keeps it until the copy ran) so it is never overwritten early.
        self.epoch_table.copy_(host, non_blocking=True)
        self._epoch_host = host
        self._loaded_epoch = epoch
        if rebuilt and self._captures:
            self._capture()
        return batches

    # ------------------------------------------------------------------------- one batch

    def batches(self, epoch: int) -> list[torch.Tensor]:
        """The seed tensors (host, int64) of every batch of ``epoch``, in order.

        With ``StepHooks.batches``, each batch gets the checks ``nodes`` gets (integer ids, 1-d,
        distinct, in range, at most ``batch_size``), named ``StepHooks.batches(epoch)[i]``, in
        every mode alike. A data-parallel share may be empty: the static step runs it as a no-op
        that still joins the gradient all-reduce; the other modes have no such step and refuse it.
        """
        if self.hooks.batches is None:
            return epoch_batches(self.nodes, self.seed, epoch, self.rows)
        allow_empty = self.mode in _STATIC_MODES
        given = self.hooks.batches(epoch)
        return check_batches(given, epoch, self.g.num_nodes, self.rows, allow_empty=allow_empty)

    @keeps_global_rng
    def run_batch(
        self, batch: int, epoch: int | None = None, clock: StageClock | None = None
    ) -> torch.Tensor:
        """Run one training iteration on batch ``batch`` of ``epoch`` (default: the current
        epoch), outside the epoch loop: what profilers and benchmarks time. It trains (use an
        engine whose state you no longer need). ``clock``: a :class:`zg.step.StageClock` the
        stages lap into (a CUDA Graph cannot be split: with a clock the static step runs
        uncaptured). Returns the loss tensor (device)."""
        epoch = self.epoch if epoch is None else int_arg(epoch, "epoch", low=0)
        batches = self._load_epoch(epoch)
        batch = int_arg(batch, "batch", low=0) % len(batches)
        self._prepare_sampler(epoch, batch, batches)
        return self._train_batch(batches, epoch, batch, clock)

    @keeps_global_rng
    def sample(self, batch: int, epoch: int | None = None):
        """Only the sampling of batch ``batch`` of ``epoch`` (sample -> compact): its
        :class:`zg.MiniBatch`, the same one the step would train on. What a sampler benchmark times."""
        epoch = self.epoch if epoch is None else int_arg(epoch, "epoch", low=0)
        batches = self._load_epoch(epoch)
        batch = int_arg(batch, "batch", low=0) % len(batches)
        self._prepare_sampler(epoch, batch, batches)
        return self.sampler.sample(batches[batch], epoch, batch)

    def _prepare_sampler(self, epoch: int, batch: int, batches: list[torch.Tensor]) -> None:
        """Tell a sampler that draws an epoch as one stream (the optional ``prepare`` of
        :class:`zg.Sampler`; :class:`zg.DGLSampler`, DGL's loader) that batch ``batch`` of
        ``epoch`` comes next, and the epoch's batches. Other samplers have no such method."""
        prepare = getattr(self.sampler, "prepare", None)
        if prepare is not None:
            prepare(epoch, batch, batches)

    def set_lr(self, lr: float) -> None:
        """Change the learning rate in place (a captured step sees the new value); recorded in
        ``settings.lr``. The learning rate is state, not identity: a checkpoint saved after it
        holds it, and a later :meth:`load` restores the checkpoint's (:mod:`zg.checkpoint`)."""
        self.optimizer.set_lr(lr)
        self.settings.lr = float(lr)

    def applied_trace(self) -> list[tuple]:
        """(epoch, batch, node-set hash) of every applied step, in order: needs a
        :class:`zg.observe.Trace` in ``observers`` (``engine.observers.append(Trace())``)."""
        traces = [o for o in self.observers if isinstance(o, Trace)]
        if not traces:
            raise ValueError(
                "no zg.observe.Trace is attached: engine.observers.append(zg.observe.Trace()) "
                "before training"
            )
        return traces[0].applied()

    @keeps_global_rng
    def fit(self, epochs: int, progress: bool | None = None) -> list[EpochStats]:
        """Train ``epochs`` epochs with a tqdm progress bar; returns their EpochStats.
        ``progress=None``: a bar unless ``ZG_PROGRESS=0`` or under pytest
        (:func:`zg.experiments._progress.progress_enabled`)."""
        epochs = int_arg(epochs, "epochs", low=1)
        if progress is None:
            from .experiments._progress import progress_enabled

            progress = progress_enabled()
        bar = None
        if progress:
            try:
                from tqdm.auto import tqdm

                bar = tqdm(
                    total=epochs * len(self.batches(self.epoch)), desc="training", unit="batch"
                )
            except ImportError:
                bar = None
        watch = [Progress(bar)] if bar is not None else []
        out = []
        try:
            for _ in range(epochs):
                stats = self.train_epoch(observers=watch)
                out.append(stats)
                if bar is not None:
                    bar.set_postfix(
                        epoch=stats.epoch, loss=f"{stats.loss:.3f}", overflows=stats.overflows
                    )
        finally:
            if bar is not None:
                bar.close()
        return out

    # ------------------------------------------------------------------------- memory

    @property
    def hidden_dim(self) -> int:
        """The model's hidden width (1 for a one-layer model), for the memory model."""
        dims = getattr(self.model, "feature_dims", None)
        return int(dims[1]) if dims and len(dims) > 2 else 1

    def memory_model(self) -> dict[str, Any]:
        """The envelope's memory model for this graph and model (see :meth:`zg.Envelope.memory_model`)."""
        if self.envelope is None:
            raise ValueError(f"mode {self.mode!r} has no envelope to model")
        return self.envelope.memory_model(
            self.g.feat_dim, self.hidden_dim, max(int(self.g.num_classes), 1)
        )

    def _peak_bytes(self) -> int:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        if self.envelope is None:
            return 0
        return int(self.memory_model()["totals"]["envelope"])

    # ------------------------------------------------------------------------- evaluation

    @keeps_global_rng
    @torch.no_grad()
    def evaluate(self, split: str = "val", sampled: bool = False) -> float:
        """Accuracy on ``split`` ("train" | "val" | "test").

        By default exact full-neighbour inference (:func:`zg.inference.full_neighbour_logits`:
        layer by layer over every node, no sampling noise; what DGL's examples report).
        ``sampled=True``: the training fanouts (:func:`zg.inference.sampled_logits`), in batches
        of ``batch_size``, keyed by the engine's seed (epoch :data:`zg.rng.EVAL_EPOCH`).
        Non-finite logits are refused (a FloatingPointError): an accuracy read from NaN is not
        a measurement. Labels are read as training reads them (:func:`zg.inference.evaluate`):
        -1 (unlabelled) is skipped, a label outside ``[-1, num_classes)`` (``g.y`` changed in
        place) is refused with a ValueError, as :meth:`train_epoch` refuses it.
        """
        if split not in ("train", "val", "test"):
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        if not isinstance(sampled, bool):
            raise TypeError(f"sampled must be a bool, got {type(sampled).__name__} {sampled!r}")
        if not isinstance(self.model, BlockModel):
            raise TypeError(
                f"evaluate runs zg models; this engine trains a {type(self.model).__name__}"
            )
        idx = getattr(self.g, f"{split}_idx")
        if idx is None or idx.numel() == 0:
            raise ValueError(f"the graph has no {split}_idx to evaluate on")
        keyed = dict(
            fanouts=self.fanouts,
            batch_size=self.batch_size,
            seed=self.seed,
            epoch=EVAL_EPOCH,
            replace=self.replace,
        )
        sampling = keyed if sampled else None
        return inference.evaluate(self.model, self.g, [split], sampled=sampling)[split]

    # ------------------------------------------------------------------------- checkpoints

    def save(self, path: Any) -> Path:
        """Write a checkpoint (:func:`zg.checkpoint.save`): model, optimizer, envelope, position
        (epoch, batch), settings and the graph's fingerprint, atomically."""
        self._refuse_torn("save")
        return checkpoint.save(self, path)

    @keeps_global_rng
    def load(self, path: Any) -> Engine:
        """Restore a checkpoint written by :meth:`save` (:func:`zg.checkpoint.load`): everything
        is checked before anything is assigned; a corrupt or mismatched file raises ValueError
        and leaves the engine as it was. Returns the engine. It also ends a torn step's refusal
        (see :meth:`train_epoch`): everything the step tore is the checkpoint's again."""
        checkpoint.load(self, path)
        self._torn = None
        return self

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint as a dict (:func:`zg.checkpoint.state`)."""
        return checkpoint.state(self)
