"""What a worker builds for its trainer: its local data, and how its gradients are exchanged.

Where it sits: between the trainers' policy (:mod:`zg.grappa.trainers`: flags, defaults,
checks) and the worker loop (:mod:`zg.grappa.worker`). The worker asks :func:`role_for` for
the role of its trainer and builds its pieces through it; a role is chosen by the trainer's
flags, never by its name:

    flag                  local data (:meth:`Role.make_local_data`)  exchange (:meth:`Role.exchange`)
    (none)                :class:`zg.grappa.local.LocalData`          scaled gradients, flat all-reduce
    fetches_features      :class:`zg.grappa.remote.FeatureFetchData`  scaled gradients, flat all-reduce
    averages_models       :class:`zg.grappa.local.LocalData`          the flag only; parameters averaged
                                                                      every ``average_every`` steps
    shares_batches        :class:`zg.grappa.local.GlobalBatchShares`  gradients, loss and count summed;
                                                                      the global batch's means

So grappa, isolated and single are :class:`Role`, feature_fetch :class:`FetchingRole`,
psgd_pa :class:`AveragingRole` and data_parallel :class:`SharingRole`.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from ..graph import Graph
from .comm import CommLedger
from .config import TrainConfig
from .exchange import GradientExchange
from .local import GlobalBatchShares, LocalData
from .partition import Partition
from .remote import FeatureFetchData
from .trainers import Trainer

__all__ = ["Role", "FetchingRole", "AveragingRole", "SharingRole", "role_for"]


class Role:
    """A worker that trains on its isolated local graph and exchanges its estimator-scaled
    gradients (:mod:`zg.grappa.exchange`; trainers grappa, isolated, single)."""

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

    def exchange(self, model: torch.nn.Module, ledger: CommLedger, guard: Any) -> GradientExchange:
        """The worker's gradient exchange (:mod:`zg.grappa.exchange`): the estimator-scaled
        gradients summed by one flat all-reduce inside the step, the overflow flag riding
        along."""
        return GradientExchange(model, ledger, guard=guard)

    def after_step(
        self,
        exchange: GradientExchange,
        model: torch.nn.Module,
        step: int,
        every: int,
        world: int,
    ) -> bool:
        """After the ``step``-th iteration of the run (0-based): nothing more to exchange.
        Returns whether it exchanged anything (the account times it as "exchange")."""
        return False


class FetchingRole(Role):
    """The whole structure, remote features fetched every iteration
    (:mod:`zg.grappa.remote`); gradients exchanged as :class:`Role`."""

    def make_local_data(self, cfg, g, part, rank, world, device, ledger):
        return FeatureFetchData(cfg, g, part, rank, world, device, ledger)


class AveragingRole(Role):
    """Local steps on the worker's own gradient; the parameters are averaged every ``every``
    iterations with one all_reduce (:meth:`GradientExchange.average_parameters`). The step's
    exchange carries the overflow flag alone."""

    def exchange(self, model, ledger, guard):
        return GradientExchange(model, ledger, guard=guard, gradients=False)

    def after_step(self, exchange, model, step, every, world):
        if (step + 1) % every == 0:
            exchange.average_parameters(model, world)  # gated like the optimizer step
            return True
        return False


class SharingRole(Role):
    """Data parallelism (:class:`zg.grappa.local.GlobalBatchShares`): the exchange sums the
    gradients with the loss and the seed count riding along, and divides by the count."""

    def make_local_data(self, cfg, g, part, rank, world, device, ledger):
        return GlobalBatchShares(cfg, g, part, rank, world, device, cfg.estimator_object)

    def exchange(self, model, ledger, guard):
        return GradientExchange(model, ledger, guard=guard, mean_over_count=True)


def role_for(trainer: Trainer) -> Role:
    """The role of a worker of ``trainer`` (a :class:`zg.grappa.Trainer`), from its flags."""
    if not isinstance(trainer, Trainer):
        raise TypeError(f"trainer must be a zg.grappa.Trainer, got {type(trainer).__name__}")
    if trainer.fetches_features and trainer.averages_models:
        raise ValueError(f"{trainer!r}: no role both fetches features and averages models")
    if trainer.fetches_features:
        return FetchingRole(trainer)
    if trainer.shares_batches:
        return SharingRole(trainer)
    if trainer.averages_models:
        return AveragingRole(trainer)
    return Role(trainer)
