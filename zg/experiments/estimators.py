"""zg.experiments.estimators: how far each way of combining the workers' gradients lands from
the exact full-graph gradient (notebook 07).

Where it sits: on the gradient exchange, where :mod:`zg.grappa.estimators` weights each
worker's gradient. :func:`error_rows` flattens :func:`zg.grappa.gradient_error` into rows;
:func:`shrink_sweep` measures the shrink estimator's error for a whole range of lambdas.
Figures: :func:`zg.viz.estimator_errors`, :func:`zg.viz.shrink_curve`.

The shrink sweep rests on one exact identity of the hook-based estimators (see
:mod:`zg.grappa.estimators`): with G = sum_p s_p * mean_gradient_p and
s_p(lam) = (1 - lam) W_p / W + lam n_p / n, every draw's shrink gradient is

    G_shrink(lam) = (1 - lam) G_batch + lam G_uniform,

so one pass over the draws gives the whole curve; ``gradient_error(shrink=lam)`` recomputes
any single point from scratch (notebook 07's slider does, and checks it against the curve).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .._checks import seed_arg
from ._progress import progress
from .partitions import _partitions

__all__ = ["error_rows", "shrink_sweep", "bias_vs_workers"]


def error_rows(errors: dict[str, Any], **labels: Any) -> list[dict[str, Any]]:
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
    if isinstance(first, dict) and "bias" in first:  # one weighting
        if "weighting" not in labels:
            raise ValueError(
                "errors holds one weighting: name it, error_rows(errors, weighting=...)"
            )
        errors = {labels.pop("weighting"): errors}
    rows = []
    for weighting, by_name in errors.items():
        if not isinstance(by_name, dict):
            raise ValueError(f"errors[{weighting!r}] must map estimator names to summaries")
        for name, e in by_name.items():
            if not isinstance(e, dict) or "bias" not in e:
                raise ValueError(f"errors[{weighting!r}][{name!r}] is not a gradient_error summary")
            rows.append(
                {
                    **labels,
                    "weighting": weighting,
                    "estimator": name,
                    "bias": e["bias"],
                    "variance": e["variance"],
                    "bias_squared": e["bias"] ** 2,
                    "relative_mse": e["relative_mse"],
                    "relative_error": e["relative_error"],
                    "cosine": e["cosine"],
                    "draws": e["draws"],
                }
            )
    return rows


def shrink_sweep(
    g: Any,
    model: torch.nn.Module,
    parts: Any,
    lambdas: Sequence[float],
    *,
    super_epochs: Sequence[int] = (0,),
    weighting: str = "inverse",
    coverage_floor: float = 0.05,
    reference: torch.Tensor | None = None,
) -> dict[str, Any]:
    """The shrink estimator's error against the exact gradient for every lambda in ``lambdas``.

    One pass over the draws (each partition in ``parts`` x each super-epoch) computes the
    batch and uniform gradients; ``G_shrink(lam) = (1 - lam) G_batch + lam G_uniform`` (exact,
    see the module docstring) gives each lambda's draws, summarised exactly as
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
    from ..grappa._checks import graph_arg, real_arg
    from ..grappa.coverage import local_coverage
    from ..grappa.estimators import Estimator, batch_stats, shrink_lambda
    from ..grappa.gradient import _summarise, combined_gradients, exact_gradient

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
    estimators = [
        Estimator("batch", weighting, coverage_floor),
        Estimator("uniform", weighting, coverage_floor),
    ]
    was_training = model.training
    model.eval()
    try:
        g_star = exact_gradient(g, model) if reference is None else reference.to(torch.float64)
        batch, uniform, auto = [], [], []
        for part in progress(parts, desc="partitions", unit="partition"):
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
    B, U = torch.stack(batch), torch.stack(uniform)  # [R, num_params] each
    norm = float(g_star.norm()) or 1.0
    out: dict[str, Any] = {
        "lambdas": lambdas,
        "bias": [],
        "variance": [],
        "relative_mse": [],
        "relative_error": [],
        "cosine": [],
        "auto_lambda": auto,
        "draws": int(B.shape[0]),
    }
    for lam in lambdas:
        summary = _summarise((1.0 - lam) * B + lam * U, g_star, norm)
        for key in ("bias", "variance", "relative_mse", "relative_error", "cosine"):
            out[key].append(summary[key])
    return out


def bias_vs_workers(
    g: Any,
    model: Any,
    workers: Sequence[int],
    *,
    draws: int = 3,
    method: str = "metis",
    estimators: Sequence[str] = ("mean", "batch", "shrink", "uniform"),
    weighting: str = "inverse",
    super_epochs: Sequence[int] = (0, 1),
    seed: int = 0,
    reference: torch.Tensor | None = None,
) -> list[dict[str, Any]]:
    """Each estimator's bias and relative MSE against the exact gradient, for every worker count.

    For each P in ``workers`` it draws ``draws`` partitions (``method``, seeds ``seed ..``) and
    runs :func:`zg.grappa.gradient_error` over them and ``super_epochs``. Returns one row per
    (P, estimator): ``workers``, ``partition``, ``estimator``, ``weighting``, ``bias``,
    ``variance``, ``relative_mse``, ``draws``. Figure: :func:`zg.viz.estimator_bias_vs_workers`.
    """
    from ..grappa.gradient import exact_gradient, gradient_error, random_partitions

    if isinstance(workers, (str, bytes)) or not list(workers):
        raise ValueError(f"workers must be a non-empty list of worker counts, got {workers!r}")
    counts = []
    for P in workers:
        if isinstance(P, bool) or not isinstance(P, int) or P < 2:
            raise ValueError(
                f"every worker count must be an int >= 2, got {P!r} in workers={list(workers)}"
            )
        counts.append(P)
    seed = seed_arg(seed)
    if reference is None:
        reference = exact_gradient(g, model)
    rows = []
    for P in progress(counts, desc="worker counts", unit="count"):
        parts = random_partitions(g, P, count=draws, method=method, seed=seed)
        err = gradient_error(
            g,
            model,
            parts,
            estimator=list(estimators),
            super_epochs=super_epochs,
            weighting=weighting,
            reference=reference,
        )
        for name in estimators:
            e = err[name]
            rows.append(
                {
                    "workers": P,
                    "partition": method,
                    "estimator": name,
                    "weighting": weighting,
                    "bias": e["bias"],
                    "variance": e["variance"],
                    "relative_mse": e["relative_mse"],
                    "draws": e["draws"],
                }
            )
    return rows
