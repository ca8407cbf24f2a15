"""An epoch's account: where every second of a Grappa epoch goes, per worker.

Where it sits: around a worker's epoch (:mod:`zg.grappa.worker`). The worker's Engine laps the
stages of its one step into an :class:`AccountClock` (the :class:`zg.step.StageClock` of the
chain ``sample -> compact -> gather -> forward -> loss -> backward -> step``), the gradient
exchange (:mod:`zg.grappa.exchange`) marks the moment backward's compute ends, and the worker
times what it does between steps (regrouping, evaluation, checkpoints). Every part is added into
one row of seconds per worker, which rides the epoch's one exchange of numbers (an all-gather
started without waiting, completed an epoch later); rank 0 writes the record's ``account``::

    {"seconds": [P], "parts": {part: [P]}}    seconds; parts sum to "seconds" on every worker

The parts (:data:`PARTS`):

    sampling        sample + compact: the mini-batch's blocks, on the worker's local graph
    gather          the input features and labels of the batch
    forward         the model, the per-seed loss and the estimator's factors (with the few
                    scalars some estimators all-gather)
    backward        backward's compute, up to the moment the exchange starts
    exchange        the exchange's flat all-reduce of the scaled gradient, including the wait
                    for the slowest worker to reach it (psgd_pa: its flag, and its parameter
                    averaging)
    step            the optimizer step (gated on the overflow flag)
    evaluation      rank 0's full-graph evaluation (every ``eval_every`` epochs)
    repartitioning  regrouping into a new super-epoch: local graph, weights, envelope, Engine
    checkpointing   writing the checkpoint of the epoch before (a collective: every worker
                    takes part); a checkpoint holds complete records, so it is written after
                    its epoch's exchange, in the next epoch (the last one: ``total_seconds``)
    other           what is left: the epoch's tables, Python between the steps, starting
                    the epoch's exchange of numbers and reading the one before

A worker's epoch is its own clock from the start of one epoch's exchange of numbers to the
next; its ``other`` is that minus its own parts. The record's ``seconds`` is the slowest
worker's. Workers wait for each other only at the steps' all-reduces, so a wait shows as
"exchange" where it happens: rank 0's evaluation makes its own epoch longer, and the other
workers wait for it in the next epoch's first all-reduce.

Clocks add no host sync to a step: on the CPU each lap is ``time.perf_counter``; on CUDA a lap
is a pair of CUDA events (the exchange records one too), read once at the end of the epoch, after
the epoch's loss has been read (a point that already waits for the device).
"""

from __future__ import annotations

import time

import torch

from ..observe import Observer
from ..step import STAGES, StageClock

__all__ = [
    "PARTS",
    "STEP_PARTS",
    "AccountClock",
    "AccountTimes",
    "EpochAccount",
    "account_record",
    "account_summary",
]

PARTS = (
    "sampling",
    "gather",
    "forward",
    "backward",
    "exchange",
    "step",
    "evaluation",
    "repartitioning",
    "checkpointing",
    "other",
)
STEP_PARTS = PARTS[:6]
# The chain's stages, as the account names them.
_PART_OF_STAGE = {
    "sample": "sampling",
    "compact": "sampling",
    "gather": "gather",
    "forward": "forward",
    "loss": "forward",
    "backward": "backward",
    "step": "step",
}
assert set(_PART_OF_STAGE) == set(STAGES)


class AccountClock(StageClock):
    """A :class:`zg.step.StageClock` whose "backward" lap is split in two at the moment the
    gradient exchange started (:meth:`hand_off`): "backward" before it, "exchange" after it.
    Without a hand-off (nothing exchanged) the lap is all "backward"."""

    def __init__(self, device: torch.device | None = None, into: dict[str, float] | None = None):
        super().__init__(device, into)
        self._handed = None

    def hand_off(self) -> None:
        """Called by the exchange when backward's compute ends (the last call counts)."""
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            self._handed = event
        else:
            self._handed = time.perf_counter()

    def __call__(self, stage: str) -> None:
        if stage == "backward" and self._handed is not None:
            handed, self._handed = self._handed, None
            if self.cuda:
                self._events.append(("backward", self._last, handed))
            else:
                self.seconds["backward"] = self.seconds.get("backward", 0.0) + handed - self._last
            self._last = handed
            stage = "exchange"
        super().__call__(stage)


