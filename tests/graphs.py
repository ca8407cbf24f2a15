"""The test suite's shared graphs, defined once (``from graphs import tiny``; tests/ is on the path).

* :func:`tiny`: a small csbm graph with features, labels and splits (300 nodes by default), the
  graph most Grappa and experiment tests train on.
* :func:`mixed_degree_graph`: nodes 0..5 with in-degrees 1, 3, 5, 20, 100,000 (a hub) and 0,
  the degrees that exercise every branch of neighbour sampling (fewer neighbours than the fanout,
  exactly as many, many more, none); their neighbours are nodes 6 and up.
* :func:`random_graph`: uniform random edges, no features (what the sampler tests compare on).
"""

from __future__ import annotations

import torch

import zg

MIXED_DEGREES = [1, 3, 5, 20, 100_000, 0]


def tiny(n: int = 300) -> zg.Graph:
    """csbm: ``n`` nodes, average degree 6, 3 classes, 8 features, seed 0."""
    return zg.datasets.csbm(num_nodes=n, avg_degree=6, num_classes=3, feat_dim=8, seed=0)


def mixed_degree_graph(extra_edges: int = 0):
    """(graph, degrees): nodes 0..5 have in-degrees :data:`MIXED_DEGREES`, from nodes 6, 7, ...

    ``extra_edges``: that many random edges (seed 3) into the neighbour nodes, so a second and
    third hop have something to sample (duplicates removed); nodes 0..5 keep their degrees.
    """
    src, dst, nxt = [], [], 6
    for v, d in enumerate(MIXED_DEGREES):
        src.append(torch.arange(nxt, nxt + d))
        dst.append(torch.full((d,), v))
        nxt += d
    if not extra_edges:
        return zg.Graph.from_edges(torch.cat(src), torch.cat(dst), nxt), list(MIXED_DEGREES)
    gen = torch.Generator().manual_seed(3)
    extra_dst = torch.randint(6, nxt, (extra_edges,), generator=gen)
    extra_src = torch.randint(0, nxt, (extra_edges,), generator=gen)
    g = zg.Graph.from_edges(
        torch.cat(src + [extra_src]), torch.cat(dst + [extra_dst]), nxt, duplicates="remove"
    )
    return g, list(MIXED_DEGREES)


def random_graph(n: int = 600, e: int = 6000, seed: int = 0) -> zg.Graph:
    """``e`` uniform random edges among ``n`` nodes (duplicates removed), seeded."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n, (e,), generator=gen)
    return zg.Graph.from_edges(src, dst, n, duplicates="remove")
