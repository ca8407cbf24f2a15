"""The one training step, the one overflow policy, and the one masked per-seed loss.

Where it sits: under every trainer in the kit. Every mode of :class:`zg.Engine` (the DGL
baseline, dynamic, eager, static, CUDA Graph), the data-parallel trainer and every Grappa worker
run the same chain, with the same stage names (code, profiler labels, figure colours, notebooks):

    seeds -> sample -> compact -> gather -> forward -> loss -> backward -> step

A *source* produces a :class:`zg.MiniBatch` (sample + compact); :func:`train_step` does the rest.
:class:`OverflowGuard` is the overflow policy, kept on the device: once a batch's envelope
overflows, every optimizer step is skipped on the device (parameters and optimizer state stay
bit for bit unchanged) until the host, polling at fixed iterations (:class:`OverflowPoll`),
notices, grows the envelope and resumes from the first overflowed batch. Whatever the envelope,
the same batches are applied in the same order as in a run that never overflowed. The epoch
loop itself is written out once, in :meth:`zg.Engine.train_epoch`. :class:`StageClock` times the
stages when a profiler asks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from .rng import device_scalar

__all__ = [
    "STAGES",
    "StageClock",
    "OverflowGuard",
    "train_step",
    "masked_cross_entropy",
    "per_seed_cross_entropy",
    "labels_in_range",
    "OverflowPoll",
    "mean_loss",
]

STAGES = ("sample", "compact", "gather", "forward", "loss", "backward", "step")


# ----------------------------------------------------------------------------- the clock


class StageClock:
    """Seconds per stage: call ``clock(stage)`` the moment a stage ends.

    On the CPU each lap is ``time.perf_counter`` and is added into ``into`` at once
    (``into[stage] += seconds``, so a recording mapping sees every lap). On CUDA each lap is a
    pair of CUDA events, read by :meth:`finish` after the timed work (no sync per lap).

    Args:
        device: where the timed work runs (CUDA: events). into: the mapping to add into
            (default: a fresh one with every stage at 0).
    """

    def __init__(self, device: torch.device | None = None, into: dict[str, float] | None = None):
        self.cuda = device is not None and torch.device(device).type == "cuda"
        self.device = torch.device(device) if device is not None else None
        self.seconds: dict[str, float] = into if into is not None else {s: 0.0 for s in STAGES}
        self._events: list[tuple] = []
        self.start()

    def start(self) -> None:
        """(Re)start the lap clock (call right before the first timed stage)."""
        if self.cuda:
            self._last = torch.cuda.Event(enable_timing=True)
            self._last.record(torch.cuda.current_stream(self.device))
        else:
            self._last = time.perf_counter()

    def __call__(self, stage: str) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            self._events.append((stage, self._last, event))
            self._last = event
        else:
            now = time.perf_counter()
            self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self._last
            self._last = now

    def laps(self, durations) -> None:
        """Stages that were timed elsewhere and have just ended, in order: ``[(stage, seconds)]``
        (a compiled kernel that clocks its own stages, e.g. the fused CPU sampler). The seconds
        are added and the lap clock restarts now, so the next stage is not charged for them."""
        for stage, seconds in durations:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + float(seconds)
        self.start()

    def finish(self) -> dict[str, float]:
        """Seconds per stage so far (on CUDA: synchronises and reads the events)."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
            for stage, begin, end in self._events:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + begin.elapsed_time(end) / 1e3
            self._events = []
        return dict(self.seconds)


def _lap(clock, stage: str) -> None:
    if clock is not None:
        clock(stage)


# ----------------------------------------------------------------------------- the loss


def per_seed_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor):
    """The one masked per-seed loss: (cross-entropy per row, the rows that count), no host sync.

    logits float [B, C], labels int64 [B], valid bool [B] (padding rows False). Returns
    (loss float [B], exactly 0 on rows that do not count; counted bool [B] = valid and labelled).
    Rows whose label is negative (unlabelled) never count, whatever ``valid`` says: they get the
    target -1, which the loss ignores (a loss of exactly 0 and no gradient). Every loss in the
    kit weighs these rows: the mean below, the data-parallel sum, Grappa's estimators. A label
    outside ``[-1, C)`` is clamped into it, so the step never indexes out of range (on CUDA a
    device-side assert); :func:`labels_in_range` is the check that reports such labels.
    """
    classes = logits.shape[1]
    # [B] padding and unlabelled: -1; never an index past the logits
    target = torch.where(valid, labels, -1).clamp(min=-1, max=classes - 1)
    loss = F.cross_entropy(logits, target, ignore_index=-1, reduction="none")  # [B]
    return loss, target >= 0


