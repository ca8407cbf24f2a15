"""The few collectives the kit's workers call besides the gradient exchange: PSGD-PA's parameter
averaging, the estimators' per-iteration scalars and the rows checkpoints gather. Each records
what it sends in the worker's :class:`zg.grappa.comm.CommLedger` (``gather_row`` is bookkeeping
for the history and records nothing).

Where it sits: used by :mod:`zg.grappa.exchange`, :mod:`zg.grappa.checkpoint` and
:mod:`zg.grappa.train`; Lab 6's DDP-hook form (:mod:`zg_course.hook`) uses them too.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .comm import CommLedger

__all__ = ["average_parameters", "gather_stats", "gather_row"]


def average_parameters(
    model: torch.nn.Module, world: int, ledger: CommLedger, apply: torch.Tensor | None = None
) -> None:
    """PSGD-PA's averaging step: one all_reduce of all parameters, divided by P. With ``apply``
    (bool [] device) False the parameters stay as they are (an overflowed iteration)."""
    params = [p for p in model.parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in params])  # [num_params]
    ledger.record("parameters", "all_reduce", flat.numel() * flat.element_size())
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    with torch.no_grad():
        for p in params:
            new = flat[offset : offset + p.numel()].view_as(p)
            p.copy_(new if apply is None else torch.where(apply, new, p))
            offset += p.numel()


def gather_stats(mine: torch.Tensor, world: int, ledger: CommLedger) -> torch.Tensor:
    """All workers' (n_p, W_p, Q_p): the few scalars Grappa sends besides gradients."""
    ledger.record("scalars", "all_gather", mine.numel() * mine.element_size())
    return gather_row(mine, world)


def gather_row(mine: torch.Tensor, world: int) -> torch.Tensor:
    out = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(out, mine)
    return torch.stack(out).cpu()  # [P, len]