class AccountTimes(Observer):
    """The Engine observer that lends the step its :class:`AccountClock` and keeps the epoch's
    seconds per stage (``self.seconds``, read by :meth:`EpochAccount.add_stages`). The exchange
    finds the clock of the running batch at ``self.current``."""

    def __init__(self, device: torch.device):
        self.device = device
        self.current: AccountClock | None = None
        self.seconds: dict[str, float] = {}
        # False: the step runs whole (a captured CUDA Graph cannot be split into stages); its
        # seconds then fall into the epoch's "other".
        self.lend_clock = True

    def epoch_start(self, engine, epoch, first_batch):
        self.begin()

    def batch_start(self, engine, epoch, batch):
        self.current.start()

    def clock(self) -> AccountClock | None:
        return self.current if self.lend_clock else None

    def epoch_end(self, engine, stats):
        self.end()

    def begin(self) -> AccountClock:
        """A fresh clock for an epoch's steps (the Engine calls it through ``epoch_start``;
        ``batching="full"`` calls it directly)."""
        self.seconds = {}
        self.current = AccountClock(self.device, into=self.seconds)
        return self.current

    def end(self) -> None:
        """Read the clock (CUDA: its events; the epoch's loss read has already waited for
        them)."""
        if self.current is not None:
            self.current.finish()
            self.current = None

    def hand_off(self) -> None:
        # Not lent (a captured step): nothing reads the hand-off, and a timing event must not
        # be recorded while a CUDA Graph is being captured (a re-capture after an overflow
        # happens mid-epoch, with a clock running).
        if self.current is not None and self.lend_clock:
            self.current.hand_off()


class EpochAccount:
    """One worker's account of the epoch in progress: ``parts`` (seconds per part but
    "other") and the moment the epoch started."""

    def __init__(self):
        self.start = time.perf_counter()
        self.parts = {p: 0.0 for p in PARTS[:-1]}

    def restart(self) -> None:
        """The next epoch starts now (right after leaving the epoch's exchange)."""
        self.start = time.perf_counter()
        self.parts = {p: 0.0 for p in PARTS[:-1]}

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] += seconds

    def add_stages(self, seconds: dict[str, float]) -> None:
        """Add a step clock's seconds per stage (and "exchange") to their parts."""
        for stage, value in seconds.items():
            self.add(_PART_OF_STAGE.get(stage, stage), value)

    def row(self) -> list[float]:
        """The parts but "other", in :data:`PARTS` order (what the epoch's exchange carries)."""
        return [self.parts[p] for p in PARTS[:-1]]

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def account_record(seconds: list[float], rows: list[list[float]]) -> dict:
    """The record's ``account`` from every worker's epoch seconds (its own clock) and parts but
    "other" (``rows[p]`` in :data:`PARTS` order). "other" is what is left, never negative: a
    worker whose parts add up to more than its clock (they are read a moment later) has that
    sum as its seconds."""
    if len(seconds) != len(rows):
        raise ValueError(f"seconds has {len(seconds)} workers, rows {len(rows)}")
    totals, others = [], []
    for clock, row in zip(seconds, rows):
        used = sum(row)
        total = max(float(clock), used)
        totals.append(total)
        others.append(total - used)
    parts = {p: [float(row[i]) for row in rows] for i, p in enumerate(PARTS[:-1])}
    parts["other"] = others
    return {"seconds": totals, "parts": parts}


def account_summary(history: dict, skip: int = 1) -> dict:
    """What an epoch costs in a run, from its history's accounts.

    ``skip``: the first epochs left out (the first pays for starting: processes meeting,
    first-touch allocations). Returns ``{"seconds": median epoch seconds, "parts": {part: mean
    seconds per epoch, mean over workers}, "step_seconds": mean seconds of one step (the step
    parts over the iterations, mean over workers), "step_seconds_by_worker": the same per
    worker, "evaluation_seconds": mean seconds of one evaluation (rank 0 evaluates; None: none
    in the epochs kept), "epochs": epochs kept}``. ``parts`` sums to the mean epoch (evaluation
    and repartitioning spread over the epochs as they fell).

    A step's "exchange" holds the wait for the slowest worker, and the other workers wait there
    for rank 0's evaluation: to weigh an evaluation against a step, use rank 0's own step
    (``step_seconds_by_worker[0]``), which does not wait for its own evaluation."""
    if not isinstance(history, dict) or "epochs" not in history:
        raise TypeError("history must be a zg.grappa.train history (a dict with 'epochs')")
    records = [r for r in history["epochs"][skip:] if "account" in r]
    if not records:
        raise ValueError(f"history has no epoch with an account after the first {skip}")
    workers = len(records[0]["account"]["seconds"])

    def mean_over_workers(record: dict, part: str) -> float:
        return sum(record["account"]["parts"][part]) / workers

    parts = {p: sum(mean_over_workers(r, p) for r in records) / len(records) for p in PARTS}
    steps = sum(r["iterations"] for r in records)
    step_total = sum(mean_over_workers(r, p) for r in records for p in STEP_PARTS)
    step_by_worker = [
        sum(r["account"]["parts"][p][w] for r in records for p in STEP_PARTS) / steps
        for w in range(workers)
    ]
    evaluated = [
        r["account"]["parts"]["evaluation"][0] for r in records if r["val_acc"] is not None
    ]
    seconds = sorted(r["seconds"] for r in records)
    return {
        "seconds": seconds[len(seconds) // 2],
        "parts": parts,
        "step_seconds": step_total / steps,
        "step_seconds_by_worker": step_by_worker,
        "evaluation_seconds": sum(evaluated) / len(evaluated) if evaluated else None,
        "epochs": len(records),
    }
