r"""The one gradient exchange of every distributed trainer: a flat all-reduce inside the step.

Where it sits: in the Engine's step, as :attr:`zg.StepHooks.reduce`: after backward, before
the optimizer step (seeds -> sample -> compact -> gather -> forward -> loss -> backward ->
**exchange** -> step). Each worker p scales its gradient by its estimator scale ``s_p`` (a 0-d
device tensor the loss computed, :meth:`zg.grappa.Estimator.combine_device`) and the workers sum:

    flat = [ s_p * grad_p (every parameter, flattened) | extras ]     -> all_reduce SUM
    grad <- flat[:n]          on every worker: G = sum_p s_p grad_p (equation (1) of
                              zg.grappa.estimators)
    extras                    what rides the same all-reduce, no extra round trip:
                              the overflow flag (with an envelope step; one worker's overflow
                              stops every worker's step for that iteration) and, for the
                              data-parallel trainer, the loss sum and the seed count (the
                              gradient and the loss become the global batch's means)

This is what the authors' code does with a DDP communication hook (scale the bucket, all-reduce
SUM): Lab 6 teaches that form, and ``tests/grappa/test_grappa_exchange.py`` checks that this
exchange gives the same combined gradient as the course's hook (:func:`zg_course.hook.estimator_hook`)
on the same batches. Here it is a plain function of the step instead of a hook inside DDP's
backward: the flat buffer is allocated once, its address never changes, the scale is a device
tensor and nothing is read on the host, so with the envelope step the whole iteration, the
exchange included, is one fixed launch structure (captured as one CUDA Graph on CUDA with NCCL,
``mode="graph"``).

PSGD-PA exchanges no gradients: its per-step exchange carries the overflow flag alone, and
:meth:`GradientExchange.average_parameters` (an ``after`` hook) averages the parameters every
``average_every`` iterations.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ..step import OverflowGuard
from .collectives import average_parameters
from .comm import CommLedger

__all__ = ["GradientExchange"]


class GradientExchange:
    """A worker's gradient exchange, built once (see the module docstring).

    Args:
        model: its parameters (those that require a gradient) are exchanged, flattened in
            ``model.parameters()`` order.
        ledger: counts what is sent (kind "gradients"; "scalars" when only the flag goes).
        guard: the shared :class:`zg.step.OverflowGuard` whose flag rides along (None: no flag).
        gradients: False for a trainer that exchanges no gradients (PSGD-PA): then only the
            flag goes, every step.
        mean_over_count: the data-parallel trainer: the loss sum and the seed count ride along
            (set :attr:`counted` in the loss), and the summed gradient and loss are divided by
            the summed count: the global batch's means on every worker.
        process_group: the collective's group (None: the default group).

    Attributes: ``scale`` (1.0 or a 0-d device tensor, set by the loss every step: this
    worker's ``s_p``), ``flat`` (float32 [n + extras], the exchanged buffer: stable address),
    ``counted`` ({"loss": [], "count": []} device tensors, with ``mean_over_count``), ``account``
    (an :class:`zg.grappa.account.AccountTimes` told when backward ends, or None).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        ledger: CommLedger,
        *,
        guard: OverflowGuard | None = None,
        gradients: bool = True,
        mean_over_count: bool = False,
        process_group: Any = None,
    ):
        self.params = [p for p in model.parameters() if p.requires_grad] if gradients else []
        self.ledger, self.guard, self.group = ledger, guard, process_group
        self.mean_over_count = mean_over_count
        self.numel = sum(p.numel() for p in self.params)
        extras = (2 if mean_over_count else 0) + (1 if guard is not None else 0)
        device = next(model.parameters()).device
        self.flat = torch.zeros(self.numel + extras, dtype=torch.float32, device=device)
        self._grads = self.flat[: self.numel]  # [n] a view
        self._views = []  # each parameter's slice of the buffer, shaped like it
        offset = 0
        for p in self.params:
            self._views.append(self._grads[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
        self.scale: Any = 1.0
        self.counted: dict[str, torch.Tensor] = {}
        self.account: Any = None
        self._kind = "gradients" if gradients else "scalars"
        self._bytes = self.flat.numel() * self.flat.element_size()

    def __call__(self) -> None:
        """Exchange this step's gradients (every worker calls it at the same step)."""
        if self.account is not None:  # backward's compute ends here; the exchange starts
            self.account.hand_off()
        flat, n = self.flat, self.numel
        if not flat.numel():  # PSGD-PA without an envelope: nothing goes every step
            return
        if self.params:
            torch.cat([p.grad.reshape(-1) for p in self.params], out=self._grads)
            if not (isinstance(self.scale, float) and self.scale == 1.0):
                self._grads.mul_(self.scale)
        at = n
        if self.mean_over_count:
            flat[at : at + 2].copy_(torch.stack([self.counted["loss"], self.counted["count"]]))
            at += 2
        if self.guard is not None:
            flat[at : at + 1].copy_(self.guard.outgoing())
        self.ledger.record(self._kind, "all_reduce", self._bytes)
        dist.all_reduce(flat, group=self.group)
        if self.guard is not None:
            self.guard.merge(flat[at])
        if self.mean_over_count:
            count = flat[n + 1].clamp(min=1.0)
            # The step's loss (the share's sum, whose backward is done) becomes the global
            # batch's mean per-seed loss, what one process on the whole batch reports.
            self.counted["loss"].copy_(flat[n] / count)
            self._grads.div_(count)
        for p, view in zip(self.params, self._views):
            p.grad = view  # the summed gradient, in place in the buffer (no copy back)

    def average_parameters(self, model: torch.nn.Module, world: int) -> None:
        """PSGD-PA's averaging (an ``after`` hook every ``average_every`` iterations):
        :func:`zg.grappa.collectives.average_parameters` (one all_reduce of all parameters, divided by
        P), gated by the guard: an overflowed iteration averages nothing."""
        apply = None if self.guard is None else self.guard.apply()
        average_parameters(model, world, self.ledger, apply=apply)
