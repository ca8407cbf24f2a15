"""The estimator's DDP communication hook: the authors' form of the gradient exchange, which
Lab 6 teaches, with the collective helpers it shares with the workers re-exported.

Where it sits: in the course package (it was ``zg.grappa.hook``); the kit's workers do not use
the hook and ``zg`` never imports it; the collective helpers they share with it
(PSGD-PA's :func:`average_parameters`, checkpoints' :func:`gather_row`) live in
:mod:`zg.grappa.collectives` and are re-exported here for Lab 6. Their one exchange is
:class:`zg.grappa.exchange.GradientExchange`, a flat all-reduce inside the step (no DDP), and
``tests/grappa/test_grappa_exchange.py`` checks that it gives the combined gradient this hook
gives, on the same batches, with the same bytes. The hook scales this worker's gradient bucket by
its estimator scale s_p and all-reduces (SUM); with a guard the overflow flag rides the first
bucket (one more float: no extra round trip).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from zg.grappa.collectives import average_parameters, gather_row, gather_stats
from zg.grappa.comm import CommLedger

__all__ = [
    "HookState",
    "estimator_hook",
    "average_parameters",
    "gather_stats",
    "gather_row",
]


class HookState:
    """State of :func:`estimator_hook`: this iteration's worker scale s_p (a float or a 0-d
    device tensor, so setting it needs no host read), the ledger, the overflow guard whose
    flag rides the first bucket (None: no flag), and the epoch's account clock
    (:class:`zg.grappa.account.AccountTimes`, or None), told when a bucket is handed over."""

    def __init__(self, ledger: CommLedger, process_group=None, guard: Any = None):
        self.scale: Any = 1.0
        self.ledger = ledger
        self.process_group = process_group
        self.guard = guard
        self.account: Any = None


def estimator_hook(state: HookState, bucket):  # no annotations: DDP rejects string ones
    """DDP communication hook: ``bucket <- sum_p s_p * bucket_p`` (all_reduce SUM).

    DDP hands each bucket of this worker's gradient (of its loss ``sum f_v l_v``) to the hook
    and uses what the future returns as the gradient on every worker, so after backward every
    worker holds the estimator's combined gradient G of equation (1) in
    :mod:`zg.grappa.estimators`. DDP does not divide by the world size when a hook is set.
    With a guard, bucket 0 carries one more float, this worker's overflow flag; the reduced sum
    is merged into the guard before the optimizer step reads it.
    Returns a ``torch.futures.Future[torch.Tensor]`` of the reduced bucket.
    """
    if state.account is not None:  # backward's compute ends here; the exchange starts
        state.account.hand_off()
    buffer = bucket.buffer()
    if not (isinstance(state.scale, float) and state.scale == 1.0):
        buffer.mul_(state.scale)
    guard = state.guard
    if guard is None or bucket.index() != 0:
        state.ledger.record("gradients", "all_reduce", buffer.numel() * buffer.element_size())
        future = dist.all_reduce(buffer, group=state.process_group, async_op=True).get_future()
        return future.then(lambda fut: fut.value()[0])
    n = buffer.numel()
    carried = torch.cat([buffer, guard.outgoing().to(buffer.dtype)])  # [n + 1]
    state.ledger.record("gradients", "all_reduce", carried.numel() * carried.element_size())
    future = dist.all_reduce(carried, group=state.process_group, async_op=True).get_future()

    def unpack(fut):
        reduced = fut.value()[0]
        guard.merge(reduced[n])
        buffer.copy_(reduced[:n])
        return buffer

    return future.then(unpack)
