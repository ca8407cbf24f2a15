"""Coverage: how much of a node's L-hop neighbourhood its worker can see.

Where it sits: between the partition and the estimators. A worker trains on its local graph
only, so a seed's computation tree is truncated wherever an edge leaves the partition.
Coverage measures the truncation; the estimators turn it into gradient weights.

Definition (propagation on the local graph; ``d(v)`` is v's in-degree in the *whole* graph,
``N_loc(v)`` its in-neighbours in the local graph, one entry per local edge)::

    c_0(v)     = 1                                           for every local node (base case)
    c_{l+1}(v) = sum_{u in N_loc(v)} c_l(u) / d(v)           if d(v) > 0
    c_{l+1}(v) = 1                                           if d(v) = 0

So ``c_1(v) = local in-degree / global in-degree``. Reading: ``c_L(v)`` is the probability that
an L-step *backward random walk* from v (each step to a uniformly chosen in-edge of the whole
graph; a walk at a node without in-edges stops there and counts as staying) uses only edges
present in the local graph. A node with no in-edges has nothing to miss: coverage 1 at every
hop. Halo nodes have features but no local in-edges, so a walk that reaches one and must step
further leaves the partition (unless the halo node has no in-edges at all). Values lie in
[0, 1]; each hop is one sparse matrix-vector product (``index_add_`` over the local edges).
"""

from __future__ import annotations

import torch

from ..graph import Graph
from ._checks import graph_arg, int_arg
from .partition import LocalGraph, Partition

__all__ = ["coverage", "local_coverage"]


def _propagate(graph: Graph, global_in_degree: torch.Tensor, hops: int) -> torch.Tensor:
    src, dst = graph.edges()  # local edges
    deg = global_in_degree.to(torch.float64)  # [n]
    no_edges = deg == 0
    c = torch.ones(graph.num_nodes, dtype=torch.float64, device=graph.device)  # c_0
    for _ in range(hops):
        total = torch.zeros_like(c).index_add_(0, dst, c[src])  # sum over local in-edges
        c = torch.where(no_edges, 1.0, total / deg.clamp(min=1))
    return c.to(torch.float32)


def local_coverage(local: LocalGraph, hops: int) -> torch.Tensor:
    """float32 [n_local]: ``c_hops`` of every node of a worker's local graph (halo included).

    ``hops = 0`` gives all ones. What a worker computes for itself: it needs its own edges and
    the global in-degree of its nodes (``local.global_in_degree``), nothing else.
    """
    if not isinstance(local, LocalGraph):
        raise TypeError(f"local must be a zg.grappa.LocalGraph, got {type(local).__name__}")
    hops = int_arg(hops, "hops", low=0)
    return _propagate(local.graph, local.global_in_degree, hops)


def coverage(g: Graph, part: Partition, hops: int = 2, super_epoch: int = 0) -> torch.Tensor:
    """float32 [N]: each node's ``c_hops`` in the local graph of the worker owning it: the worker
    whose seeds it is among (:meth:`Partition.owner`). Under ``partner_sweep`` two workers store
    every node (its own chunk's and the one whose partner it is); its coverage is the one in its
    own chunk's worker, whatever order the workers are visited in.

    Args:
        g: the graph ``part`` was made for. part: a :class:`Partition`.
        hops: L >= 0 (use the model's number of layers). super_epoch: which grouping.
    """
    g = graph_arg(g)
    if not isinstance(part, Partition):
        raise TypeError(f"part must be a zg.grappa.Partition, got {type(part).__name__}")
    hops = int_arg(hops, "hops", low=0)
    out = torch.empty(g.num_nodes, dtype=torch.float32, device=g.device)
    owner = part.owner(super_epoch).to(g.device)
    for worker in range(part.num_parts):
        local = part.local_graph(g, worker, super_epoch)
        c = local_coverage(local, hops)[: local.num_owned]
        ids = local.global_ids[: local.num_owned]
        mine = owner[ids] == worker  # a partner chunk's nodes are its own worker's to report
        out[ids[mine]] = c[mine]
    return out
