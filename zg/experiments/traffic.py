"""zg.experiments.traffic: the bytes each design sends, counted, checked and projected
(notebooks 05, 06, 08).

Where it sits: on the wire between workers. One rule per design, used by every notebook:
:func:`feature_fetch_traffic` counts what the feature-fetching baseline's workers send (its
exact sampling, without starting processes), :func:`gradient_traffic` what a Grappa worker
sends (the gradient all-reduce plus scalars; it does not depend on the graph).
:func:`traffic_rows` and :func:`scaling_rows` set the two side by side per partition, batch
size and graph size; :func:`bytes_sent` reads what a real run's workers sent and
:func:`expected_bytes` derives what they must have sent from the configuration alone;
:func:`repartition_bytes` counts what repartitioning would move; :func:`fetch_traffic_model`
and :func:`project_epochs` are *models* (a random partition; a link model), named as such.
Figures: :func:`zg.viz.traffic_vs_batch`, :func:`zg.viz.bytes_by_kind`,
:func:`zg.viz.rmat_scaling`, :func:`zg.viz.epoch_projection`.

    rows = ex.traffic_rows(g, [part], fanouts=[10, 5], batch_sizes=[256, 1024])
    assert ex.bytes_sent(history) == ex.expected_bytes(g, history)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .._checks import seed_arg
from ._progress import progress
from .partitions import _partitions

__all__ = [
    "traffic_rows",
    "bytes_sent",
    "expected_bytes",
    "repartition_bytes",
    "feature_fetch_traffic",
    "gradient_traffic",
    "scaling_rows",
    "fetch_traffic_model",
    "project_epochs",
]


def traffic_rows(
    g: Any,
    parts: Any,
    *,
    fanouts: Sequence[int],
    batch_sizes: Sequence[int],
    hidden_dim: int = 64,
    estimator: str = "batch",
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Bytes one worker sends per epoch under each design, for the same partitions.

    For every partition in ``parts`` and every global batch size: the feature-fetching
    design's bytes (:func:`feature_fetch_traffic`: the exact sampling of
    ``grappa.train(trainer="feature_fetch")``, epoch 0, mean over workers) against Grappa's
    (:func:`gradient_traffic` of a SAGE model with ``len(fanouts)`` layers and ``hidden_dim``
    units: gradient all-reduce + scalars, times the iterations of an epoch). Grappa's count
    depends on the model and the number of iterations only, never on the partition.

    Row keys: ``method``, ``num_parts``, ``batch_size``, ``iterations_per_epoch``,
    ``feature_bytes`` and ``gradient_bytes`` (per worker per epoch), ``ratio`` (feature /
    gradient), ``remote_rows_per_iteration`` (feature rows a worker's batch must fetch),
    ``break_even_rows`` (rows per iteration whose bytes equal one iteration's gradient
    exchange: above it, fetching features costs more than exchanging gradients).
    """
    from .. import models as zg_models
    from ..grappa._checks import graph_arg, int_arg

    g = graph_arg(g, train=True)
    parts = _partitions(parts)
    if isinstance(batch_sizes, int) or not list(batch_sizes):
        raise TypeError(f"batch_sizes must be a non-empty list of ints, got {batch_sizes!r}")
    batch_sizes = [int_arg(b, "batch_sizes[i]", low=1) for b in batch_sizes]
    hidden_dim = int_arg(hidden_dim, "hidden_dim", low=1)
    seed = seed_arg(seed)
    torch.manual_seed(seed)
    model = zg_models.build("sage", g.feat_dim, hidden_dim, g.num_classes, len(fanouts))
    rows = []
    pairs = [(part, b) for part in parts for b in batch_sizes]
    for part, batch_size in progress(pairs, desc="counting fetched rows", unit="setting"):
        grad = gradient_traffic(model, part.num_parts, estimator=estimator)
        row_bytes = g.feat_dim * g.x.element_size()
        fetch = feature_fetch_traffic(g, part, fanouts, batch_size, seed=seed)
        I = fetch["iterations_per_epoch"]
        feature = sum(fetch["bytes_per_epoch"]) / part.num_parts
        gradient = grad["bytes"] * I
        rows.append(
            {
                "method": part.method,
                "num_parts": part.num_parts,
                "batch_size": batch_size,
                "iterations_per_epoch": I,
                "feature_bytes": feature,
                "gradient_bytes": gradient,
                "ratio": feature / gradient if gradient else float("inf"),
                "remote_rows_per_iteration": fetch["remote_rows_per_iteration"],
                "break_even_rows": grad["bytes"] / row_bytes,
            }
        )
    return rows


