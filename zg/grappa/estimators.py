r"""Estimators: how the workers' gradients are combined into one update.

Where it sits: inside every training iteration, between backward and the optimizer step. Each
worker p has a batch B_p of seeds it owns (n_p = |B_p|) and computes per-seed losses
``l_v`` on its local graph. Every estimator here produces the combined gradient

    G = sum_p  s_p * grad( sum_{v in B_p} f_v l_v )                                    (1)

from two numbers it hands the training loop: per-seed loss *factors* ``f_v`` (applied in the
local loss) and one *worker scale* ``s_p`` (applied to the worker's gradient inside the DDP
communication hook, which then sums over workers). Only gradients and, per iteration, three
scalars per worker cross the wire: ``stats_p = (n_p, W_p, Q_p)`` with ``W_p = sum w_v`` and
``Q_p = sum w_v^2`` over the batch (one all_gather of a [3] float64 tensor).

The target is the exact full-graph gradient ``g* = 1/|T| sum_{v in T} grad l*_v`` (T: all
training nodes, l*: the loss with the full neighbourhood). Isolation changes ``l_v`` (truncated
neighbourhoods); the estimators change the weighting.

Node weights from coverage (``c_v = c_L(v)`` of :mod:`zg.grappa.coverage`, L = number of
layers), clipped below at ``floor`` so that every weight is bounded (the "support and
boundedness" assumption: no seed may have coverage 0):

    weighting="inverse"  (default)   w_v = 1 / max(c_v, floor)
        Importance sampling / Horvitz-Thompson reading: a seed's L-hop computation survives
        isolation intact with probability about c_v, so an intact survivor stands for
        1 / c_v seeds; self-normalised (divide by the sum of weights) the estimator is
        asymptotically unbiased for the full-graph gradient *if* a seed's local gradient
        equals its full gradient when its tree is intact, and the c_v are bounded away from 0.
    weighting="coverage"             w_v = max(c_v, floor)
        The opposite intuition: trust seeds whose neighbourhood is complete, discount those
        whose gradient isolation has distorted most. Biased toward well-covered nodes.

Which direction gets closer to g* is an empirical question; :func:`zg.grappa.gradient_error`
measures it.

The four estimators (W = sum_p W_p, n = sum_p n_p, P workers), and a reference:

    mean    f_v = 1 / n_p,  s_p = 1 / P.
            Plain DDP averaging, no correction: every worker's batch mean counts the same.
            Assumes isolation costs nothing (and that batches are equally large). Sends no
            scalars.
    node    f_v = w_v / W,  s_p = 1.
            The node-level estimator: a self-normalised weighted mean over all seeds of all
            workers, G = sum_v w_v grad l_v / sum_v w_v. Needs the global W before backward
            (the scalar all_gather), then a plain sum.
    batch   f_v = 1 / n_p,  s_p = W_p / W.
            The batch-level estimator for an unmodified loss and a standard DDP hook: every seed
            of batch p gets the same weight beta_p, fitted to the node-level weights
            omega_v = w_v / W by least squares:

                minimise  sum_p sum_{v in B_p} (omega_v - beta_p)^2
                d/d beta_p = -2 sum_{v in B_p} (omega_v - beta_p) = 0
                =>  beta_p = (1 / n_p) sum_{v in B_p} omega_v = W_p / (n_p W)

            so G = sum_p beta_p sum_{v in B_p} grad l_v = sum_p (W_p / W) * mean-gradient_p:
            the worker scale is ``s_p = n_p beta_p = W_p / W``. Equals ``node`` when the weights
            are constant within each batch; assumes the within-batch spread of w carries little
            of the correction.
    shrink  f_v = 1 / n_p,  s_p = (1 - lam) W_p / W + lam n_p / n.
            ``batch`` shrunk toward uniform node weights (every seed 1/n, which for equal batch
            sizes is ``mean``'s 1/P), for stability when the weights are noisy.
            ``shrink=<float>``: a fixed lam in [0, 1]. ``shrink="auto"``: the positive-part
            James-Stein intensity

                a_p = W_p / W,  u_p = n_p / n,
                s2_p = (Q_p - W_p^2 / n_p) / (n_p - 1)            (within-batch variance of w)
                var_p = n_p s2_p / W^2                             (noise variance of a_p)
                lam = min(1, sum_p var_p / sum_p (a_p - u_p)^2)     (1 if the spread is 0)

            i.e. shrink fully when the spread of the batch weights is what within-batch noise
            alone would produce, and keep them when the spread is far larger. Assumes node
            weights within a batch are roughly independent draws and treats W as fixed.
    uniform f_v = 1 / n_p,  s_p = n_p / n.      (reference, not a coverage correction)
            Every seed of every worker weighs 1/n: ``mean`` made size-aware, = ``shrink`` with
            lam = 1. It separates what the corrections gain from re-weighting unequal batch
            sizes from what they gain from coverage.

All of them give weights that sum to one over the seeds (``sum_p s_p sum_v f_v = 1``), so a
uniform gradient passes through every estimator unchanged.

The paper's own weighting, exactly as its public code does it (not self-normalised):

    reference  f_v = 1 / n_p,  s_p = (1 / P) * (1 / n_p) sum_{v in B_p} r_v,
               r_v = min(1, d_loc(v) / (d(v) + 1))
            d_loc(v): v's in-degree in its worker's local graph (the partition's edges; with a
            halo every in-edge of an owned node is local), d(v): its in-degree in the whole
            graph. Each worker scales its batch-mean gradient by the mean of r over its seeds,
            divided by P, so G = (1/P) sum_p mean_r_p * mean-gradient_p. It ignores
            ``weighting``, ``coverage_floor`` and ``shrink`` (r is a one-hop degree ratio, not
            the L-hop coverage), needs no scalars from other workers (s_p is local), and its
            weights sum to mean_p(mean r_p) <= 1, not 1: a uniform gradient comes out scaled by
            that factor. Adam, the kit's optimizer, is nearly invariant to a common scale, so
            what matters in training is the relative weight of the workers.

The paper's two ablations, as options of :func:`zg.grappa.train`:

    unweighted aggregation  ``estimator="mean"``: the plain mean of the workers' batch-mean
                            gradients, no coverage correction.
    fixed partitions        ``repartition_every=None``:
                            the chunks of super-epoch 0 stay with their workers for the whole
                            run; every estimator works with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ._checks import choice_arg, real_arg
from .coverage import local_coverage

__all__ = [
    "Estimator",
    "ESTIMATORS",
    "WEIGHTINGS",
    "batch_stats",
    "masked_batch_stats",
    "shrink_lambda",
    "worker_scales",
    "reference_weights",
    "local_weights",
]

ESTIMATORS = ("mean", "node", "batch", "shrink", "uniform", "reference")
WEIGHTINGS = ("inverse", "coverage")


def batch_stats(weights: torch.Tensor) -> torch.Tensor:
    """float64 [3] ``(n_p, W_p, Q_p)`` of one worker's batch weights ``weights`` [n_p]
    (:func:`masked_batch_stats` with every row real)."""
    return masked_batch_stats(
        weights, torch.ones(weights.shape, dtype=torch.bool, device=weights.device)
    )


def masked_batch_stats(weights: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """float64 [3] ``(n_p, W_p, Q_p)`` over the valid rows of a padded batch, on the device
    (weights float [B], valid bool [B]; no host read)."""
    v = valid.to(torch.float64)
    w = weights.detach().to(torch.float64) * v
    return torch.stack([v.sum(), w.sum(), (w * w).sum()])


def reference_weights(
    local_in_degree: torch.Tensor, global_in_degree: torch.Tensor
) -> torch.Tensor:
    """float32 [n]: the paper's per-seed factor ``r_v = min(1, d_loc(v) / (d(v) + 1))``.

    Args:
        local_in_degree: int [n] in-degree of each node in its worker's local graph.
        global_in_degree: int [n] its in-degree in the whole graph (same order).
    """
    if local_in_degree.shape != global_in_degree.shape:
        raise ValueError(
            f"local_in_degree {tuple(local_in_degree.shape)} and global_in_degree "
            f"{tuple(global_in_degree.shape)} must have the same shape"
        )
    d_loc = local_in_degree.to(torch.float64)
    d = global_in_degree.to(torch.float64)
    return torch.clamp(d_loc / (d + 1.0), max=1.0).to(torch.float32)


def local_weights(estimator: Estimator, local: Any, hops: int) -> torch.Tensor:
    """float32 [n_local]: the node weights ``w_v`` a worker's estimator uses on its local graph
    (a :class:`zg.grappa.LocalGraph`): the clipped coverage weights of :meth:`Estimator.node_weights`
    for every estimator but "reference", whose weights are :func:`reference_weights`."""
    if estimator.name == "reference":
        return reference_weights(
            local.graph.in_degrees(), local.global_in_degree.to(local.graph.device)
        )
    return estimator.node_weights(local_coverage(local, hops))


def _shrink_lambda_tensor(stats: torch.Tensor) -> torch.Tensor:
    """float64 []: the data-driven shrinkage intensity, on the stats' device (no host read)."""
    n_p, W_p, Q_p = stats.to(torch.float64).unbind(1)  # each [P]
    W, n = W_p.sum(), n_p.sum()
    a, u = W_p / W, n_p / n
    s2 = torch.where(n_p > 1, (Q_p - W_p * W_p / n_p.clamp(min=1)) / (n_p - 1).clamp(min=1), 0.0)
    noise = (n_p * s2.clamp(min=0.0) / (W * W)).sum()
    spread = ((a - u) ** 2).sum()
    lam = torch.clamp(noise / torch.where(spread > 0, spread, 1.0), max=1.0)
    return torch.where(spread > 0, lam, torch.ones_like(lam))


