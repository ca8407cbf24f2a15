"""The feature-fetching distributed baseline's local data: what Grappa argues against.

Where it sits: beside :mod:`zg.grappa.local` (a Grappa worker's isolated local graph);
``zg.grappa.train(g, trainer="feature_fetch", ...)`` runs the shared worker loop
(:func:`zg.grappa.worker.run_worker`, the same :class:`zg.Engine` step) with this module's
:class:`FeatureFetchData` in place of Grappa's isolated local graph. Each worker

* owns the features of one partition (super-epoch 0 of the Grappa partition; never
  repartitioned) and the training nodes in it;
* samples its seeds' neighbourhoods on the *whole* graph's structure, with the same sampler and
  fanouts as the single-process reference (the structure is replicated on every worker here;
  systems of this design usually also sample remotely, which would only add traffic);
* before every forward, fetches the features of the sampled input nodes it does not own from
  their owners, over ``torch.distributed``;
* averages gradients with the same exchange as Grappa's ``mean`` estimator.

The fetch, :func:`fetch_features`, is three ``all_to_all_single`` calls:

    1. counts   int64 [P]            how many rows I request from each worker  -> what each asks me
    2. requests int64 [sum counts]   row positions in each owner's feature table
    3. replies  float32 [*, F]       the owners send the rows back

``all_to_all_single`` with uneven splits is supported by gloo (torch 2.2 and later) and nccl;
the list form ``all_to_all`` is not in gloo on torch 2.2, which is why the single-tensor form is
used. Rows a worker owns itself go through the same call as a local copy and are not counted as
sent bytes; every byte addressed to another worker is (kind ``features``).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist

from ..graph import Graph
from ..rng import worker_seed
from ..sampling import DynamicSampler
from .comm import CommLedger
from .local import worker_batches
from .partition import Partition
from .plan import iterations_per_epoch

__all__ = ["FeatureFetchData", "fetch_features", "FeatureTable"]


class FeatureTable:
    """The feature rows one worker owns and the map every worker shares to find any row.

    Attributes:
        owner: int64 [N] the worker owning each node.
        position: int64 [N] the node's row in its owner's table.
        rows: float32 [n_own, F] this worker's rows (the only features it holds).
    """

    def __init__(self, x: torch.Tensor, owner: torch.Tensor, rank: int):
        self.owner = owner
        self.rank = rank
        self.position = torch.empty_like(owner)
        for p in range(int(owner.max()) + 1):
            mine = torch.nonzero(owner == p).flatten()
            self.position[mine] = torch.arange(mine.numel(), device=owner.device)
        own = torch.nonzero(owner == rank).flatten()
        self.rows = x[own].clone()  # copy: drop the rest


def fetch_features(
    table: FeatureTable, nodes: torch.Tensor, world: int, ledger: CommLedger
) -> torch.Tensor:
    """float32 [len(nodes), F]: the features of ``nodes`` (global ids), fetched from their owners.

    Every worker must call it the same number of times (it is a collective).
    """
    owner = table.owner[nodes]  # [M]
    order = torch.argsort(owner, stable=True)  # group requests by owner
    send_counts = torch.bincount(owner, minlength=world)  # [P]
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)  # 1. counts
    send_split: list[int] = send_counts.tolist()
    recv_split: list[int] = recv_counts.tolist()
    requests = table.position[nodes[order]]  # [M]
    incoming = torch.empty(sum(recv_split), dtype=torch.int64, device=nodes.device)
    dist.all_to_all_single(incoming, requests, recv_split, send_split)  # 2. requests
    replies = table.rows[incoming]  # [sum recv, F]
    got = torch.empty(
        nodes.numel(), table.rows.shape[1], dtype=table.rows.dtype, device=nodes.device
    )
    dist.all_to_all_single(got, replies, send_split, recv_split)  # 3. replies
    me = table.rank
    row_bytes = table.rows.shape[1] * table.rows.element_size()
    ledger.record("features", "all_to_all", (world - 1) * send_counts.element_size())
    ledger.record("features", "all_to_all", (sum(send_split) - send_split[me]) * 8)
    ledger.record("features", "all_to_all", (sum(recv_split) - recv_split[me]) * row_bytes)
    x = torch.empty_like(got)
    x[order] = got  # back to the order of nodes
    return x


class FeatureFetchData:
    """A feature-fetching worker's local data: seeds from this worker's partition,
    neighbourhoods sampled on the whole structure, features fetched every iteration. The same
    attributes as :class:`zg.grappa.local.LocalData`; ``features`` is the fetch."""

    envelope = None  # host-mediated sampling on the whole structure
    whole_graph = None  # sampled mini-batches (batching "minibatch")

    def __init__(
        self,
        cfg,
        g: Graph,
        part: Partition,
        rank: int,
        world: int,
        device: torch.device,
        ledger: CommLedger,
    ):
        self.cfg, self.rank, self.world, self.ledger = cfg, rank, world, ledger
        self.device = device
        owner = part.owner(0).to(device)
        self.table = FeatureTable(g.x.to(device), owner, rank)
        # The structure and labels only: this worker holds no feature row but its own.
        self.graph = Graph(
            g.indptr, g.indices, y=g.y, num_classes=g.num_classes, name=f"{g.name}[structure]"
        ).to(device)
        train = g.train_idx.to(device)
        self.train_nodes = train[owner[train] == rank].cpu()  # global ids
        self.iterations = iterations_per_epoch(cfg, g.train_idx.numel())
        self.rows = max(1, -(-self.train_nodes.numel() // self.iterations))
        self.weights = torch.ones(g.num_nodes, device=device)
        self.seed = worker_seed(cfg.seed, rank, 0)
        # The sampler the worker's Engine (mode="dynamic", this seed) builds; kept here so
        # analyses can replay a worker's requests without a process group.
        self.sampler = DynamicSampler(self.graph, cfg.fanouts, seed=self.seed)
        self._order_seed = worker_seed(cfg.seed, rank)
        self.super_epoch = None
        self.mean_coverage = 1.0  # it sees every edge

    def start_super_epoch(self, s: int) -> None:
        self.super_epoch = s  # never repartitions

    def batches(self, epoch: int):
        return worker_batches(self.train_nodes, self._order_seed, epoch, self.iterations)

    def features(self, input_nodes: torch.Tensor) -> torch.Tensor:
        """float32 [S0, F]: the sampled input nodes' features, fetched from their owners."""
        return fetch_features(self.table, input_nodes, self.world, self.ledger)


def __getattr__(name: str) -> Any:
    """``FeatureFetchSource``, this class's name up to release 0.4: read with a warning."""
    if name == "FeatureFetchSource":
        warnings.warn(
            "zg.grappa.remote.FeatureFetchSource is now zg.grappa.remote.FeatureFetchData "
            "(a worker's local data); the old name goes in zg 0.6",
            DeprecationWarning,
            stacklevel=2,
        )
        return FeatureFetchData
    raise AttributeError(f"module 'zg.grappa.remote' has no attribute {name!r}")
