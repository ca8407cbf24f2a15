"""What a worker builds for its trainer: its local data, and how its gradients are exchanged.

Where it sits: between the trainers' policy (:mod:`zg.grappa.trainers`: flags, defaults,
checks) and the worker loop (:mod:`zg.grappa.worker`). The worker asks :func:`role_for` for
the role of its trainer and builds its pieces through it; a role is chosen by the trainer's
flags, never by its name:

    flag                  local data (:meth:`Role.make_local_data`)  exchange (wrap, after_step)
    (none)                :class:`zg.grappa.local.LocalData`          DDP + the estimator's hook
    fetches_features      :class:`zg.grappa.remote.FeatureFetchData`  DDP + the estimator's hook
    averages_models       :class:`zg.grappa.local.LocalData`          no DDP; parameters averaged
                                                                      every ``average_every`` steps

So grappa, isolated and single are :class:`Role`, feature_fetch :class:`FetchingRole` and
psgd_pa :class:`AveragingRole`.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from ..graph import Graph
from .comm import CommLedger
from .config import TrainConfig
from .hook import HookState, average_parameters, estimator_hook
from .local import LocalData
from .partition import Partition
from .remote import FeatureFetchData
from .trainers import Trainer

__all__ = ["Role", "FetchingRole", "AveragingRole", "role_for"]


class Role:
    """A worker that trains on its isolated local graph and exchanges gradients through DDP
    with the estimator's communication hook (trainers grappa, isolated, single)."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer

    def __repr__(self) -> str:
        return f"zg.grappa.roles.{type(self).__name__}({self.trainer!r})"

    def make_local_data(
        self,
        cfg: TrainConfig,
        g: Graph,
        part: Partition,
        rank: int,
        world: int,
        device: torch.device,
        ledger: CommLedger,
    ):
        """What this worker trains on, its local data (:mod:`zg.grappa.local`): its isolated
        local graph."""
        return LocalData(cfg, g, part, rank, world, device, cfg.estimator_object)

    def make_source(self, *args: Any, **kwargs: Any):
        """Deprecated name of :meth:`make_local_data` (up to release 0.4): warns, then calls
        it."""
        warnings.warn(
            "Role.make_source is now Role.make_local_data (a worker's local data); the old "
            "name goes in zg 0.6",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.make_local_data(*args, **kwargs)

    def wrap(self, model: torch.nn.Module, device: torch.device, ledger: CommLedger, guard: Any):
        """(the module the step calls, the hook state or None): the model in DDP with the
        estimator's communication hook (:mod:`zg.grappa.hook`)."""
        with warnings.catch_warnings():
            # Recent torch deprecates broadcast_buffers for forward_sync_buffers, which still
            # syncs buffers at init; isolated workers must not sync theirs, so keep the old name.
            warnings.filterwarnings(
                "ignore", message=".*broadcast_buffers.*", category=FutureWarning
            )
            net = DistributedDataParallel(
                model,
                device_ids=[device.index] if device.type == "cuda" else None,
                broadcast_buffers=False,
            )
        state = HookState(ledger, guard=guard)
        net.register_comm_hook(state, estimator_hook)
        return net, state

    def after_step(
        self,
        model: torch.nn.Module,
        step: int,
        every: int,
        world: int,
        ledger: CommLedger,
        guard: Any,
    ) -> bool:
        """After the ``step``-th iteration of the run (0-based): nothing to do under DDP.
        Returns whether it exchanged anything (the account times it as "exchange")."""
        return False


class FetchingRole(Role):
    """The whole structure, remote features fetched every iteration
    (:mod:`zg.grappa.remote`); gradients through DDP as :class:`Role`."""

    def make_local_data(self, cfg, g, part, rank, world, device, ledger):
        return FeatureFetchData(cfg, g, part, rank, world, device, ledger)


class AveragingRole(Role):
    """Local steps without DDP; the parameters are averaged every ``every`` iterations with
    one all_reduce (:func:`zg.grappa.hook.average_parameters`)."""

    def wrap(self, model, device, ledger, guard):
        return model, None

    def after_step(self, model, step, every, world, ledger, guard):
        if (step + 1) % every == 0:
            # Gated like the optimizer step: an overflowed iteration averages nothing.
            average_parameters(model, world, ledger, apply=None if guard is None else guard.apply())
            return True
        return False


def role_for(trainer: Trainer) -> Role:
    """The role of a worker of ``trainer`` (a :class:`zg.grappa.Trainer`), from its flags."""
    if not isinstance(trainer, Trainer):
        raise TypeError(f"trainer must be a zg.grappa.Trainer, got {type(trainer).__name__}")
    if trainer.fetches_features and trainer.averages_models:
        raise ValueError(f"{trainer!r}: no role both fetches features and averages models")
    if trainer.fetches_features:
        return FetchingRole(trainer)
    if trainer.averages_models:
        return AveragingRole(trainer)
    return Role(trainer)