def shrink_lambda(stats: torch.Tensor) -> float:
    """The data-driven ("auto") shrinkage intensity from all workers' stats [P, 3]."""
    return float(_shrink_lambda_tensor(stats))


@dataclass(frozen=True)
class Estimator:
    """One way to combine the workers' gradients (see the module docstring for the formulas).

    Args:
        name: "mean" | "node" | "batch" | "shrink" | "uniform" | "reference".
        weighting: "inverse" (w = 1 / c) | "coverage" (w = c), both clipped at ``floor``.
        floor: lower clip of the coverage, in (0, 1].
        shrink: for ``name="shrink"``: a fixed lambda in [0, 1], or "auto".
    """

    name: str = "batch"
    weighting: str = "inverse"
    floor: float = 0.05
    shrink: float | str = "auto"

    def __post_init__(self):
        choice_arg(self.name, "estimator", ESTIMATORS)
        choice_arg(self.weighting, "weighting", WEIGHTINGS)
        real_arg(self.floor, "coverage_floor", low=0.0, high=1.0, low_open=True)
        if isinstance(self.shrink, str):
            if self.shrink != "auto":
                raise ValueError(
                    f"shrink must be a number in [0, 1] or 'auto', got {self.shrink!r}"
                )
        else:
            real_arg(self.shrink, "shrink", low=0.0, high=1.0)

    @property
    def needs_stats(self) -> bool:
        """Whether the iteration must all_gather the (n_p, W_p, Q_p) scalars ("mean" and
        "reference" need only the worker's own batch)."""
        return self.name not in ("mean", "reference")

    def node_weights(self, coverage: torch.Tensor) -> torch.Tensor:
        """float32 [B] weights w_v of seeds with coverage ``coverage`` [B] (every estimator but
        "reference", whose weights are degree ratios: :func:`reference_weights`)."""
        if self.name == "reference":
            raise ValueError(
                "estimator 'reference' weights seeds by min(1, d_local / (d_global + 1)), "
                "not by coverage; use zg.grappa.estimators.reference_weights or local_weights"
            )
        c = coverage.clamp(min=self.floor, max=1.0)
        return 1.0 / c if self.weighting == "inverse" else c

    def lam(self, stats: torch.Tensor) -> float:
        """The shrinkage lambda in use (only meaningful for ``shrink``)."""
        return shrink_lambda(stats) if self.shrink == "auto" else float(self.shrink)

    def combine_device(
        self,
        weights: torch.Tensor,
        valid: torch.Tensor,
        rank: int,
        num_workers: int,
        stats: torch.Tensor | None = None,
    ):
        """The estimator's arithmetic, once: factors and scale for worker ``rank``'s padded
        batch, entirely on the device (what a worker's training step runs: no host read, so the
        step stays free of host syncs). :meth:`combine` is this with every row real.

        Args:
            weights: float [B] node weights of the batch's rows; valid: bool [B] real rows.
            stats: float64 [P, 3] every worker's :func:`masked_batch_stats` (not for ``mean``
                and ``reference``).
        Returns:
            (factors float32 [B], 0 on padding rows; the worker scale as a float64 [] tensor;
            info {"lambda": float64 []} for ``shrink``).
        """
        valid_f = valid.to(torch.float32)
        uniform = valid_f / valid_f.sum().clamp(min=1.0)  # [B]
        if self.name == "mean":
            return (
                uniform,
                torch.full((), 1.0 / num_workers, dtype=torch.float64, device=weights.device),
                {},
            )
        if self.name == "reference":
            mean_r = (weights.to(torch.float64) * valid.to(torch.float64)).sum() / valid.to(
                torch.float64
            ).sum().clamp(min=1.0)
            return uniform, mean_r / num_workers, {}
        if stats is None or stats.shape != (num_workers, 3):
            raise ValueError(
                f"estimator {self.name!r} needs stats of shape [{num_workers}, 3], "
                f"got {None if stats is None else tuple(stats.shape)}"
            )
        if self.name == "node":
            total = stats[:, 1].sum()
            factors = (weights.to(torch.float64) * valid_f.to(torch.float64) / total).to(
                torch.float32
            )
            return factors, torch.ones((), dtype=torch.float64, device=weights.device), {}
        scales, info = _worker_scales_tensor(self, stats)
        return uniform, scales[rank], info

    def combine(
        self, weights: torch.Tensor, rank: int, num_workers: int, stats: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, float, dict[str, Any]]:
        """Factors and scale for worker ``rank``, as host numbers: :meth:`combine_device` on a
        batch whose rows are all real (the one arithmetic; this only reads its results).

        Args:
            weights: float [n_rank] this worker's seeds' node weights. rank: this worker.
            num_workers: P. stats: float64 [P, 3] every worker's :func:`batch_stats` (not
                needed by ``mean`` and ``reference``).
        Returns:
            (factors float32 [n_rank] for the per-seed losses, worker scale for the hook,
            info {"lambda": ...} for the history).
        """
        valid = torch.ones(weights.shape, dtype=torch.bool, device=weights.device)
        factors, scale, info = self.combine_device(weights, valid, rank, num_workers, stats)
        return factors, float(scale), {k: float(v) for k, v in info.items()}


