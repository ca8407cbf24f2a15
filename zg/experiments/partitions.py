"""zg.experiments.partitions: what a partition hides from isolated training (notebooks 05, 08).

Where it sits: before Grappa's workers start, where the graph is split
(:func:`zg.grappa.partition`). :func:`partition_quality` measures one partition (cut edges,
balance, per-node coverage), :func:`sweep_partitions` does so for every method and worker
count; across super-epochs, :func:`chunk_pairs_met` and :func:`edges_exposed` measure what
repartitioning lets the workers see. Figures: :func:`zg.viz.coverage_distributions`,
:func:`zg.viz.partition_sweep`, :func:`zg.viz.partition_view`, :func:`zg.viz.curves`.

    q = ex.partition_quality(g, 4, "metis", hops=2)           # row + "coverage" + "partition"
    rows = ex.sweep_partitions(g, [2, 4, 8], ("random", "metis"))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .._checks import seed_arg
from ._progress import progress_bar

__all__ = ["partition_quality", "sweep_partitions", "chunk_pairs_met", "edges_exposed"]


def _partitions(part: Any) -> list[Any]:
    from ..grappa.partition import Partition

    parts = (
        [part]
        if isinstance(part, Partition)
        else list(part)
        if isinstance(part, (list, tuple))
        else []
    )
    if not parts or not all(isinstance(p, Partition) for p in parts):
        raise TypeError("parts must be a zg.grappa.Partition or a non-empty list of them")
    return parts


def partition_quality(
    g: Any,
    num_parts: int,
    method: str = "random",
    *,
    hops: int = 2,
    seed: int = 0,
    num_chunks: int | None = None,
    super_epoch: int = 0,
) -> dict[str, Any]:
    """How good one partition is for isolated training: cut edges, balance and coverage.

    Partitions ``g`` with :func:`zg.grappa.partition` (``num_chunks`` default 2P, as the
    trainers use) and measures the grouping of ``super_epoch``:

    * ``cut_edges``: edges whose source and destination sit on different workers (a worker
      training alone never sees them); ``edge_cut_fraction`` = cut_edges / E;
    * ``balance``: the largest worker's nodes over N / P (1.0 = perfect);
    * ``train_nodes_min``: the fewest training nodes any worker owns;
    * ``coverage_1 .. coverage_<hops>``: mean h-hop coverage over all nodes
      (:func:`zg.grappa.coverage`; 1 = nothing lost).

    Returns that row plus ``"coverage"``: {h: float32 [N] per-node h-hop coverage} and
    ``"partition"``: the :class:`zg.grappa.Partition` (reuse it for traffic counts).
    """
    from ..grappa._checks import graph_arg, int_arg
    from ..grappa.coverage import local_coverage
    from ..grappa.partition import partition

    g = graph_arg(g, train=True)
    hops = int_arg(hops, "hops", low=1)
    seed = seed_arg(seed)
    part = partition(g, num_parts, method, seed, num_chunks=num_chunks)
    s = int_arg(super_epoch, "super_epoch", low=0)
    stats = part.stats(g, s)
    cov = {h: torch.empty(g.num_nodes, dtype=torch.float32) for h in range(1, hops + 1)}
    for worker in range(part.num_parts):
        local = part.local_graph(g, worker, s)
        owned = local.global_ids[: local.num_owned].cpu()
        for h in cov:
            cov[h][owned] = local_coverage(local, h)[: local.num_owned].cpu()
    row: dict[str, Any] = {
        "method": part.method,
        "num_parts": part.num_parts,
        "num_chunks": part.num_chunks,
        "cut_edges": stats["cut_edges"],
        "edge_cut_fraction": stats["edge_cut_fraction"],
        "balance": stats["balance"],
        "train_nodes_min": min(p["train_nodes"] for p in stats["parts"]),
    }
    for h, c in cov.items():
        row[f"coverage_{h}"] = float(c.double().mean())
    return {**row, "coverage": cov, "partition": part}


def sweep_partitions(
    g: Any,
    num_parts: Sequence[int],
    methods: Sequence[str] = ("random", "metis"),
    *,
    hops: int = 2,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """:func:`partition_quality` rows (numbers only) for every method and every P in
    ``num_parts``, methods outermost."""
    if (
        isinstance(num_parts, (int, str))
        or not hasattr(num_parts, "__iter__")
        or not list(num_parts)
    ):
        raise TypeError(f"num_parts must be a non-empty list of worker counts, got {num_parts!r}")
    if isinstance(methods, str) or not list(methods):
        raise TypeError(f"methods must be a non-empty list of method names, got {methods!r}")
    seed = seed_arg(seed)
    rows = []
    num_parts, methods = list(num_parts), list(methods)
    with progress_bar(len(methods) * len(num_parts), desc="partitions", unit="partition") as bar:
        for method in methods:
            for P in num_parts:
                q = partition_quality(g, P, method, hops=hops, seed=seed)
                rows.append({k: v for k, v in q.items() if k not in ("coverage", "partition")})
                bar.update(1)
    return rows


def chunk_pairs_met(part: Any, super_epochs: int) -> list[float]:
    """Fraction of distinct chunk pairs that have shared a worker after 1 .. ``super_epochs``
    super-epochs (entry s - 1: super-epochs 0 .. s - 1), from :meth:`Partition.pair_coverage`.
    A partition with one chunk has no pairs: every entry is 1.0."""
    from ..grappa._checks import int_arg

    part = _partitions(part)[0]
    super_epochs = int_arg(super_epochs, "super_epochs", low=1)
    C = part.num_chunks
    pairs = C * (C - 1) // 2
    out = []
    for s in range(1, super_epochs + 1):
        met = part.pair_coverage(s)
        out.append(1.0 if pairs == 0 else float((int(met.sum()) - C) // 2) / pairs)
    return out


def edges_exposed(g: Any, part: Any, super_epochs: int) -> list[float]:
    """Fraction of the graph's edges that were *local* (both ends on one worker) in at least one
    of super-epochs 0 .. s - 1, for s = 1 .. ``super_epochs``: the edges isolated training has
    had a chance to learn from. Entry 0 is 1 - the edge-cut fraction of super-epoch 0."""
    from ..grappa._checks import int_arg

    part = _partitions(part)[0]
    part._check_graph(g)
    super_epochs = int_arg(super_epochs, "super_epochs", low=1)
    src, dst = g.edges()
    seen = torch.zeros(g.num_edges, dtype=torch.bool)
    out = []
    for s in range(super_epochs):
        owner = part.owner(s)
        seen |= owner[src.cpu()] == owner[dst.cpu()]
        out.append(float(seen.sum()) / max(1, g.num_edges))
    return out
