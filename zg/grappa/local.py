"""What a Grappa worker trains on, its *local data*: its local graph, batches and node weights.

Where it sits: between the partition (:mod:`zg.grappa.partition`) and the worker's Engine
(:mod:`zg.grappa.worker`, where it is ``worker.local``). Every super-epoch the local data
rebuilds the worker's local graph, its coverage weights and, for ``step_shapes="envelope"``,
the envelope profiled on that local graph; the worker then builds a :class:`zg.Engine` over it.
The feature-fetching baseline's local data (:class:`zg.grappa.remote.FeatureFetchData`) has the
same attributes. (Called a "source" up to release 0.4, a word that also names the Engine's
sampler and a block's source nodes; ``zg.grappa.sources`` still reads, with a warning.)

Local data has: ``graph`` (what the Engine samples on), ``features`` (None: ``graph.x``; or a
callable fetching rows), ``weights`` (float [graph nodes] the estimator's node weights),
``train_nodes`` (its seeds, ids in ``graph``), ``seed`` (its sampling stream this super-epoch),
``envelope`` (or None), ``whole_graph`` (with ``batching="full"``: the
:class:`zg.grappa.fullgraph.WholeGraph` sampler the Engine runs, its one batch the whole local
graph; else None), ``iterations`` (I, the same on every worker), ``rows`` (its largest batch)
and :meth:`batches`.
"""

from __future__ import annotations

import inspect
import math

import torch

from ..envelope import Envelope
from ..graph import Graph
from ..rng import batch_ranges, epoch_order, worker_seed
from ..sampling import max_in_degree
from .config import TrainConfig
from .coverage import _propagate
from .estimators import Estimator, local_weights
from .fullgraph import WholeGraph, whole_graph_block
from .partition import Partition
from .plan import iterations_per_epoch

__all__ = ["LocalData", "GlobalBatchShares", "worker_batches", "batch_shares", "worker_envelope"]


def worker_envelope(cfg: TrainConfig, graph: Graph, rows: int, seed: int, nodes) -> Envelope:
    """The envelope a worker's static step is sized by, as ``cfg`` asks (``envelope``:
    "profiled", "worst_case" or a list of sizes; ``envelope_quantile`` / ``envelope_margin``),
    for ``rows`` seed rows of ``nodes`` on ``graph``.

    Every value here is the kit's own, checked once: ``cfg`` by :meth:`TrainConfig.validated`,
    ``graph`` and ``nodes`` (host int64, distinct ids of ``graph``) cut by the kit's partition
    from the checked graph, ``rows`` computed from them. So the envelope is built by
    :meth:`zg.Envelope.resolve`'s internal path, which checks nothing again; the one check left
    is the one that is new each super-epoch: explicit sizes against this local graph."""
    fanouts, max_degree = list(cfg.fanouts), max_in_degree(graph)
    given = cfg.envelope
    if isinstance(given, (list, tuple)):  # explicit sizes: do they fit this local graph?
        envelope = Envelope._made(
            [int(v) for v in given],
            "explicit",
            fanouts=fanouts,
            batch_size=rows,
            num_nodes=graph.num_nodes,
            max_degree=max_degree,
        )
        envelope._check_fits(fanouts, rows, graph.num_nodes)
        return envelope
    if given == "worst_case":
        return Envelope._worst_case(graph, fanouts, rows, max_degree)
    return Envelope._profiled(
        graph,
        fanouts,
        rows,
        False,
        seed,
        nodes,
        max_degree,
        quantile=cfg.envelope_quantile,
        margin=cfg.envelope_margin,
    )


def batch_shares(order: torch.Tensor, batch_size: int, rank: int, world: int) -> list[torch.Tensor]:
    """Worker ``rank``'s share of every global batch of ``order`` (cut into ``batch_size``
    chunks, each split into ``world`` near-equal parts; a part may be empty)."""
    return [
        torch.tensor_split(order[start:end], world)[rank]
        for start, end in batch_ranges(order.numel(), batch_size)
    ]


def worker_batches(
    nodes: torch.Tensor, order_seed: int, epoch: int, iterations: int
) -> list[torch.Tensor]:
    """A worker's batches of ``epoch``: its nodes shuffled (:func:`zg.rng.epoch_order`) and cut
    into ``iterations`` near-equal parts, so every worker runs the same number of iterations."""
    return list(torch.tensor_split(epoch_order(nodes, order_seed, epoch), iterations))