def labels_in_range(labels: torch.Tensor, nodes: torch.Tensor, num_classes: int) -> torch.Tensor:
    """bool [] (device, no host read): every label of ``nodes`` is in ``[-1, num_classes)``
    (-1: unlabelled). The engine computes it when an epoch starts and reads it with the epoch's
    loss, so labels changed in place after it was built are reported, never trained on."""
    picked = labels.index_select(0, nodes)  # [n]
    return ((picked >= -1) & (picked < num_classes)).all()


def masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, valid: Any) -> torch.Tensor:
    """Mean cross-entropy over the rows that count (see :func:`per_seed_cross_entropy`).

    ``valid``: the bool [B] mask of the rows that count, or the minibatch itself (anything with
    a ``valid`` mask, e.g. the ``mb`` an Engine passes its loss hook): so
    ``masked_cross_entropy`` is a loss hook as it is, ``StepHooks(loss=masked_cross_entropy)``
    called as ``loss(logits, labels, mb)``, the default's call."""
    if not isinstance(valid, torch.Tensor):
        mask = getattr(valid, "valid", None)
        if not isinstance(mask, torch.Tensor):
            raise TypeError(
                "masked_cross_entropy: valid must be a bool tensor [B] or a minibatch with a "
                f"'valid' mask, got {type(valid).__name__}"
            )
        valid = mask
    loss, counted = per_seed_cross_entropy(logits, labels, valid)  # [B], [B]
    return loss.sum() / counted.sum().clamp(min=1)


def _default_loss(logits: torch.Tensor, labels: torch.Tensor, mb) -> torch.Tensor:
    return masked_cross_entropy(logits, labels, mb.valid)


# ----------------------------------------------------------------------------- the policy


