"""Observers: what measures a training epoch, attached to the Engine from outside its loop.

Where it sits: around :meth:`zg.Engine.train_epoch`, never inside the chain

    seeds -> sample -> compact -> gather -> forward -> loss -> backward -> step

The loop calls every observer at four points, and asks each for a stage clock, and does nothing
else for them::

    observer.epoch_start(engine, epoch, first_batch)
    observer.batch_start(engine, epoch, batch)     # just before the step runs
    observer.clock()                               # a StageClock the step laps into, or None
    observer.batch_end(engine, epoch, batch)       # just after (engine.last_batch, engine.applied)
    observer.epoch_end(engine, stats)              # may fill fields of the EpochStats

An Engine holds a list, ``engine.observers`` (default: ``[AuditSyncs(1)]``, so every epoch says
how many host syncs a steady iteration made); ``train_epoch(observers=[...])`` adds more for one
call. The kit's observers:

* :class:`AuditSyncs`: runs the first ``iterations`` steady-state batches of an epoch under
  :class:`zg.audit.SyncAudit` and writes ``stats.host_syncs`` (and, on CUDA, the independent
  count of torch's sync-debug mode, ``stats.cuda_sync_warnings``).
* :class:`Trace`: remembers (epoch, batch, node-set hash, applied) of every executed step, so a
  test or a notebook can check which batches were applied, in which order, after rewinds.
* :class:`Progress`: advances a tqdm bar one tick per executed batch.
* :class:`Callbacks`: plain ``before(epoch, batch)`` / ``after(epoch, batch)`` functions (what a
  Grappa worker or a test hooks in; :class:`zg.engine.StepHooks` passes its own here).
* :class:`StageTimes`: answers ``clock()`` with a :class:`zg.step.StageClock` for each batch
  and writes the epoch's seconds per stage into ``stats.stage_seconds``. The laps are the
  stage names of the chain itself; a CUDA Graph replay cannot be split, so in mode "graph" the
  clocked batches run the same static step uncaptured. (A profiler timing single iterations
  passes a clock to :meth:`zg.Engine.run_batch` instead.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._checks import int_arg
from .audit import SyncAudit
from .rng import mix64
from .step import STAGES, StageClock

__all__ = [
    "Observer",
    "AuditSyncs",
    "Trace",
    "Progress",
    "Callbacks",
    "StageTimes",
    "node_set_hash",
]


class Observer:
    """The interface (every method optional: the defaults do nothing)."""

    def epoch_start(self, engine, epoch: int, first_batch: int) -> None:
        pass

    def batch_start(self, engine, epoch: int, batch: int) -> None:
        pass

    def clock(self) -> StageClock | None:
        """The stage clock the coming batch laps into (asked after ``batch_start``), or None."""
        return None

    def batch_end(self, engine, epoch: int, batch: int) -> None:
        pass

    def epoch_end(self, engine, stats) -> None:
        pass

    def interrupted(self, engine) -> None:
        """The epoch stopped on an exception (Ctrl-C, a hook's error): release what
        ``batch_start`` took (the epoch's ``batch_end`` and ``epoch_end`` will not come)."""


class AuditSyncs(Observer):
    """Host syncs per steady-state iteration, counted by :class:`zg.audit.SyncAudit`.

    The first ``iterations`` batches of each epoch that are not the engine's very first step
    (which allocates, compiles and warms caches) run under the audit; ``epoch_end`` writes the
    mean per iteration into ``stats.host_syncs`` and the ops launched per iteration into
    ``stats.launches`` (:func:`zg.audit.launches_op`; None when no batch was audited).
    """

    def __init__(self, iterations: int = 1):
        self.iterations = int_arg(iterations, "iterations", low=0)
        self._audit: SyncAudit | None = None

    def epoch_start(self, engine, epoch, first_batch):
        self.done = self.syncs = self.warnings = self.launches = 0

    def batch_start(self, engine, epoch, batch):
        if self.done < self.iterations and engine.steps_done > 0:
            self._audit = SyncAudit().__enter__()

    def batch_end(self, engine, epoch, batch):
        if self._audit is not None:
            self._audit.__exit__(None, None, None)
            self.done += 1
            self.syncs += self._audit.host_syncs
            self.launches += self._audit.launches
            self.warnings += self._audit.cuda_sync_warnings
            self._audit = None

    def interrupted(self, engine):
        if self._audit is not None:  # leave the dispatch mode it entered
            self._audit.__exit__(None, None, None)
            self._audit = None

    def epoch_end(self, engine, stats):
        if self.done:
            stats.host_syncs = self.syncs / self.done
            stats.launches = self.launches / self.done
            if engine.device.type == "cuda":
                stats.cuda_sync_warnings = self.warnings / self.done


def node_set_hash(mb) -> torch.Tensor:
    """int64 []: an order-independent hash of every block's true source-node set (device)."""
    total = torch.zeros((), dtype=torch.int64, device=mb.seeds.device)
    for i, b in enumerate(mb.blocks):
        rows = torch.arange(b.src_nodes.shape[0], device=b.src_nodes.device)
        h = mix64(b.src_nodes * 131 + i)
        total = total + torch.where(rows < b.num_src, h, 0).sum()
    return total


class Trace(Observer):
    """Every executed step: ``{"epoch", "batch", "hash", "applied"}`` in ``self.steps``.

    The hash (:func:`node_set_hash`) and the applied flag are device values, read once per
    epoch (at ``epoch_end``), never per step. A captured step's mini-batch lives in the CUDA
    Graph's buffers, which every replay rewrites, so the hash is taken right after each step.
    """

    def __init__(self):
        self.steps: list[dict] = []
        self._pending: list[torch.Tensor] = []

    def batch_end(self, engine, epoch, batch):
        applied = engine.applied if engine.applied is not None else torch.ones((), dtype=torch.bool)
        self._pending.append(
            torch.stack(
                [node_set_hash(engine.last_batch), applied.to(torch.int64).to(engine.device)]
            )
        )
        self.steps.append({"epoch": epoch, "batch": batch})

    def epoch_end(self, engine, stats):
        self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        values = torch.stack(self._pending).cpu().tolist()
        waiting = [s for s in self.steps if "hash" not in s]
        for entry, (h, applied) in zip(waiting, values):
            entry["hash"], entry["applied"] = h, bool(applied)
        self._pending = []

    def applied(self) -> list[tuple]:
        """(epoch, batch, node-set hash) of every applied step, in order."""
        self.flush()
        return [(s["epoch"], s["batch"], s["hash"]) for s in self.steps if s.get("applied")]


class Progress(Observer):
    """One tick of a tqdm bar (or anything with ``update(n)``) per batch of the epoch reached
    for the first time: a batch run again after a rewind does not tick again, so the bar ends
    at its total (one tick per batch of the epoch)."""

    def __init__(self, bar):
        if not callable(getattr(bar, "update", None)):
            raise TypeError(
                f"bar must have an update(n) method (a tqdm bar), got {type(bar).__name__}"
            )
        self.bar = bar
        self._reached = 0

    def epoch_start(self, engine, epoch, first_batch):
        self._reached = first_batch

    def batch_end(self, engine, epoch, batch):
        if batch >= self._reached:
            self.bar.update(1)
            self._reached = batch + 1


class Callbacks(Observer):
    """``before(epoch, batch)`` and ``after(epoch, batch)`` around every executed batch."""

    def __init__(
        self,
        before: Callable[[int, int], None] | None = None,
        after: Callable[[int, int], None] | None = None,
    ):
        for name, f in (("before", before), ("after", after)):
            if f is not None and not callable(f):
                raise TypeError(f"{name} must be callable or None, got {type(f).__name__}")
        self.before, self.after = before, after

    def batch_start(self, engine, epoch, batch):
        if self.before is not None:
            self.before(epoch, batch)

    def batch_end(self, engine, epoch, batch):
        if self.after is not None:
            self.after(epoch, batch)


class StageTimes(Observer):
    """Seconds per stage of every executed batch, summed over the epoch.

    ``epoch_end`` writes them into ``stats.stage_seconds`` (and keeps the last epoch's in
    ``self.seconds``). On the CPU the laps are ``time.perf_counter``; on CUDA, CUDA events read
    once at the end of the epoch (no sync per lap).
    """

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._clock: StageClock | None = None

    def epoch_start(self, engine, epoch, first_batch):
        self.seconds = {s: 0.0 for s in STAGES}
        self._clock = StageClock(engine.device, into=self.seconds)

    def batch_start(self, engine, epoch, batch):
        self._clock.start()

    def clock(self) -> StageClock | None:
        return self._clock

    def epoch_end(self, engine, stats):
        stats.stage_seconds = dict(self._clock.finish())
