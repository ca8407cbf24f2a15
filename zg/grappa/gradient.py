"""gradient_error: how far each estimator's combined gradient is from the exact one.

Where it sits: the measurement behind "which weighting is right". For fixed parameters it
computes, in one process and without sampling noise,

    g*  = grad of  1/|T| sum_{v in T} l*_v         the exact full-graph gradient: full
                                                   neighbourhoods on the whole graph, all
                                                   training nodes T
    G_r = sum_p s_p grad( sum_{v in T_p} f_v l_v )  what the estimator combines (equation (1)
                                                   of zg.grappa.estimators) when worker p
                                                   trains on its whole local graph with all
                                                   its training nodes T_p as one batch, in
                                                   draw r (a partition and super-epoch)

in eval mode (no dropout), so the only differences are isolation and weighting. Over R draws:

    relative_error = mean_r |G_r - g*| / |g*|        cosine = mean_r cos(G_r, g*)
    bias           = |mean_r G_r - g*| / |g*|
    variance       = mean_r |G_r - mean G|^2 / |g*|^2
    relative_mse   = mean_r |G_r - g*|^2 / |g*|^2  =  bias^2 + variance

Draws come from the partitions passed (several random seeds: :func:`random_partitions`) and
the super-epochs asked for. A single draw has variance 0 by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from .._checks import SEED_MAX, seed_arg
from ..graph import Graph
from ..models import BlockModel
from ..settings import check_model_fits
from ._checks import graph_arg, int_arg
from .coverage import local_coverage
from .estimators import ESTIMATORS, Estimator, batch_stats, local_weights
from .fullgraph import full_forward
from .partition import Partition, partition

__all__ = ["gradient_error", "exact_gradient", "combined_gradients", "random_partitions"]


def _flat_grad(loss: torch.Tensor, params: list[torch.Tensor], retain: bool) -> torch.Tensor:
    grads = torch.autograd.grad(loss, params, retain_graph=retain, allow_unused=True)
    return torch.cat(
        [(torch.zeros_like(p) if gr is None else gr).reshape(-1) for p, gr in zip(params, grads)]
    ).double()


def exact_gradient(g: Graph, model: torch.nn.Module) -> torch.Tensor:
    """float64 [num_params]: g*, the full-graph gradient of the mean training loss (eval mode)."""
    params = [p for p in model.parameters() if p.requires_grad]
    logits = full_forward(model, g)  # [N, C]
    loss = F.cross_entropy(logits[g.train_idx], g.y[g.train_idx])
    return _flat_grad(loss, params, retain=False)


def combined_gradients(
    g: Graph,
    model: torch.nn.Module,
    part: Partition,
    estimators: Sequence[Estimator],
    super_epoch: int = 0,
) -> dict[Any, torch.Tensor]:
    """The combined gradient G (float64 [num_params]) of one draw for each estimator, keyed by
    its name, or by (weighting, name) when the estimators use several weightings."""
    params = [p for p in model.parameters() if p.requires_grad]
    num_layers = len(model.layers)
    P = part.num_parts
    per_worker = []  # (losses [n_p], the local graph, its coverage [n_local])
    for p in range(P):
        local = part.local_graph(g, p, super_epoch)
        lg = local.graph
        if lg.train_idx.numel() == 0:
            raise ValueError(
                f"empty partition: worker {p} owns no training node in super-epoch "
                f"{super_epoch}; use fewer num_parts"
            )
        logits = full_forward(model, lg)  # [n_local, C]
        losses = F.cross_entropy(logits[lg.train_idx], lg.y[lg.train_idx], reduction="none")
        per_worker.append((losses, local, local_coverage(local, num_layers)))
    # Most estimators use factors 1 / n_p (the batch mean: est.batch_mean_factors), so one
    # backward per worker serves them all: G = sum_p s_p * mean_gradient_p.
    mean_grads = [_flat_grad(losses.mean(), params, retain=True) for losses, *_ in per_worker]
    out: dict[Any, torch.Tensor] = {}
    several = len({est.weighting for est in estimators}) > 1
    for est in estimators:
        weights = [  # each estimator's own node weights of the training seeds [n_p]
            local_weights(est, local, num_layers, coverage=cov)[local.graph.train_idx]
            for _, local, cov in per_worker
        ]
        stats = torch.stack([batch_stats(w) for w in weights])  # [P, 3]
        total = torch.zeros_like(mean_grads[0])
        for p, ((losses, *_), w) in enumerate(zip(per_worker, weights)):
            factors, scale, _ = est.combine(w, p, P, stats)
            if est.batch_mean_factors:
                total += scale * mean_grads[p]
            else:
                total += scale * _flat_grad((losses * factors).sum(), params, retain=True)
        out[(est.weighting, est.name) if several else est.name] = total
    return out


def random_partitions(
    g: Graph, num_parts: int, count: int, method: str = "random", seed: int = 0, **kwargs: Any
) -> list[Partition]:
    """``count`` partitions with seeds ``seed .. seed + count - 1`` (the draws of gradient_error;
    past the largest seed they wrap to 0)."""
    seed = seed_arg(seed)
    count = int_arg(count, "count", low=1)
    return [
        partition(g, num_parts, method, (seed + i) % (SEED_MAX + 1), **kwargs) for i in range(count)
    ]


def gradient_error(
    g: Graph,
    model: torch.nn.Module,
    part: Partition | Sequence[Partition],
    estimator: str | Sequence[str] = "batch",
    *,
    super_epochs: Sequence[int] = (0,),
    weighting: str | Sequence[str] = "inverse",
    coverage_floor: float = 0.05,
    shrink: Any = "auto",
    reference: torch.Tensor | None = None,
) -> dict[str, Any]:
    """Compare estimators' combined gradients with the exact full-graph gradient.

    Args:
        g: graph with features, labels and train_idx. model: a zg model (SAGE / GCN / GAT);
            its parameters are read, never changed, and its train/eval mode is restored.
        part: a Partition or a list of them (the draws; see :func:`random_partitions`).
        estimator: a name, a list of names, or "all".
        super_epochs: which super-epochs of each partition to use as draws.
        weighting, coverage_floor, shrink: as in :class:`zg.grappa.estimators.Estimator`;
            ``weighting`` may also be a list, measured in one pass over the draws.
        reference: g* if already computed for these parameters (:func:`exact_gradient`), to
            save the full-graph pass when comparing several settings.
    Returns:
        For one name: ``{"relative_error", "cosine", "bias", "variance", "relative_mse",
        "draws", "per_draw": [{"relative_error", "cosine"}, ...]}``; for several, a dict of
        those keyed by estimator name; for a list of weightings, one such result per weighting
        (``{"inverse": ..., "coverage": ...}``). See the module docstring for the definitions.
    """
    graph_arg(g, train=True)
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "layers"):
        raise TypeError(f"model must be a zg model (SAGE, GCN or GAT), got {type(model).__name__}")
    if isinstance(model, BlockModel):  # the Engine's checks: input width, dtype, classes
        check_model_fits(model, g, [1] * model.num_layers, gathers_x=True)
    parts = (
        [part]
        if isinstance(part, Partition)
        else list(part)
        if isinstance(part, (list, tuple))
        else None
    )
    if not parts or not all(isinstance(p, Partition) for p in parts):
        raise TypeError("part must be a zg.grappa.Partition or a non-empty list of them")
    single = isinstance(estimator, str) and estimator != "all"
    names = list(ESTIMATORS) if estimator == "all" else [estimator] if single else list(estimator)
    if not names:
        raise ValueError("estimator is an empty list; name at least one estimator")
    weightings = [weighting] if isinstance(weighting, str) else list(weighting)
    if not weightings:
        raise ValueError("weighting is an empty list; name at least one weighting")
    estimators = [Estimator(n, w, coverage_floor, shrink) for w in weightings for n in names]
    super_epochs = [int_arg(s, "super_epochs[i]", low=0) for s in super_epochs]
    num_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if reference is not None and (
        not isinstance(reference, torch.Tensor)
        or reference.dtype == torch.bool
        or reference.is_complex()
    ):
        got = (
            f"a {reference.dtype} tensor"
            if isinstance(reference, torch.Tensor)
            else type(reference).__name__
        )
        raise TypeError(
            f"reference must be the flat exact gradient, a real tensor of shape "
            f"({num_params},), got {got}"
        )
    if reference is not None and reference.shape != (num_params,):
        raise ValueError(
            f"reference must be the flat exact gradient, a tensor of shape ({num_params},)"
        )
    if reference is not None and not bool(torch.isfinite(reference).all()):
        bad = int((~torch.isfinite(reference)).sum())
        raise ValueError(
            f"reference holds {bad} NaN or inf value(s) of {num_params}; every metric would "
            "be NaN: pass the finite exact_gradient(g, model) of these parameters"
        )
    if not super_epochs:
        raise ValueError("super_epochs is empty; give at least one super-epoch")
    was_training = model.training
    model.eval()
    try:
        g_star = exact_gradient(g, model) if reference is None else reference.to(torch.float64)
        draws: dict[Any, list[torch.Tensor]] = {}
        for p in parts:
            for s in super_epochs:
                for key, grad in combined_gradients(g, model, p, estimators, s).items():
                    draws.setdefault(
                        key if len(weightings) > 1 else (weightings[0], key), []
                    ).append(grad)
    finally:
        model.train(was_training)
    norm = float(g_star.norm()) or 1.0
    results: dict[str, dict[str, Any]] = {w: {} for w in weightings}
    for (w, name), grads in draws.items():
        results[w][name] = _summarise(torch.stack(grads), g_star, norm)
    if single:
        results = {w: r[names[0]] for w, r in results.items()}
    return results[weightings[0]] if isinstance(weighting, str) else results


def _summarise(G: torch.Tensor, g_star: torch.Tensor, norm: float) -> dict[str, Any]:
    """G float64 [R, num_params] draws of one estimator."""
    diff = G - g_star  # [R, D]
    rel = diff.norm(dim=1) / norm  # [R]
    cos = F.cosine_similarity(G, g_star[None, :].expand_as(G), dim=1)  # [R]
    mean = G.mean(0)
    bias = float((mean - g_star).norm()) / norm
    variance = float(((G - mean) ** 2).sum(1).mean()) / norm**2
    return {
        "relative_error": float(rel.mean()),
        "cosine": float(cos.mean()),
        "bias": bias,
        "variance": variance,
        "relative_mse": float((rel**2).mean()),
        "draws": int(G.shape[0]),
        "per_draw": [{"relative_error": float(r), "cosine": float(c)} for r, c in zip(rel, cos)],
    }