class OverflowGuard:
    """The overflow policy's device state (no host read in the steady state).

    Per batch: :meth:`observe` folds the batch's overflow flag into this process's sticky flag
    and, the first time, remembers the counts it wanted (to grow the envelope from). Single
    process, that flag decides at once; several processes (Grappa, data parallel)
    reduce it with the gradients (:meth:`outgoing` / :meth:`merge`, called by the reduction
    that already runs), so one worker's overflow stops every worker's step for that batch.
    :meth:`apply` is the step's on-device gate. The host reads the flag every few
    iterations (:meth:`poll_start` / :meth:`poll_read`) and rewinds.

    Attributes (device tensors): overflowed bool [] (sticky, all processes), first int64 []
    (first overflowed batch, -1 if none), local bool [] (this process overflowed),
    first_wanted int64 [L] (the counts this process's first overflowed batch wanted), enabled
    bool [] (False: skip every step, e.g. while a CUDA Graph warms up), applied bool [] (the
    last :meth:`apply`: whether that batch's step was applied).
    """

    def __init__(self, num_blocks: int, device: torch.device, distributed: bool = False):
        dev = torch.device(device)
        self.device = dev
        self.distributed = distributed
        self.overflowed = torch.zeros((), dtype=torch.bool, device=dev)
        self.first = torch.full((), -1, dtype=torch.int64, device=dev)
        self.local = torch.zeros((), dtype=torch.bool, device=dev)
        self.first_wanted = torch.zeros(max(num_blocks, 1), dtype=torch.int64, device=dev)
        self.enabled = torch.ones((), dtype=torch.bool, device=dev)
        self.applied = torch.ones((), dtype=torch.bool, device=dev)  # apply()'s answer
        self._batch = torch.zeros((), dtype=torch.int64, device=dev)
        self._host = torch.zeros(2, dtype=torch.int64, pin_memory=dev.type == "cuda")
        self.polls = 0

    def observe(self, mb, batch: torch.Tensor) -> None:
        """Fold ``mb.overflowed`` (bool []) of batch ``batch`` (int64 [] or int) in, on device."""
        hit = mb.overflowed
        if not isinstance(batch, torch.Tensor):
            batch = device_scalar(batch, self.device)
        first_here = hit & ~self.local
        if mb.wanted is not None:
            torch.where(first_here, mb.wanted, self.first_wanted, out=self.first_wanted)
        self.local.bitwise_or_(hit)
        if not self.distributed:
            # One process: its own flag is the decision (local and overflowed stay equal).
            torch.where(first_here, batch, self.first, out=self.first)
            self.overflowed.bitwise_or_(hit)
            return
        self._batch.copy_(batch)

    def outgoing(self) -> torch.Tensor:
        """float32 [1]: what this process adds to the reduction (1 if it ever overflowed)."""
        return self.local.to(torch.float32).reshape(1)

    def merge(self, any_overflowed: torch.Tensor) -> None:
        """Fold the reduced flag (bool [] or a float sum > 0) in; the batch observed last is the
        one it belongs to."""
        flag = (
            any_overflowed.reshape(()) > 0
            if any_overflowed.dtype != torch.bool
            else any_overflowed.reshape(())
        )
        first_time = flag & ~self.overflowed
        torch.where(first_time, self._batch, self.first, out=self.first)
        self.overflowed.bitwise_or_(flag)

    def apply(self) -> torch.Tensor:
        """bool []: whether this batch's optimizer step may change anything. Written into
        ``applied`` (one buffer, rewritten by every call: read it before the next step)."""
        return torch.bitwise_and(~self.overflowed, self.enabled, out=self.applied)

    def reset(self) -> None:
        """After a rewind: nothing has overflowed (the envelope has grown)."""
        self.overflowed.fill_(False)
        self.local.fill_(False)
        self.first.fill_(-1)

    # The host's view, read every few iterations.

    def poll_start(self):
        """Start a non-blocking copy of (overflowed, first) to host memory; returns a handle."""
        self.polls += 1
        flags = torch.stack([self.overflowed.to(torch.int64), self.first])
        self._host.copy_(flags, non_blocking=True)
        if self.device.type == "cuda":
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.device))
            return event
        return None  # on the CPU the copy has happened

    def read_now(self) -> int | None:
        """The first overflowed batch, or None, read at once: a host sync, for outside the
        steady loop only (an interrupted epoch, a checkpoint written mid-epoch)."""
        overflowed, first = torch.stack([self.overflowed.to(torch.int64), self.first]).tolist()
        return first if overflowed else None

    def poll_read(self, handle) -> int | None:
        """The first overflowed batch, or None. Waits for the copy ``handle`` started (on a GPU
        that copy was queued ``poll_every`` iterations earlier, so the wait never drains the
        queue below that depth)."""
        if handle is not None:
            handle.synchronize()
        values = self._host.numpy()  # host memory: reading it is not a device sync
        return int(values[1]) if values[0] else None


# ----------------------------------------------------------------------------- the step