def _worker_scales_tensor(estimator: Estimator, stats: torch.Tensor):
    """float64 [P] worker scales on the stats' device, and {"lambda": float64 []} for shrink."""
    stats = stats.to(torch.float64)
    P = stats.shape[0]
    n_p, W_p = stats[:, 0], stats[:, 1]
    if estimator.name == "mean":
        return torch.full((P,), 1.0 / P, dtype=torch.float64, device=stats.device), {}
    if estimator.name == "node":
        raise ValueError("estimator 'node' weights seeds inside the loss; it has no worker scales")
    if estimator.name == "uniform":
        return n_p / n_p.sum(), {}
    if estimator.name == "reference":
        return W_p / n_p.clamp(min=1.0) / P, {}
    batch = W_p / W_p.sum()
    if estimator.name == "batch":
        return batch, {}
    if estimator.shrink == "auto":
        lam = _shrink_lambda_tensor(stats)
    else:
        lam = torch.full((), float(estimator.shrink), dtype=torch.float64, device=stats.device)
    return (1.0 - lam) * batch + lam * n_p / n_p.sum(), {"lambda": lam}


def worker_scales(estimator: Estimator, stats: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
    """float64 [P] worker scales s_p of the hook-based estimators (all but node).

    The ``node`` estimator has no per-worker scale (its weights live in the loss): asking for
    them is a ValueError.
    """
    scales, info = _worker_scales_tensor(estimator, stats)
    return scales, {k: float(v) for k, v in info.items()}