def bytes_sent(history: dict[str, Any]) -> dict[str, list[int]]:
    """``{kind: [bytes each worker sent over the whole run]}`` from a training history."""
    from ..grappa.history import bytes_by_kind_per_worker

    if not isinstance(history, dict) or "epochs" not in history:
        raise TypeError("history must be a zg.grappa.train history (a dict with 'epochs')")
    return bytes_by_kind_per_worker(history)


def expected_bytes(
    g: Any, history: dict[str, Any], *, partition: Any = None
) -> dict[str, list[int]]:
    """What every worker of a run *must* have sent, by kind, from its configuration alone.

    Same shape as :func:`bytes_sent`, so a notebook can assert they are equal:

    * ``gradients``: every iteration, the all-reduce of every trainable parameter (grappa,
      isolated, feature_fetch; single sends nothing);
    * ``scalars``: every iteration, 3 float64 per worker, unless the estimator is "mean" or "reference";
    * ``parameters`` (psgd_pa): an all-reduce of all parameters every ``average_every``
      iterations, counted over the run's global step;
    * ``features`` (feature_fetch): :func:`feature_fetch_traffic` over the run's epochs, with
      the run's partition (rebuilt from the config, or ``partition``).

    Exact for P in {1, 2, 4} (see :func:`gradient_traffic`).
    """
    from .. import models as zg_models
    from ..grappa._checks import graph_arg
    from ..grappa.comm import KINDS, wire_bytes
    from ..grappa.train import TrainConfig, iterations_per_epoch, make_partition

    g = graph_arg(g, train=True)
    if not isinstance(history, dict) or "config" not in history or "epochs" not in history:
        raise TypeError("history must be a zg.grappa.train history (with 'config' and 'epochs')")
    cfg = TrainConfig(**TrainConfig.saved_form(history["config"])).validated()
    P, E = cfg.workers, len(history["epochs"])
    I = iterations_per_epoch(cfg, g.train_idx.numel())
    torch.manual_seed(cfg.seed)
    model = zg_models.build(
        cfg.model, g.feat_dim, cfg.hidden_dim, g.num_classes, cfg.num_layers, dropout=cfg.dropout
    )
    out = {k: [0] * P for k in KINDS}
    trainer = cfg.trainer_object
    if trainer.averages_models:
        every = cfg.average_every or I
        payload = sum(p.numel() * p.element_size() for p in model.parameters())
        out["parameters"] = [(E * I // every) * wire_bytes("all_reduce", payload, P)] * P
    else:
        per_iteration = gradient_traffic(model, P, estimator=cfg.estimator)
        out["gradients"] = [E * I * per_iteration["gradient_bytes"]] * P
        out["scalars"] = [E * I * per_iteration["scalar_bytes"]] * P
    if trainer.fetches_features:
        part = make_partition(g, cfg) if partition is None else _partitions(partition)[0]
        fetch = feature_fetch_traffic(g, part, cfg.fanouts, cfg.batch_size, epochs=E, seed=cfg.seed)
        out["features"] = [int(round(b * E)) for b in fetch["bytes_per_epoch"]]
    return out


def repartition_bytes(
    g: Any, part: Any, super_epochs: int, *, feature_bytes: int = 4, index_bytes: int = 8
) -> list[int]:
    """Bytes a repartitioning *would* move between machines, per transition into super-epoch
    s = 1 .. ``super_epochs`` - 1 (entry s - 1), summed over workers: every node whose owner
    changes moves its feature row, its label and its in-edge list (one source id per edge).

    Counted from the partition, not sent: the kit's worker processes each hold the whole
    graph, so repartitioning costs them no traffic; a multi-machine deployment pays this.
    """
    from ..grappa._checks import int_arg

    part = _partitions(part)[0]
    part._check_graph(g)
    super_epochs = int_arg(super_epochs, "super_epochs", low=1)
    feature_bytes = int_arg(feature_bytes, "feature_bytes", low=0)
    index_bytes = int_arg(index_bytes, "index_bytes", low=0)
    row = (g.feat_dim if g.x is not None else 0) * feature_bytes + index_bytes  # features + label
    deg = g.in_degrees().cpu()
    out, before = [], part.owner(0)
    for s in range(1, super_epochs):
        now = part.owner(s)
        moved = now != before
        out.append(int(moved.sum()) * row + int(deg[moved].sum()) * index_bytes)
        before = now
    return out


def feature_fetch_traffic(
    g: Any, part: Any, fanouts: Sequence[int], batch_size: int, *, epochs: int = 1, seed: int = 0
) -> dict[str, Any]:
    """What the ``feature_fetch`` trainer's workers send, counted without starting processes.

    Builds each worker's :class:`zg.grappa.remote.FeatureFetchData` (the same seeds,
    shuffles and sampler as ``grappa.train(trainer="feature_fetch", ...)`` with this partition,
    fanouts, batch size and seed), samples every iteration and applies the bytes rule of
    :func:`zg.grappa.remote.fetch_features`: per iteration a worker sends its request
    counts, the ids of the rows it asks others for (8 bytes each) and the feature rows others
    ask of it. So the totals equal the ``features`` bytes of a real run's history.

    Returns:
        {"bytes_per_epoch": [per worker, mean over epochs], "bytes_per_iteration": mean over
        workers and iterations, "input_rows_per_iteration": mean unique input nodes a worker's
        batch needs, "remote_rows_per_iteration": mean of those owned by another worker,
        "iterations_per_epoch", "workers"}.
    """
    from ..grappa._checks import graph_arg, int_arg
    from ..grappa.comm import CommLedger, wire_bytes
    from ..grappa.remote import FeatureFetchData
    from ..grappa.train import TrainConfig

    graph_arg(g, train=True)
    part = _partitions(part)[0]
    part._check_graph(g)
    epochs = int_arg(epochs, "epochs", low=1)
    seed = seed_arg(seed)
    P = part.num_parts
    cfg = TrainConfig(
        trainer="feature_fetch",
        workers=P,
        fanouts=list(fanouts),
        num_layers=len(fanouts),
        batch_size=batch_size,
        seed=seed,
    ).validated()
    device = torch.device("cpu")
    local = [FeatureFetchData(cfg, g, part, r, P, device, CommLedger(P)) for r in range(P)]
    owner = local[0].table.owner
    row_bytes = g.feat_dim * g.x.element_size()
    sent = torch.zeros(P, dtype=torch.float64)
    rows = remote = 0.0
    iterations = local[0].iterations
    for epoch in range(epochs):
        batches = [data.batches(epoch) for data in local]
        for it in range(iterations):
            asks = torch.zeros(P, P, dtype=torch.int64)  # asks[a, b]: rows a wants from b
            for r, data in enumerate(local):
                nodes = data.sampler.sample(batches[r][it], epoch, it).input_nodes
                asks[r] = torch.bincount(owner[nodes], minlength=P)
                rows += nodes.numel()
                remote += float(asks[r].sum() - asks[r, r])
            for r in range(P):
                sent[r] += (
                    wire_bytes("all_to_all", (P - 1) * 8, P)
                    + wire_bytes("all_to_all", int(asks[r].sum() - asks[r, r]) * 8, P)
                    + wire_bytes("all_to_all", int(asks[:, r].sum() - asks[r, r]) * row_bytes, P)
                )
    steps = epochs * iterations * P
    return {
        "bytes_per_epoch": (sent / epochs).tolist(),
        "bytes_per_iteration": float(sent.sum()) / steps,
        "input_rows_per_iteration": rows / steps,
        "remote_rows_per_iteration": remote / steps,
        "iterations_per_epoch": iterations,
        "workers": P,
    }


def gradient_traffic(
    model: torch.nn.Module, workers: int, *, estimator: str = "batch"
) -> dict[str, int]:
    """Bytes and rounds one Grappa worker sends per iteration: the gradient all-reduce of every
    trainable parameter (float32 here) plus, for every estimator but "mean" and "reference", the
    all_gather of three float64 scalars. Does not depend on the graph at all.

    Exact for the ledger of a real run when ``2 (P - 1) / P`` times each DDP bucket's bytes is
    a whole number (always for P in {1, 2, 4} with float32 gradients).
    Returns {"gradient_bytes", "scalar_bytes", "bytes", "rounds", "parameters"}.
    """
    from ..grappa._checks import choice_arg, int_arg
    from ..grappa.comm import rounds, wire_bytes
    from ..grappa.estimators import ESTIMATORS, Estimator

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    P = int_arg(workers, "workers", low=1)
    choice_arg(estimator, "estimator", ESTIMATORS)
    params = [p for p in model.parameters() if p.requires_grad]
    payload = sum(p.numel() * p.element_size() for p in params)
    grad = wire_bytes("all_reduce", payload, P)
    gathers = Estimator(estimator).needs_stats
    scalars = wire_bytes("all_gather", 3 * 8, P) if gathers else 0
    r = rounds("all_reduce", P) + (rounds("all_gather", P) if gathers else 0)
    return {
        "gradient_bytes": grad,
        "scalar_bytes": scalars,
        "bytes": grad + scalars,
        "rounds": r,
        "parameters": sum(p.numel() for p in params),
    }


def scaling_rows(
    graphs: Sequence[Any],
    *,
    workers: int,
    fanouts: Sequence[int],
    batch_size: int,
    hidden_dim: int = 64,
    method: str = "random",
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per graph: how partitioning and both designs' traffic change with graph size.

    For each graph (e.g. R-MAT graphs of growing scale) with a ``workers``-way partition
    (``method``, 2P chunks, super-epoch 0): nodes, edges, ``edge_cut_fraction``,
    ``mean_coverage`` (L-hop coverage of the training nodes, L = len(fanouts)), and per worker
    and iteration the bytes the feature-fetching design sends (:func:`feature_fetch_traffic`,
    one epoch) against Grappa's (:func:`gradient_traffic` of a SAGE model of this width),
    plus the same per epoch (global ``batch_size`` seeds per iteration, as in grappa.train).
    """
    from .. import models as zg_models
    from ..grappa._checks import int_arg
    from ..grappa.coverage import coverage
    from ..grappa.partition import partition

    if isinstance(graphs, (str, bytes)) or not hasattr(graphs, "__iter__"):
        raise TypeError("graphs must be a list of zg.Graph")
    graphs = list(graphs)
    if not graphs:
        raise ValueError("graphs is empty; give at least one graph")
    P = int_arg(workers, "workers", low=1)
    seed = seed_arg(seed)
    rows = []
    for g in graphs:
        part = partition(g, P, method, seed)
        stats = part.stats(g)
        cov = coverage(g, part, hops=len(fanouts))[g.train_idx]
        fetch = feature_fetch_traffic(g, part, fanouts, batch_size, seed=seed)
        model = zg_models.SAGE(g.feat_dim, hidden_dim, g.num_classes, num_layers=len(fanouts))
        grad = gradient_traffic(model, P)
        I = fetch["iterations_per_epoch"]
        rows.append(
            {
                "graph": g.name,
                "nodes": g.num_nodes,
                "edges": g.num_edges,
                "train_nodes": int(g.train_idx.numel()),
                "iterations_per_epoch": I,
                "edge_cut_fraction": stats["edge_cut_fraction"],
                "mean_coverage": float(cov.mean()),
                "input_rows_per_iteration": fetch["input_rows_per_iteration"],
                "remote_rows_per_iteration": fetch["remote_rows_per_iteration"],
                "feature_bytes_per_iteration": fetch["bytes_per_iteration"],
                "gradient_bytes_per_iteration": grad["gradient_bytes"],
                "scalar_bytes_per_iteration": grad["scalar_bytes"],
                "fetch_bytes_per_epoch": (fetch["bytes_per_iteration"] + grad["gradient_bytes"])
                * I,
                "grappa_bytes_per_epoch": grad["bytes"] * I,
            }
        )
    return rows


def fetch_traffic_model(
    input_rows: float, seeds: float, workers: int, feat_dim: int, *, feature_bytes: int = 4
) -> dict[str, float]:
    """A *model* of the feature traffic one feature-fetching worker sends per iteration when
    its batch needs ``input_rows`` unique input nodes, ``seeds`` of them its own seeds, on a
    random ``workers``-way partition: every other input node is remote with probability
    (P - 1) / P; requests and replies are symmetric across workers (each sends as many rows as
    it asks for), as in :func:`zg.grappa.remote.fetch_features`' byte rule:
    8 (P - 1) count bytes + 8 bytes per requested row + ``feat_dim * feature_bytes`` per row.
    Returns {"remote_rows", "bytes", "rounds"} (rounds: the three all_to_all calls).
    """
    from ..grappa._checks import int_arg, real_arg
    from ..grappa.comm import rounds

    input_rows = real_arg(input_rows, "input_rows", low=0.0)
    seeds = real_arg(seeds, "seeds", low=0.0, high=input_rows)
    P = int_arg(workers, "workers", low=1)
    feat_dim = int_arg(feat_dim, "feat_dim", low=1)
    feature_bytes = int_arg(feature_bytes, "feature_bytes", low=1)
    if P == 1:
        return {"remote_rows": 0.0, "bytes": 0.0, "rounds": 0}
    remote = (input_rows - seeds) * (P - 1) / P
    return {
        "remote_rows": remote,
        "bytes": 8.0 * (P - 1) + remote * (8 + feat_dim * feature_bytes),
        "rounds": 3 * rounds("all_to_all", P),
    }


def project_epochs(
    per_iteration: dict[str, dict[str, float]], iterations: int, links: Sequence[Any] | None = None
) -> list[dict[str, Any]]:
    """A *projection* (link model, :func:`zg.grappa.comm.project_seconds`), not a measurement:
    the epoch time of each design when one worker runs ``iterations`` iterations.

    Args:
        per_iteration: ``{design: {"seconds": measured seconds per iteration on this machine,
            "bytes": bytes one worker sends per iteration, "rounds": message rounds per
            iteration}}``.
        iterations: iterations per epoch of the projected graph.
        links: :class:`zg.grappa.comm.Link` objects (default: every entry of ``LINKS``).
    Returns:
        One row per (design, link): ``design``, ``link``, ``iterations``, ``compute_seconds``
        (measured per iteration x iterations), ``link_seconds``, ``projected_seconds``
        (their sum), ``bytes_per_worker``.
    """
    from ..grappa._checks import int_arg
    from ..grappa.comm import LINKS, Link, project_seconds

    if not isinstance(per_iteration, dict) or not per_iteration:
        raise ValueError(
            "per_iteration must be a non-empty dict {design: {seconds, bytes, rounds}}"
        )
    iterations = int_arg(iterations, "iterations", low=1)
    links = list(LINKS.values()) if links is None else list(links)
    if not links or not all(isinstance(link, Link) for link in links):
        raise TypeError("links must be a non-empty list of zg.grappa.comm.Link")
    rows = []
    for design, m in per_iteration.items():
        missing = [k for k in ("seconds", "bytes", "rounds") if k not in m]
        if missing:
            raise ValueError(f"per_iteration[{design!r}] lacks {missing}")
        for link in links:
            p = project_seconds(
                m["seconds"] * iterations,
                [m["bytes"] * iterations],
                [m["rounds"] * iterations],
                link,
            )
            rows.append(
                {
                    "design": design,
                    "link": link.name,
                    "iterations": iterations,
                    "compute_seconds": p["measured_seconds"],
                    "link_seconds": p["link_seconds"],
                    "projected_seconds": p["projected_seconds"],
                    "bytes_per_worker": m["bytes"] * iterations,
                }
            )
    return rows