class LocalData:
    """An isolated worker's local data (trainers grappa, isolated, psgd_pa, single): its local
    graph, sampled locally; nothing but gradients leaves the worker."""

    features = None
    whole_graph: WholeGraph | None = None

    def __init__(
        self,
        cfg: TrainConfig,
        g: Graph,
        part: Partition,
        rank: int,
        world: int,
        device: torch.device,
        estimator: Estimator,
    ):
        self.cfg, self.g, self.part, self.rank = cfg, g, part, rank
        self.device, self.estimator = device, estimator
        self.iterations = iterations_per_epoch(cfg, g.train_idx.numel())
        self.super_epoch: int | None = None
        self._order_seed = worker_seed(cfg.seed, rank)
        # Whether the estimator's local_weights takes the coverage the worker computes anyway
        # (a subclass may define local_weights(local, hops) alone).
        method = type(estimator).local_weights
        self._weights_take_coverage = "coverage" in inspect.signature(method).parameters

    def start_super_epoch(self, s: int) -> None:
        """Regroup: this worker's local graph of super-epoch ``s``, its weights and envelope."""
        # The run's graph was checked once, at its start; the local graph is cut from it and
        # checked no more (every value below is the kit's own: docs/reliability.md).
        local = self.part._local_graph(self.g, self.rank, s)
        self.graph = local.graph.to(self.device)
        hops = self.cfg.num_layers
        covered = _propagate(local.graph, local.global_in_degree, hops)  # [n_local]
        coverage = covered.to(self.device)
        given = covered if self._weights_take_coverage else None  # computed once, not twice
        self.weights = local_weights(self.estimator, local, hops, coverage=given).to(
            self.device
        )  # [n_local]
        self.train_nodes = self.graph.train_idx.cpu()
        self.seed = worker_seed(self.cfg.seed, self.rank, s)
        # The worker's largest batch: batches() splits its training nodes into I parts.
        self.rows = max(1, math.ceil(self.train_nodes.numel() / self.iterations))
        self.envelope = self.whole_graph = None
        if self.cfg.batching == "full":
            self.whole_graph = WholeGraph(whole_graph_block(self.graph), self.cfg.fanouts)
        elif self.cfg.step_shapes == "envelope":
            self.envelope = worker_envelope(
                self.cfg, self.graph, self.rows, self.seed, self.train_nodes
            )
        self.super_epoch = s
        self.mean_coverage = float(coverage[self.graph.train_idx].mean())

    def batches(self, epoch: int) -> list[torch.Tensor]:
        """This worker's training nodes of ``epoch``, shuffled and cut into I near-equal parts
        (the whole graph as one batch: all of them, in the local graph's order)."""
        if self.whole_graph is not None:
            return [self.train_nodes]
        return worker_batches(self.train_nodes, self._order_seed, epoch, self.iterations)


class GlobalBatchShares:
    """A data-parallel worker's data (trainer data_parallel): the whole graph, and its share of
    every global batch of ``batch_size`` seeds (:func:`batch_shares` of the run's one seed order,
    the same on every worker). Every worker samples with the run's seed, so each seed's
    neighbourhood is the one a single process draws for it; the exchange sums the gradients,
    losses and seed counts, so the update is the single-process update on the global batch."""

    features = whole_graph = None

    def __init__(self, cfg, g, part, rank, world, device, estimator):
        self.cfg, self.g, self.rank, self.world, self.device = cfg, g, rank, world, device
        self.graph = g.to(device)
        self.train_nodes = g.train_idx.cpu()
        self.seed = cfg.seed
        self.iterations = iterations_per_epoch(cfg, self.train_nodes.numel())
        self.rows = math.ceil(cfg.batch_size / world)  # the largest share
        self.weights = torch.ones(g.num_nodes, device=device)  # no coverage weighting
        self.mean_coverage = 1.0
        self.super_epoch: int | None = None
        self.envelope = None

    def start_super_epoch(self, s: int) -> None:
        """The whole graph for the whole run: the envelope is sized once, for a share."""
        if self.super_epoch is None and self.cfg.step_shapes == "envelope":
            self.envelope = worker_envelope(
                self.cfg, self.graph, self.rows, self.seed, self.train_nodes
            )
        self.super_epoch = s

    def batches(self, epoch: int) -> list[torch.Tensor]:
        return batch_shares(
            epoch_order(self.train_nodes, self.seed, epoch),
            self.cfg.batch_size,
            self.rank,
            self.world,
        )