def train_step(
    sample,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    features: torch.Tensor,
    labels: torch.Tensor,
    *,
    guard: OverflowGuard | None = None,
    batch=0,
    loss: Callable | None = None,
    forward: Callable | None = None,
    reduce: Callable[[], None] | None = None,
    clock: Callable[[str], None] | None = None,
    loss_only: bool = False,
):
    """One iteration: sample -> compact -> gather -> forward -> loss -> backward -> step.

    Args:
        sample: the sampled :class:`zg.MiniBatch` (its source already lapped "sample" and
            "compact"), or ``sample(clock) -> MiniBatch`` to sample here.
        model, optimizer: the zg model and a zg optimizer (``step(apply=...)``).
        features: float [N, F], or ``features(input_nodes) -> [S0, F]`` (a remote fetch);
            labels int64 [N]: what the gather stage reads.
        guard: the overflow policy (None: the source cannot overflow and nothing is gated).
        batch: int or int64 [] device tensor, this batch's index (for the guard).
        loss: ``loss(logits, labels, mb) -> 0-d tensor`` (default: masked mean cross-entropy).
        forward: what computes the logits (default ``model``; e.g. a DDP wrapper).
        reduce: called after backward, before the step (a data-parallel gradient all-reduce;
            it may merge other processes' overflow flags into ``guard``).
        clock: optional stage clock.
        loss_only: stop after the loss stage and return the loss itself (differentiable): the
            compiled launch (:mod:`zg.compiled`) compiles this half with the sampling, and
            runs backward and the update after it.
    Returns:
        (loss detached 0-d, the MiniBatch, apply bool [] or None); with ``loss_only``
        (loss 0-d, the MiniBatch, None).
    """
    mb = sample if hasattr(sample, "blocks") else sample(clock)  # a MiniBatch, or sample one
    if guard is not None:
        guard.observe(mb, batch)
    x = (
        features.index_select(0, mb.input_nodes)
        if isinstance(features, torch.Tensor)
        else features(mb.input_nodes)
    )  # [S0, F]
    y = labels.index_select(0, mb.seeds)  # [B]
    _lap(clock, "gather")
    logits = (model if forward is None else forward)(mb.blocks, x)  # [B, C]
    _lap(clock, "forward")
    value = (_default_loss if loss is None else loss)(logits, y, mb)  # []
    _lap(clock, "loss")
    if loss_only:
        return value, mb, None
    # Fresh gradients each step: backward hands every parameter its gradient buffer (no zero
    # fill, no accumulating into zeros). In a captured step they live in the graph's own memory
    # pool, where every replay writes the same addresses.
    optimizer.zero_grad(set_to_none=True)
    value.backward()
    if reduce is not None:
        reduce()
    _lap(clock, "backward")
    # After backward: a reduction hook may have merged other workers' flags into the guard.
    apply = guard.apply() if guard is not None else None
    optimizer.step(apply=apply)
    _lap(clock, "step")
    return value.detach(), mb, apply


# ----------------------------------------------------------------------------- the policy's clock


class OverflowPoll:
    """When the host looks at the overflow flag, and what it has seen so far.

    Call :meth:`after` once per executed batch with that batch's index. Every ``poll_every``
    executed batches it reads the copy of the guard it started at the previous poll point (so
    on a GPU the read never waits for the queue to drain) and starts the next copy; at ``end``
    it reads the guard itself. It returns the first overflowed batch when one is seen (the
    caller grows the envelope, :meth:`OverflowGuard.reset`, and resumes there), else None. The
    read points depend only on the batch count, so processes that share a reduced guard rewind
    at the same batch. Counts: ``executed`` (rewound runs included), ``rewound``, ``overflows``,
    ``polls``.
    """

    def __init__(self, guard: OverflowGuard, poll_every: int, start: int, end: int):
        self.guard, self.poll_every, self.end = guard, poll_every, end
        self.executed = self.rewound = self.overflows = self.polls = 0
        self._seen_max, self._since_poll = start, 0
        self._pending, self._handle = False, None

    def after(self, batch: int) -> int | None:
        self.executed += 1
        self.rewound += batch < self._seen_max
        self._seen_max = max(self._seen_max, batch + 1)
        self._since_poll += 1
        nxt = batch + 1
        if self._since_poll < self.poll_every and nxt < self.end:
            return None
        self._since_poll = 0
        first = None
        if self._pending:
            first = self.guard.poll_read(self._handle)
            self._pending, self._handle = False, None
        if first is None and nxt == self.end:  # the end: a real read of the guard
            first = self.guard.poll_read(self.guard.poll_start())
        elif first is None:
            self._pending, self._handle = True, self.guard.poll_start()
        self.polls += 1
        if first is not None:
            self.overflows += 1
            self._pending, self._handle = False, None
        return first


# ----------------------------------------------------------------------------- the epoch's loss


def mean_loss(losses: dict[int, torch.Tensor], check: torch.Tensor | None = None):
    """The mean of the applied batches' losses (by batch index), with one host read. With
    ``check`` (bool [] device), ``(mean, bool(check))`` from that same read."""
    device = check.device if check is not None else None
    if losses:
        mean = torch.stack([losses[b] for b in sorted(losses)]).double().mean()
    else:
        mean = torch.full((), float("nan"), dtype=torch.float64, device=device)
    if check is None:
        return float(mean)
    # Both values in one tensor on the device, then one transfer (two .cpu() would be two reads).
    value, ok = torch.stack([mean, check.to(mean.device, torch.float64)]).tolist()
    return value, bool(ok)
