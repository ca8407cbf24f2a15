"""zg.grappa.lab: the Grappa experiments the notebooks run, as functions returning plain
measurements (the Grappa half's counterpart of :mod:`zg.lab`).

Where it sits: between :mod:`zg.grappa` and notebooks 05-09. A notebook cell that would be
longer than a screen is a function here; the notebook calls it, hands the result to a figure
builder in :mod:`zg.viz` and asserts its claim. Nothing here plots, so every function is
tested with the core alone. Every number returned was measured when the function ran.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import torch

__all__: List[str] = []

# ----------------------------------------------------------------------------- notebooks 05-06
# (partitions and isolation; gradient-only training)

# Notebook 05 measures partitions (cut edges, coverage) and what each design would send for the
# same partition; notebook 06 runs the trainers for real and checks every byte they sent against
# what their configuration implies. The traffic counts reuse feature_fetch_traffic and
# gradient_traffic (below, in the 07-08 section): one rule per design, used by every notebook.

__all__ += ["partition_quality", "partition_sweep", "traffic_rows", "run_trainers",
            "trainer_rows", "average_rows", "bytes_sent", "expected_bytes"]


def partition_quality(g: Any, num_parts: int, method: str = "random", *, hops: int = 2,
                      seed: int = 0, num_chunks: Optional[int] = None,
                      super_epoch: int = 0) -> Dict[str, Any]:
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
    from ._checks import graph_arg, int_arg
    from .coverage import local_coverage
    from .partition import partition

    g = graph_arg(g, train=True)
    hops = int_arg(hops, "hops", low=1)
    part = partition(g, num_parts, method, seed, num_chunks=num_chunks)
    s = int_arg(super_epoch, "super_epoch", low=0)
    stats = part.stats(g, s)
    cov = {h: torch.empty(g.num_nodes, dtype=torch.float32) for h in range(1, hops + 1)}
    for worker in range(part.num_parts):
        local = part.local_graph(g, worker, s)
        owned = local.global_ids[: local.num_owned].cpu()
        for h in cov:
            cov[h][owned] = local_coverage(local, h)[: local.num_owned].cpu()
    row: Dict[str, Any] = {
        "method": part.method, "num_parts": part.num_parts, "num_chunks": part.num_chunks,
        "cut_edges": stats["cut_edges"], "edge_cut_fraction": stats["edge_cut_fraction"],
        "balance": stats["balance"], "train_nodes_min": min(p["train_nodes"] for p in stats["parts"])}
    for h, c in cov.items():
        row[f"coverage_{h}"] = float(c.double().mean())
    return {**row, "coverage": cov, "partition": part}


def partition_sweep(g: Any, num_parts: Sequence[int], methods: Sequence[str] = ("random", "metis"),
                    *, hops: int = 2, seed: int = 0) -> List[Dict[str, Any]]:
    """:func:`partition_quality` rows (numbers only) for every method and every P in
    ``num_parts``, methods outermost."""
    if isinstance(num_parts, (int, str)) or not hasattr(num_parts, "__iter__") or not list(num_parts):
        raise TypeError(f"num_parts must be a non-empty list of worker counts, got {num_parts!r}")
    if isinstance(methods, str) or not list(methods):
        raise TypeError(f"methods must be a non-empty list of method names, got {methods!r}")
    rows = []
    for method in methods:
        for P in num_parts:
            q = partition_quality(g, P, method, hops=hops, seed=seed)
            rows.append({k: v for k, v in q.items() if k not in ("coverage", "partition")})
    return rows


def traffic_rows(g: Any, parts: Any, *, fanouts: Sequence[int], batch_sizes: Sequence[int],
                 hidden_dim: int = 64, estimator: str = "batch", seed: int = 0) -> List[Dict[str, Any]]:
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
    from ._checks import graph_arg, int_arg

    g = graph_arg(g, train=True)
    parts = _partitions(parts)
    if isinstance(batch_sizes, int) or not list(batch_sizes):
        raise TypeError(f"batch_sizes must be a non-empty list of ints, got {batch_sizes!r}")
    batch_sizes = [int_arg(b, "batch_sizes[i]", low=1) for b in batch_sizes]
    hidden_dim = int_arg(hidden_dim, "hidden_dim", low=1)
    torch.manual_seed(seed)
    model = zg_models.build("sage", g.feat_dim, hidden_dim, g.num_classes, len(fanouts))
    rows = []
    for part in parts:
        grad = gradient_traffic(model, part.num_parts, estimator=estimator)
        row_bytes = g.feat_dim * g.x.element_size()
        for batch_size in batch_sizes:
            fetch = feature_fetch_traffic(g, part, fanouts, batch_size, seed=seed)
            I = fetch["iterations_per_epoch"]
            feature = sum(fetch["bytes_per_epoch"]) / part.num_parts
            gradient = grad["bytes"] * I
            rows.append({"method": part.method, "num_parts": part.num_parts, "batch_size": batch_size,
                         "iterations_per_epoch": I, "feature_bytes": feature, "gradient_bytes": gradient,
                         "ratio": feature / gradient if gradient else float("inf"),
                         "remote_rows_per_iteration": fetch["remote_rows_per_iteration"],
                         "break_even_rows": grad["bytes"] / row_bytes})
    return rows


def run_trainers(g: Any, runs: Sequence[Any], **common: Any) -> Dict[str, Dict[str, Any]]:
    """Train each run for real and return ``{label: history}`` in the order given.

    Each run is a trainer name (``"grappa"``, ``"isolated"``, ``"psgd_pa"``,
    ``"feature_fetch"``, ``"single"``) or a dict of :func:`zg.grappa.train` options with a
    ``trainer`` and optionally a ``label`` (default: the trainer's name); ``common`` options
    (workers, epochs, seed, fanouts, batch_size, ...) apply to every run. All distributed runs
    share one set of worker processes (:func:`zg.grappa.train_many`); ``single`` runs on its own
    (one process), with the same options but one worker.
    """
    from .train import train_many

    if isinstance(runs, (str, dict)) or not list(runs):
        raise TypeError("runs must be a non-empty list of trainer names or dicts of train() options")
    labelled = []
    for run in runs:
        options = {"trainer": run} if isinstance(run, str) else dict(run) if isinstance(run, dict) else None
        if options is None or "trainer" not in options:
            raise TypeError(f"each run must be a trainer name or a dict with a 'trainer', got {run!r}")
        label = options.pop("label", options["trainer"])
        if label in {lb for lb, _ in labelled}:
            raise ValueError(f"two runs are labelled {label!r}; give each a distinct 'label'")
        labelled.append((label, {**common, **options}))
    single = [(lb, {**o, "workers": 1}) for lb, o in labelled if o["trainer"] == "single"]
    many = [(lb, o) for lb, o in labelled if o["trainer"] != "single"]
    out: Dict[str, Dict[str, Any]] = {}
    for group in (many, single):
        if group:
            for (label, _), history in zip(group, train_many(g, [o for _, o in group])):
                out[label] = history
    return {label: out[label] for label, _ in labelled}


def bytes_sent(history: Dict[str, Any]) -> Dict[str, List[int]]:
    """``{kind: [bytes each worker sent over the whole run]}`` from a training history."""
    if not isinstance(history, dict) or "epochs" not in history:
        raise TypeError("history must be a zg.grappa.train history (a dict with 'epochs')")
    epochs = history["epochs"]
    workers = int(history["workers"])
    kinds = epochs[0]["bytes_by_kind"]
    return {k: [sum(int(e["bytes_by_kind"][k][w]) for e in epochs) for w in range(workers)] for k in kinds}


def trainer_rows(histories: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One summary row per run of :func:`run_trainers`: accuracy, coverage, time and bytes.

    Keys: ``run``, ``trainer``, ``workers``, ``final_test_acc`` and ``final_val_acc`` (last
    epoch), ``best_val_acc``, ``test_acc_at_best_val``, ``mean_coverage`` (L-hop coverage of
    the training nodes, mean over workers, last epoch), ``late_val_acc`` (mean validation
    accuracy over the later half of the evaluated epochs: less noisy than any single epoch),
    ``seconds_per_epoch`` (median, measured), and ``<kind>_per_epoch``: bytes one worker sent
    per epoch (mean over workers).
    """
    if not isinstance(histories, dict) or not histories:
        raise ValueError("histories must be a non-empty dict {label: history}")
    rows = []
    for label, h in histories.items():
        sent = bytes_sent(h)
        E, P = len(h["epochs"]), int(h["workers"])
        last = h["epochs"][-1]
        evaluated = [e["val_acc"] for e in h["epochs"] if e["val_acc"] is not None]
        late = evaluated[len(evaluated) // 2:]
        row = {"run": label, "trainer": h["config"]["trainer"], "workers": P,
               "final_test_acc": h["final"]["test_acc"], "final_val_acc": h["final"]["val_acc"],
               "best_val_acc": h["final"]["best_val_acc"],
               "test_acc_at_best_val": h["final"]["test_acc_at_best_val"],
               "late_val_acc": sum(late) / len(late),
               "mean_coverage": sum(last["mean_coverage"]) / P,
               "seconds_per_epoch": h["seconds_per_epoch"]}
        for kind, per_worker in sent.items():
            row[f"{kind}_per_epoch"] = sum(per_worker) / (P * E)
        rows.append(row)
    return rows


def average_rows(row_lists: Sequence[Sequence[Dict[str, Any]]], key: str = "run") -> List[Dict[str, Any]]:
    """Average several :func:`trainer_rows` tables (e.g. one per seed) run by run.

    Rows are matched by ``key``; numeric entries are averaged, other entries must agree across
    the tables (they are copied). Each row gains ``seeds``: how many tables were averaged.
    The order is the first table's.
    """
    tables = [list(rows) for rows in row_lists] if not isinstance(row_lists, dict) else []
    if not tables or not all(tables):
        raise ValueError("row_lists must be a non-empty list of non-empty row lists")
    out = []
    for first in tables[0]:
        matches = [next((r for r in rows if r.get(key) == first.get(key)), None) for rows in tables]
        if any(m is None for m in matches):
            raise ValueError(f"run {first.get(key)!r} is missing from some of the tables")
        row: Dict[str, Any] = {}
        for name, value in first.items():
            values = [m.get(name) for m in matches]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row[name] = sum(values) / len(values)
            elif any(v != value for v in values):
                raise ValueError(f"{name!r} of run {first.get(key)!r} differs between the tables: {values}")
            else:
                row[name] = value
        row["seeds"] = len(tables)
        out.append(row)
    return out


def expected_bytes(g: Any, history: Dict[str, Any], *, partition: Any = None) -> Dict[str, List[int]]:
    """What every worker of a run *must* have sent, by kind, from its configuration alone.

    Same shape as :func:`bytes_sent`, so a notebook can assert they are equal:

    * ``gradients``: every iteration, the all-reduce of every trainable parameter (grappa,
      isolated, feature_fetch; single sends nothing);
    * ``scalars``: every iteration, 3 float64 per worker, unless the estimator is "mean";
    * ``parameters`` (psgd_pa): an all-reduce of all parameters every ``average_every``
      iterations, counted over the run's global step;
    * ``features`` (feature_fetch): :func:`feature_fetch_traffic` over the run's epochs, with
      the run's partition (rebuilt from the config, or ``partition``).

    Exact for P in {1, 2, 4} (see :func:`gradient_traffic`).
    """
    from .. import models as zg_models
    from ._checks import graph_arg
    from .comm import KINDS, wire_bytes
    from .train import TrainConfig, iterations_per_epoch, make_partition

    g = graph_arg(g, train=True)
    if not isinstance(history, dict) or "config" not in history or "epochs" not in history:
        raise TypeError("history must be a zg.grappa.train history (with 'config' and 'epochs')")
    known = set(TrainConfig.__dataclass_fields__)
    cfg = TrainConfig(**{k: v for k, v in history["config"].items() if k in known}).validated()
    P, E = cfg.workers, len(history["epochs"])
    I = iterations_per_epoch(cfg, g.train_idx.numel())
    torch.manual_seed(cfg.seed)
    model = zg_models.build(cfg.model, g.feat_dim, cfg.hidden_dim, g.num_classes, cfg.num_layers,
                            dropout=cfg.dropout)
    out = {k: [0] * P for k in KINDS}
    if cfg.trainer == "psgd_pa":
        every = cfg.average_every or I
        payload = sum(p.numel() * p.element_size() for p in model.parameters())
        out["parameters"] = [(E * I // every) * wire_bytes("all_reduce", payload, P)] * P
    else:
        per_iteration = gradient_traffic(model, P, estimator=cfg.estimator)
        out["gradients"] = [E * I * per_iteration["gradient_bytes"]] * P
        out["scalars"] = [E * I * per_iteration["scalar_bytes"]] * P
    if cfg.trainer == "feature_fetch":
        part = make_partition(g, cfg) if partition is None else _partitions(partition)[0]
        fetch = feature_fetch_traffic(g, part, cfg.fanouts, cfg.batch_size, epochs=E, seed=cfg.seed)
        out["features"] = [int(round(b * E)) for b in fetch["bytes_per_epoch"]]
    return out


# ----------------------------------------------------------------------------- notebooks 07-08
# (coverage correction; repartitioning and scale)


# Both notebooks use plain measurements: rows of dicts that zg.lab.markdown_table prints and a
# zg.viz builder draws. The shrink sweep rests on one exact identity of the hook-based
# estimators (see zg.grappa.estimators): with G = sum_p s_p * mean_gradient_p and
# s_p(lam) = (1 - lam) W_p / W + lam n_p / n, every draw's shrink gradient is
#     G_shrink(lam) = (1 - lam) G_batch + lam G_uniform,
# so one pass over the draws gives the whole curve; gradient_error(shrink=lam) recomputes any
# single point from scratch (the notebook's slider does, and checks it against the curve).

__all__ += ["error_rows", "shrink_sweep", "chunk_pairs_met", "edges_exposed", "repartition_bytes",
            "feature_fetch_traffic", "gradient_traffic", "scaling_rows", "fetch_traffic_model",
            "epoch_projection"]


def _partitions(part: Any) -> List[Any]:
    from .partition import Partition

    parts = [part] if isinstance(part, Partition) else list(part) if isinstance(part, (list, tuple)) else []
    if not parts or not all(isinstance(p, Partition) for p in parts):
        raise TypeError("parts must be a zg.grappa.Partition or a non-empty list of them")
    return parts


def error_rows(errors: Dict[str, Any], **labels: Any) -> List[Dict[str, Any]]:
    """Flatten a :func:`zg.grappa.gradient_error` result into one row per (weighting, estimator).

    ``errors`` is what ``gradient_error(..., estimator=[...] or "all", weighting=[...])``
    returns: ``{weighting: {estimator: summary}}``; a single weighting's ``{estimator:
    summary}`` is accepted too (then ``weighting`` must be among ``labels``). Each row holds the
    labels, ``weighting``, ``estimator``, ``bias``, ``variance``, ``bias_squared``,
    ``relative_mse`` (= bias^2 + variance), ``relative_error``, ``cosine`` and ``draws``.
    """
    if not isinstance(errors, dict) or not errors:
        raise ValueError("errors must be a non-empty dict from zg.grappa.gradient_error")
    first = next(iter(errors.values()))
    if isinstance(first, dict) and "bias" in first:                       # one weighting
        if "weighting" not in labels:
            raise ValueError("errors holds one weighting: name it, error_rows(errors, weighting=...)")
        errors = {labels.pop("weighting"): errors}
    rows = []
    for weighting, by_name in errors.items():
        if not isinstance(by_name, dict):
            raise ValueError(f"errors[{weighting!r}] must map estimator names to summaries")
        for name, e in by_name.items():
            if not isinstance(e, dict) or "bias" not in e:
                raise ValueError(f"errors[{weighting!r}][{name!r}] is not a gradient_error summary")
            rows.append({**labels, "weighting": weighting, "estimator": name, "bias": e["bias"],
                         "variance": e["variance"], "bias_squared": e["bias"] ** 2,
                         "relative_mse": e["relative_mse"], "relative_error": e["relative_error"],
                         "cosine": e["cosine"], "draws": e["draws"]})
    return rows


def shrink_sweep(g: Any, model: torch.nn.Module, parts: Any, lambdas: Sequence[float], *,
                 super_epochs: Sequence[int] = (0,), weighting: str = "inverse",
                 coverage_floor: float = 0.05,
                 reference: Optional[torch.Tensor] = None) -> Dict[str, Any]:
    """The shrink estimator's error against the exact gradient for every lambda in ``lambdas``.

    One pass over the draws (each partition in ``parts`` x each super-epoch) computes the
    batch and uniform gradients; ``G_shrink(lam) = (1 - lam) G_batch + lam G_uniform`` (exact,
    see the section comment) gives each lambda's draws, summarised exactly as
    :func:`zg.grappa.gradient_error` does. Also reports the data-driven ("auto") lambda of each
    draw (:func:`zg.grappa.estimators.shrink_lambda` of the draw's batch stats).

    Args:
        g, model: as for gradient_error (model parameters read, never changed; mode restored).
        parts: a Partition or a list of them. lambdas: values in [0, 1].
        super_epochs, weighting, coverage_floor, reference: as for gradient_error.
    Returns:
        {"lambdas", "bias", "variance", "relative_mse", "relative_error", "cosine" (lists, one
        entry per lambda), "auto_lambda" (one per draw), "draws"}.
    """
    from ._checks import graph_arg, real_arg
    from .coverage import local_coverage
    from .estimators import Estimator, batch_stats, shrink_lambda
    from .gradient import _summarise, combined_gradients, exact_gradient

    graph_arg(g, train=True)
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "layers"):
        raise TypeError(f"model must be a zg model (SAGE, GCN or GAT), got {type(model).__name__}")
    parts = _partitions(parts)
    if isinstance(lambdas, (str, bytes)) or not hasattr(lambdas, "__iter__"):
        raise TypeError(f"lambdas must be a list of numbers in [0, 1], got {lambdas!r}")
    lambdas = [real_arg(lam, "lambdas[i]", low=0.0, high=1.0) for lam in lambdas]
    if not lambdas:
        raise ValueError("lambdas is empty; give at least one value in [0, 1]")
    super_epochs = list(super_epochs)
    if not super_epochs:
        raise ValueError("super_epochs is empty; give at least one super-epoch")
    estimators = [Estimator("batch", weighting, coverage_floor), Estimator("uniform", weighting, coverage_floor)]
    was_training = model.training
    model.eval()
    try:
        g_star = exact_gradient(g, model) if reference is None else reference.to(torch.float64)
        batch, uniform, auto = [], [], []
        for part in parts:
            for s in super_epochs:
                grads = combined_gradients(g, model, part, estimators, s)
                batch.append(grads["batch"])
                uniform.append(grads["uniform"])
                stats = []
                for worker in range(part.num_parts):
                    local = part.local_graph(g, worker, s)
                    cov = local_coverage(local, len(model.layers))[local.graph.train_idx]
                    stats.append(batch_stats(estimators[0].node_weights(cov)))
                auto.append(shrink_lambda(torch.stack(stats)))
    finally:
        model.train(was_training)
    B, U = torch.stack(batch), torch.stack(uniform)                     # [R, num_params] each
    norm = float(g_star.norm()) or 1.0
    out: Dict[str, Any] = {"lambdas": lambdas, "bias": [], "variance": [], "relative_mse": [],
                           "relative_error": [], "cosine": [], "auto_lambda": auto,
                           "draws": int(B.shape[0])}
    for lam in lambdas:
        summary = _summarise((1.0 - lam) * B + lam * U, g_star, norm)
        for key in ("bias", "variance", "relative_mse", "relative_error", "cosine"):
            out[key].append(summary[key])
    return out


def chunk_pairs_met(part: Any, super_epochs: int) -> List[float]:
    """Fraction of distinct chunk pairs that have shared a worker after 1 .. ``super_epochs``
    super-epochs (entry s - 1: super-epochs 0 .. s - 1), from :meth:`Partition.pair_coverage`.
    A partition with one chunk has no pairs: every entry is 1.0."""
    from ._checks import int_arg

    part = _partitions(part)[0]
    super_epochs = int_arg(super_epochs, "super_epochs", low=1)
    C = part.num_chunks
    pairs = C * (C - 1) // 2
    out = []
    for s in range(1, super_epochs + 1):
        met = part.pair_coverage(s)
        out.append(1.0 if pairs == 0 else float((int(met.sum()) - C) // 2) / pairs)
    return out


def edges_exposed(g: Any, part: Any, super_epochs: int) -> List[float]:
    """Fraction of the graph's edges that were *local* (both ends on one worker) in at least one
    of super-epochs 0 .. s - 1, for s = 1 .. ``super_epochs``: the edges isolated training has
    had a chance to learn from. Entry 0 is 1 - the edge-cut fraction of super-epoch 0."""
    from ._checks import int_arg

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


def repartition_bytes(g: Any, part: Any, super_epochs: int, *, feature_bytes: int = 4,
                      index_bytes: int = 8) -> List[int]:
    """Bytes a repartitioning *would* move between machines, per transition into super-epoch
    s = 1 .. ``super_epochs`` - 1 (entry s - 1), summed over workers: every node whose owner
    changes moves its feature row, its label and its in-edge list (one source id per edge).

    Counted from the partition, not sent: the kit's worker processes each hold the whole
    graph, so repartitioning costs them no traffic; a multi-machine deployment pays this.
    """
    from ._checks import int_arg

    part = _partitions(part)[0]
    part._check_graph(g)
    super_epochs = int_arg(super_epochs, "super_epochs", low=1)
    feature_bytes = int_arg(feature_bytes, "feature_bytes", low=0)
    index_bytes = int_arg(index_bytes, "index_bytes", low=0)
    row = (g.feat_dim if g.x is not None else 0) * feature_bytes + index_bytes   # features + label
    deg = g.in_degrees().cpu()
    out, before = [], part.owner(0)
    for s in range(1, super_epochs):
        now = part.owner(s)
        moved = now != before
        out.append(int(moved.sum()) * row + int(deg[moved].sum()) * index_bytes)
        before = now
    return out


def feature_fetch_traffic(g: Any, part: Any, fanouts: Sequence[int], batch_size: int, *,
                          epochs: int = 1, seed: int = 0) -> Dict[str, Any]:
    """What the ``feature_fetch`` trainer's workers send, counted without starting processes.

    Builds each worker's :class:`zg.baselines.remote.FeatureFetchSource` (the same seeds,
    shuffles and sampler as ``grappa.train(trainer="feature_fetch", ...)`` with this partition,
    fanouts, batch size and seed), samples every iteration and applies the bytes rule of
    :func:`zg.baselines.remote.fetch_features`: per iteration a worker sends its request
    counts, the ids of the rows it asks others for (8 bytes each) and the feature rows others
    ask of it. So the totals equal the ``features`` bytes of a real run's history.

    Returns:
        {"bytes_per_epoch": [per worker, mean over epochs], "bytes_per_iteration": mean over
        workers and iterations, "input_rows_per_iteration": mean unique input nodes a worker's
        batch needs, "remote_rows_per_iteration": mean of those owned by another worker,
        "iterations_per_epoch", "workers"}.
    """
    from ..baselines.remote import FeatureFetchSource
    from ._checks import graph_arg, int_arg
    from .comm import CommLedger, wire_bytes
    from .train import TrainConfig

    graph_arg(g, train=True)
    part = _partitions(part)[0]
    part._check_graph(g)
    epochs = int_arg(epochs, "epochs", low=1)
    P = part.num_parts
    cfg = TrainConfig(trainer="feature_fetch", workers=P, fanouts=list(fanouts),
                      num_layers=len(fanouts), batch_size=batch_size, seed=seed).validated()
    device = torch.device("cpu")
    sources = [FeatureFetchSource(cfg, g, part, r, P, device, CommLedger(P)) for r in range(P)]
    owner = sources[0].table.owner
    row_bytes = g.feat_dim * g.x.element_size()
    sent = torch.zeros(P, dtype=torch.float64)
    rows = remote = 0.0
    iterations = sources[0].iterations
    for epoch in range(epochs):
        batches = [s.batches(epoch) for s in sources]
        for it in range(iterations):
            asks = torch.zeros(P, P, dtype=torch.int64)                 # asks[a, b]: rows a wants from b
            for r, source in enumerate(sources):
                nodes = source.sampler.sample(batches[r][it], epoch, it).input_nodes
                asks[r] = torch.bincount(owner[nodes], minlength=P)
                rows += nodes.numel()
                remote += float(asks[r].sum() - asks[r, r])
            for r in range(P):
                sent[r] += (wire_bytes("all_to_all", (P - 1) * 8, P)
                            + wire_bytes("all_to_all", int(asks[r].sum() - asks[r, r]) * 8, P)
                            + wire_bytes("all_to_all", int(asks[:, r].sum() - asks[r, r]) * row_bytes, P))
    steps = epochs * iterations * P
    return {"bytes_per_epoch": (sent / epochs).tolist(), "bytes_per_iteration": float(sent.sum()) / steps,
            "input_rows_per_iteration": rows / steps, "remote_rows_per_iteration": remote / steps,
            "iterations_per_epoch": iterations, "workers": P}


def gradient_traffic(model: torch.nn.Module, workers: int, *, estimator: str = "batch") -> Dict[str, int]:
    """Bytes and rounds one Grappa worker sends per iteration: the gradient all-reduce of every
    trainable parameter (float32 here) plus, for every estimator but "mean", the all_gather of
    three float64 scalars. Does not depend on the graph at all.

    Exact for the ledger of a real run when ``2 (P - 1) / P`` times each DDP bucket's bytes is
    a whole number (always for P in {1, 2, 4} with float32 gradients).
    Returns {"gradient_bytes", "scalar_bytes", "bytes", "rounds", "parameters"}.
    """
    from ._checks import choice_arg, int_arg
    from .comm import rounds, wire_bytes
    from .estimators import ESTIMATORS

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    P = int_arg(workers, "workers", low=1)
    choice_arg(estimator, "estimator", ESTIMATORS)
    params = [p for p in model.parameters() if p.requires_grad]
    payload = sum(p.numel() * p.element_size() for p in params)
    grad = wire_bytes("all_reduce", payload, P)
    scalars = 0 if estimator == "mean" else wire_bytes("all_gather", 3 * 8, P)
    r = rounds("all_reduce", P) + (0 if estimator == "mean" else rounds("all_gather", P))
    return {"gradient_bytes": grad, "scalar_bytes": scalars, "bytes": grad + scalars, "rounds": r,
            "parameters": sum(p.numel() for p in params)}


def scaling_rows(graphs: Sequence[Any], *, workers: int, fanouts: Sequence[int], batch_size: int,
                 hidden_dim: int = 64, method: str = "random", seed: int = 0) -> List[Dict[str, Any]]:
    """One row per graph: how partitioning and both designs' traffic change with graph size.

    For each graph (e.g. R-MAT graphs of growing scale) with a ``workers``-way partition
    (``method``, 2P chunks, super-epoch 0): nodes, edges, ``edge_cut_fraction``,
    ``mean_coverage`` (L-hop coverage of the training nodes, L = len(fanouts)), and per worker
    and iteration the bytes the feature-fetching design sends (:func:`feature_fetch_traffic`,
    one epoch) against Grappa's (:func:`gradient_traffic` of a SAGE model of this width),
    plus the same per epoch (global ``batch_size`` seeds per iteration, as in grappa.train).
    """
    from .. import models as zg_models
    from ._checks import int_arg
    from .coverage import coverage
    from .partition import partition

    if isinstance(graphs, (str, bytes)) or not hasattr(graphs, "__iter__"):
        raise TypeError("graphs must be a list of zg.Graph")
    graphs = list(graphs)
    if not graphs:
        raise ValueError("graphs is empty; give at least one graph")
    P = int_arg(workers, "workers", low=1)
    rows = []
    for g in graphs:
        part = partition(g, P, method, seed)
        stats = part.stats(g)
        cov = coverage(g, part, hops=len(fanouts))[g.train_idx]
        fetch = feature_fetch_traffic(g, part, fanouts, batch_size, seed=seed)
        model = zg_models.SAGE(g.feat_dim, hidden_dim, g.num_classes, num_layers=len(fanouts))
        grad = gradient_traffic(model, P)
        I = fetch["iterations_per_epoch"]
        rows.append({"graph": g.name, "nodes": g.num_nodes, "edges": g.num_edges,
                     "train_nodes": int(g.train_idx.numel()), "iterations_per_epoch": I,
                     "edge_cut_fraction": stats["edge_cut_fraction"], "mean_coverage": float(cov.mean()),
                     "input_rows_per_iteration": fetch["input_rows_per_iteration"],
                     "remote_rows_per_iteration": fetch["remote_rows_per_iteration"],
                     "feature_bytes_per_iteration": fetch["bytes_per_iteration"],
                     "gradient_bytes_per_iteration": grad["gradient_bytes"],
                     "scalar_bytes_per_iteration": grad["scalar_bytes"],
                     "fetch_bytes_per_epoch": (fetch["bytes_per_iteration"] + grad["gradient_bytes"]) * I,
                     "grappa_bytes_per_epoch": grad["bytes"] * I})
    return rows


def fetch_traffic_model(input_rows: float, seeds: float, workers: int, feat_dim: int, *,
                        feature_bytes: int = 4) -> Dict[str, float]:
    """A *model* of the feature traffic one feature-fetching worker sends per iteration when
    its batch needs ``input_rows`` unique input nodes, ``seeds`` of them its own seeds, on a
    random ``workers``-way partition: every other input node is remote with probability
    (P - 1) / P; requests and replies are symmetric across workers (each sends as many rows as
    it asks for), as in :func:`zg.baselines.remote.fetch_features`' byte rule:
    8 (P - 1) count bytes + 8 bytes per requested row + ``feat_dim * feature_bytes`` per row.
    Returns {"remote_rows", "bytes", "rounds"} (rounds: the three all_to_all calls).
    """
    from ._checks import int_arg, real_arg
    from .comm import rounds

    input_rows = real_arg(input_rows, "input_rows", low=0.0)
    seeds = real_arg(seeds, "seeds", low=0.0, high=input_rows)
    P = int_arg(workers, "workers", low=1)
    feat_dim = int_arg(feat_dim, "feat_dim", low=1)
    feature_bytes = int_arg(feature_bytes, "feature_bytes", low=1)
    if P == 1:
        return {"remote_rows": 0.0, "bytes": 0.0, "rounds": 0}
    remote = (input_rows - seeds) * (P - 1) / P
    return {"remote_rows": remote, "bytes": 8.0 * (P - 1) + remote * (8 + feat_dim * feature_bytes),
            "rounds": 3 * rounds("all_to_all", P)}


def epoch_projection(per_iteration: Dict[str, Dict[str, float]], iterations: int,
                     links: Optional[Sequence[Any]] = None) -> List[Dict[str, Any]]:
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
    from ._checks import int_arg
    from .comm import LINKS, Link, project_seconds

    if not isinstance(per_iteration, dict) or not per_iteration:
        raise ValueError("per_iteration must be a non-empty dict {design: {seconds, bytes, rounds}}")
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
            p = project_seconds(m["seconds"] * iterations, [m["bytes"] * iterations],
                                [m["rounds"] * iterations], link)
            rows.append({"design": design, "link": link.name, "iterations": iterations,
                         "compute_seconds": p["measured_seconds"], "link_seconds": p["link_seconds"],
                         "projected_seconds": p["projected_seconds"],
                         "bytes_per_worker": m["bytes"] * iterations})
    return rows
