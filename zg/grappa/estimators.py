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

In the code, each estimator is a class (:class:`MeanEstimator`, :class:`NodeEstimator`,
:class:`BatchEstimator`, :class:`ShrinkEstimator`, :class:`UniformEstimator`,
:class:`ReferenceEstimator`) holding its own arithmetic: its worker scales (:meth:`Estimator.scales`),
its per-seed factors (:meth:`Estimator.factors`), whether it needs the all-gathered stats
(``needs_stats``) and its node weights (:meth:`Estimator.local_weights`: clipped coverage, or the
reference degree ratio). The registry (:data:`ESTIMATOR_CLASSES`, filled by
:func:`register_estimator`) maps a name to its class, and ``Estimator(name, weighting, floor,
shrink)`` builds the registered class, so nothing anywhere switches on an estimator's name.
Adding an estimator is one subclass of :class:`Estimator` and one :func:`register_estimator`
line (CONTRIBUTING.md, "Add an estimator").

The paper's two ablations, as options of :func:`zg.grappa.train`:

    unweighted aggregation  ``estimator="mean"``: the plain mean of the workers' batch-mean
                            gradients, no coverage correction.
    fixed partitions        ``repartition_every=None``:
                            the chunks of super-epoch 0 stay with their workers for the whole
                            run; every estimator works with it.
"""

from __future__ import annotations

import abc
import inspect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import torch

from .._checks import described as _described
from .._checks import returned_tensor, returned_values
from ._checks import choice_arg, real_arg
from .coverage import local_coverage

__all__ = [
    "Estimator",
    "MeanEstimator",
    "NodeEstimator",
    "BatchEstimator",
    "ShrinkEstimator",
    "UniformEstimator",
    "ReferenceEstimator",
    "ESTIMATORS",
    "ESTIMATOR_CLASSES",
    "WEIGHTINGS",
    "register_estimator",
    "unregister_estimator",
    "estimator_class",
    "batch_stats",
    "masked_batch_stats",
    "shrink_lambda",
    "worker_scales",
    "reference_weights",
    "local_weights",
    "check_scale_values",
    "check_factor_values",
]

WEIGHTINGS = ("inverse", "coverage")

# name -> class; filled by register_estimator (the built-ins at the end of this module).
_REGISTRY: dict[str, type[Estimator]] = {}
ESTIMATOR_CLASSES = MappingProxyType(_REGISTRY)  # read-only, live view of the registry


class _RegisteredNames(Sequence):
    """The registered estimator names, read from the registry at each use (a tuple-like
    sequence: ``in``, iteration, ``len``, indexing, ``+``), so a choice check made with it
    accepts an estimator registered after this module was imported."""

    def _names(self) -> tuple[str, ...]:
        return tuple(_REGISTRY)

    def __getitem__(self, index):
        return self._names()[index]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in _REGISTRY

    def __add__(self, other):
        return self._names() + tuple(other)

    def __radd__(self, other):
        return tuple(other) + self._names()

    def __eq__(self, other) -> bool:
        return isinstance(other, (tuple, _RegisteredNames)) and self._names() == tuple(other)

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


ESTIMATORS: Sequence[str] = _RegisteredNames()


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


def local_weights(
    estimator: Estimator, local: Any, hops: int, coverage: torch.Tensor | None = None
) -> torch.Tensor:
    """float [n_local]: the node weights ``w_v`` a worker's estimator uses on its local graph
    (a :class:`zg.grappa.LocalGraph`): :meth:`Estimator.local_weights` (the clipped coverage
    weights, or for "reference" the degree ratios of :func:`reference_weights`), checked where
    they come back: a float tensor of one weight per local node, on the local graph's device,
    finite and ``>= 0`` (read on the host: this runs once per local graph, not per step)."""
    if coverage is None:  # a subclass may define local_weights(local, hops) alone
        weights = estimator.local_weights(local, hops)
    else:
        weights = estimator.local_weights(local, hops, coverage=coverage)
    return returned_tensor(
        weights,
        f"{type(estimator).__name__}.local_weights()",
        shape=[local.graph.num_nodes],
        device=local.graph.device,
        requires_grad=False,
        values=True,
        nonnegative=True,
        named=("n_local",),
    )


def _check_info(info: dict, who: str, device: torch.device) -> None:
    """The info dict of :meth:`Estimator.scales` / :meth:`Estimator.worker_scale`: str keys,
    each value a 0-d float tensor on ``device`` (the history reads them with the epoch)."""
    for key, value in info.items():
        if not isinstance(key, str):
            raise TypeError(f"{who} returned info with key {_described(key)}; expected str keys")
        returned_tensor(value, f"{who} info[{key!r}]", shape=[], device=device)


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


# ----------------------------------------------------------------------------- the classes


@dataclass(frozen=True, init=False)
class Estimator(abc.ABC):
    """One way to combine the workers' gradients (see the module docstring for the formulas):
    the base class of every estimator, and the factory that builds one by name.

    ``Estimator(name, weighting, floor, shrink)`` returns an instance of the class registered
    under ``name`` (:func:`register_estimator`); ``BatchEstimator(weighting=...)`` builds one
    directly (its ``name`` argument, if given, must be its own).

    Args:
        name: a registered name, :data:`ESTIMATORS` ("mean" | "node" | "batch" | "shrink" |
            "uniform" | "reference" and any registered later); default "batch".
        weighting: "inverse" (w = 1 / c) | "coverage" (w = c), both clipped at ``floor``.
        floor: lower clip of the coverage, in (0, 1].
        shrink: for "shrink": a fixed lambda in [0, 1], or "auto".

    A subclass sets ``name`` (its registry key) and defines :meth:`scales`; it may set
    ``needs_stats = False`` (then it overrides :meth:`worker_scale`, which must not read the
    stats) and override :meth:`factors`, :meth:`worker_scale`, :meth:`node_weights` and
    :meth:`local_weights`. What these return is checked where it comes back, by the one check
    of plug-in results (:func:`zg._checks.returned_tensor`, whose docstring is the contract),
    with one error naming the class and the method: kind, shape, dtype, device and autograd at
    every step (:meth:`combine_device`, :meth:`checked_scales`; the info dicts too), values
    (finite, none negative) before a run starts (:meth:`check_outputs`, from
    :meth:`zg.grappa.TrainConfig.validated`), the local weights' values where a worker builds
    its local graph (:func:`local_weights`), and inside the workers the scales' and the
    factors' values at every epoch's exchange (:func:`check_scale_values`,
    :func:`check_factor_values`: the step folds their :func:`zg._checks.worst_value` into the
    numbers the exchange carries, so no step reads the device).
    """

    name: ClassVar[str] = ""  # the registry key: set by each subclass
    needs_stats: ClassVar[bool] = True  # all_gather the (n_p, W_p, Q_p) stats every iteration?

    weighting: str
    floor: float
    shrink: float | str

    def __new__(cls, name: str | None = None, *args: Any, **kwargs: Any):
        if cls is Estimator:  # the factory: the class registered under ``name``
            cls = estimator_class("batch" if name is None else name)
        return super().__new__(cls)

    def __init__(
        self,
        name: str | None = None,
        weighting: str = "inverse",
        floor: float = 0.05,
        shrink: float | str = "auto",
    ):
        if name is not None and name != self.name:
            choice_arg(name, "estimator", ESTIMATORS)
            raise ValueError(
                f"estimator {name!r} given to {type(self).__name__}, which is estimator "
                f"{self.name!r}; use Estimator({name!r}, ...)"
            )
        choice_arg(weighting, "weighting", WEIGHTINGS)
        real_arg(floor, "coverage_floor", low=0.0, high=1.0, low_open=True)
        if isinstance(shrink, str):
            if shrink != "auto":
                raise ValueError(f"shrink must be a number in [0, 1] or 'auto', got {shrink!r}")
        else:
            real_arg(shrink, "shrink", low=0.0, high=1.0)
        object.__setattr__(self, "weighting", weighting)
        object.__setattr__(self, "floor", floor)
        object.__setattr__(self, "shrink", shrink)

    # ------------------------------------------------------------------ node weights w_v

    def node_weights(self, coverage: torch.Tensor) -> torch.Tensor:
        """float32 [B] weights w_v of seeds with coverage ``coverage`` [B]: the coverage clipped
        to [floor, 1], inverted for ``weighting="inverse"``."""
        c = coverage.clamp(min=self.floor, max=1.0)
        return 1.0 / c if self.weighting == "inverse" else c

    def local_weights(
        self, local: Any, hops: int, coverage: torch.Tensor | None = None
    ) -> torch.Tensor:
        """float32 [n_local]: the weights of every node of a worker's local graph (a
        :class:`zg.grappa.LocalGraph`), from its L-hop coverage (``coverage``, float [n_local],
        if the caller has it already; else :func:`zg.grappa.local_coverage` with ``hops``)."""
        if coverage is None:
            coverage = local_coverage(local, hops)
        return self.node_weights(coverage)

    # ------------------------------------------------------------------ factors and scales

    @abc.abstractmethod
    def scales(self, stats: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Every worker's scale s_p from all workers' stats (float64 [P, 3], rows
        ``(n_p, W_p, Q_p)``): (float64 [P] on the stats' device, info {name: float64 []} for
        the history, e.g. ``{"lambda": ...}``). No host read."""

    def factors(
        self, weights: torch.Tensor, valid: torch.Tensor, stats: torch.Tensor | None
    ) -> torch.Tensor:
        """float32 [B]: the per-seed loss factors f_v of a padded batch (weights float [B],
        valid bool [B]), 0 on padding rows. Default: the batch mean, 1 / n_p on every real
        row (a class that keeps it has :attr:`batch_mean_factors`)."""
        valid_f = valid.to(torch.float32)
        return valid_f / valid_f.sum().clamp(min=1.0)

    def worker_scale(
        self,
        weights: torch.Tensor,
        valid: torch.Tensor,
        rank: int,
        num_workers: int,
        stats: torch.Tensor | None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Worker ``rank``'s scale s_p as a float64 [] tensor, and the info of :meth:`scales`.
        Default: row ``rank`` of :meth:`scales`; an estimator with ``needs_stats = False`` gets
        ``stats=None`` and overrides this with its local arithmetic."""
        scales, info = self.checked_scales(stats.to(torch.float64), values=False)
        return scales[rank], info

    def checked_scales(
        self, stats: torch.Tensor, *, values: bool = True
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`scales` with what it returned checked where it comes back: a pair (a 1-D float
        tensor of length P, a dict), else a TypeError naming ``<Class>.scales()``. ``values``
        (a host read, so not inside a training step): its values too, finite and ``>= 0``
        (a negative scale would turn the worker's update into gradient ascent), else a
        ValueError naming the method."""
        who = f"{type(self).__name__}.scales()"
        P = stats.shape[0]
        result = self.scales(stats)
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
            raise TypeError(
                f"{who} returned {_described(result)}; expected a pair (scales, info): scales a "
                f"1-D float tensor of length P={P} on {stats.device} with finite values >= 0, "
                "info a dict {name: 0-d float tensor}"
            )
        scales, info = result
        returned_tensor(
            scales,
            who,
            shape=[P],
            device=stats.device,
            requires_grad=False,
            values=values,
            nonnegative=True,
            named=("P",),
        )
        _check_info(info, who, stats.device)
        return scales, info

    @property
    def batch_mean_factors(self) -> bool:
        """Whether the factors are the batch mean 1 / n_p (the class keeps :meth:`factors`), so
        that G = sum_p s_p * mean-gradient_p (what :func:`zg.grappa.gradient_error` uses to
        share one backward per worker among such estimators)."""
        return type(self).factors is Estimator.factors

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
            stats: float64 [P, 3] every worker's :func:`masked_batch_stats` (only when
                ``needs_stats``: not for ``mean`` and ``reference``).
        Returns:
            (factors float32 [B], 0 on padding rows; the worker scale as a float64 [] tensor;
            info {"lambda": float64 []} for ``shrink``).
        """
        if self.needs_stats and (stats is None or stats.shape != (num_workers, 3)):
            raise ValueError(
                f"estimator {self.name!r} needs stats of shape [{num_workers}, 3], "
                f"got {None if stats is None else tuple(stats.shape)}"
            )
        name, rows, device = type(self).__name__, weights.shape[0], weights.device
        factors = self.factors(weights, valid, stats)
        returned_tensor(
            factors, f"{name}.factors()", shape=[rows], device=device, requires_grad=False
        )
        result = self.worker_scale(weights, valid, rank, num_workers, stats)
        who = f"{name}.worker_scale()"
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
            raise TypeError(
                f"{who} returned {_described(result)}; expected a pair (scale, info): scale a "
                f"0-D float tensor on {device}, info a dict {{name: 0-d float tensor}}"
            )
        scale, info = result
        returned_tensor(scale, who, shape=[], device=device, requires_grad=False)
        _check_info(info, who, device)
        return factors, scale, info

    def check_outputs(self, num_workers: int) -> None:
        """Run this estimator's arithmetic once on made-up batches of ``num_workers`` workers,
        on the host, and check every result where it comes back (:meth:`checked_scales`, the
        factors, the worker scale): the shape and dtype a training step needs, finite values,
        none negative. A TypeError / ValueError names the class and the method, before any
        worker starts (:meth:`zg.grappa.TrainConfig.validated` calls it). Inside the workers the
        shapes are checked at every step and the scales' values at every epoch's exchange
        (:func:`check_scale_values`)."""
        name = type(self).__name__
        gen = torch.Generator().manual_seed(0)
        # Seven made-up batches of unequal sizes (one of a single seed); worker p holds batch
        # p % 7, so any number of workers costs the same few batches.
        pool = []
        for n in range(1, 8):
            c = torch.rand(n, generator=gen).clamp(min=self.floor, max=1.0)
            pool.append(1.0 / c if self.weighting == "inverse" else c)
        held = torch.arange(num_workers) % len(pool)
        stats = torch.stack([batch_stats(w) for w in pool]).index_select(0, held)  # [P, 3]
        if self.needs_stats and type(self).worker_scale is Estimator.worker_scale:
            self.checked_scales(stats, values=True)
        # The first and last few workers (all of them when they are few).
        ranks = sorted(
            set(range(min(num_workers, 4))) | set(range(max(num_workers - 4, 0), num_workers))
        )
        for rank in ranks:
            w = pool[rank % len(pool)]
            valid = torch.ones(w.shape, dtype=torch.bool)
            factors, scale, _ = self.combine_device(
                w, valid, rank, num_workers, stats if self.needs_stats else None
            )
            returned_tensor(
                factors, f"{name}.factors()", shape=[w.shape[0]], values=True, nonnegative=True
            )
            returned_tensor(scale, scale_source(self), shape=[], values=True, nonnegative=True)

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


# ----------------------------------------------------------------------------- the registry


def estimator_class(name: Any) -> type[Estimator]:
    """The class registered under ``name``; TypeError / ValueError naming ``estimator`` and
    the registered names otherwise."""
    return _REGISTRY[choice_arg(name, "estimator", ESTIMATORS)]


def register_estimator(cls: type[Estimator]) -> type[Estimator]:
    """Register an estimator class under its ``name`` (usable as a class decorator); returns
    the class. After it, ``Estimator(name, ...)``, ``TrainConfig(estimator=name)``,
    ``grappa.train(g, estimator=name)`` and ``gradient_error(..., estimator=name)`` accept it.

    The class must subclass :class:`Estimator`, set a non-empty str ``name`` and a bool
    ``needs_stats``, and define every abstract method (:meth:`Estimator.scales`); a name
    registered already by another class is refused (registering the same class again changes
    nothing).

    Worker processes: ``grappa.train`` starts its workers with the "spawn" start method, which
    does not copy the parent's registry. The run's :class:`zg.grappa.TrainConfig` carries the
    class of an estimator registered outside the kit to the workers *by reference* (module and
    qualified name, as pickle does), and each worker registers it on arrival. So the class must
    be defined at the top level of a module that the workers can import (a module on the
    parent's ``sys.path``, or the ``__main__`` script run under ``if __name__ == "__main__":``),
    not inside a function or a notebook cell. ``python -m zg.grappa`` (torchrun) starts from a
    JSON config: there the estimator's module must be imported by the script that runs it.
    """
    if not (inspect.isclass(cls) and issubclass(cls, Estimator)):
        raise TypeError(f"register_estimator takes a subclass of zg.grappa.Estimator, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"estimator class {cls.__qualname__} must set name = '<its name>'")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise TypeError(
            f"estimator class {cls.__qualname__} ({name!r}) lacks the required method(s) "
            f"{missing}: define them (see zg.grappa.Estimator)"
        )
    if not isinstance(cls.needs_stats, bool):
        raise TypeError(
            f"estimator class {cls.__qualname__}: needs_stats must be a bool, got "
            f"{cls.needs_stats!r}"
        )
    held = _REGISTRY.get(name)
    if held is not None and held is not cls:
        raise ValueError(
            f"estimator {name!r} is registered already (by {held.__module__}."
            f"{held.__qualname__}); choose another name"
        )
    _REGISTRY[name] = cls
    return cls


def unregister_estimator(name: str) -> None:
    """Remove an estimator registered outside the kit (the built-ins stay)."""
    estimator_class(name)
    if name in _BUILTIN:
        raise ValueError(f"estimator {name!r} is built into the kit; it cannot be unregistered")
    del _REGISTRY[name]


def _travelling_class(name: Any) -> type[Estimator] | None:
    """The class a pickled :class:`zg.grappa.TrainConfig` carries to its workers: the one
    registered under ``name`` when it is not built into the kit (the built-ins are registered in
    every process), else None."""
    if isinstance(name, str) and name in _REGISTRY and name not in _BUILTIN:
        return _REGISTRY[name]
    return None


# ----------------------------------------------------------------------------- the estimators


class MeanEstimator(Estimator):
    """``mean``: f_v = 1 / n_p, s_p = 1 / P (plain DDP averaging; sends no scalars)."""

    name = "mean"
    needs_stats = False

    def scales(self, stats):
        P = stats.shape[0]
        return torch.full((P,), 1.0 / P, dtype=torch.float64, device=stats.device), {}

    def worker_scale(self, weights, valid, rank, num_workers, stats):
        return torch.full((), 1.0 / num_workers, dtype=torch.float64, device=weights.device), {}


class NodeEstimator(Estimator):
    """``node``: f_v = w_v / W, s_p = 1 (the weights live in the loss; no worker scales)."""

    name = "node"

    def scales(self, stats):
        raise ValueError("estimator 'node' weights seeds inside the loss; it has no worker scales")

    def factors(self, weights, valid, stats):
        total = stats[:, 1].sum()
        valid_f = valid.to(torch.float32)
        return (weights.to(torch.float64) * valid_f.to(torch.float64) / total).to(torch.float32)

    def worker_scale(self, weights, valid, rank, num_workers, stats):
        return torch.ones((), dtype=torch.float64, device=weights.device), {}


class BatchEstimator(Estimator):
    """``batch``: f_v = 1 / n_p, s_p = W_p / W (the least-squares batch weight)."""

    name = "batch"

    def scales(self, stats):
        W_p = stats[:, 1]
        return W_p / W_p.sum(), {}


class ShrinkEstimator(Estimator):
    """``shrink``: f_v = 1 / n_p, s_p = (1 - lam) W_p / W + lam n_p / n (``batch`` shrunk
    toward uniform; lam fixed or "auto", the James-Stein intensity)."""

    name = "shrink"

    def lam(self, stats: torch.Tensor) -> float:
        """The shrinkage lambda in use."""
        return shrink_lambda(stats) if self.shrink == "auto" else float(self.shrink)

    def scales(self, stats):
        n_p, W_p = stats[:, 0], stats[:, 1]
        batch = W_p / W_p.sum()
        if self.shrink == "auto":
            lam = _shrink_lambda_tensor(stats)
        else:
            lam = torch.full((), float(self.shrink), dtype=torch.float64, device=stats.device)
        return (1.0 - lam) * batch + lam * n_p / n_p.sum(), {"lambda": lam}


class UniformEstimator(Estimator):
    """``uniform``: f_v = 1 / n_p, s_p = n_p / n (every seed 1 / n; ``shrink`` at lam = 1)."""

    name = "uniform"

    def scales(self, stats):
        n_p = stats[:, 0]
        return n_p / n_p.sum(), {}


class ReferenceEstimator(Estimator):
    """``reference``: the paper's public code. f_v = 1 / n_p, s_p = mean_v(r_v) / P with the
    degree ratios r_v = min(1, d_loc(v) / (d(v) + 1)) as node weights (not coverage)."""

    name = "reference"
    needs_stats = False

    def node_weights(self, coverage):
        raise ValueError(
            "estimator 'reference' weights seeds by min(1, d_local / (d_global + 1)), "
            "not by coverage; use zg.grappa.estimators.reference_weights or local_weights"
        )

    def local_weights(self, local, hops, coverage=None):
        """The degree ratios of :func:`reference_weights` (``hops`` and ``coverage`` unused)."""
        return reference_weights(
            local.graph.in_degrees(), local.global_in_degree.to(local.graph.device)
        )

    def scales(self, stats):
        n_p, W_p = stats[:, 0], stats[:, 1]
        return W_p / n_p.clamp(min=1.0) / stats.shape[0], {}

    def worker_scale(self, weights, valid, rank, num_workers, stats):
        valid64 = valid.to(torch.float64)
        mean_r = (weights.to(torch.float64) * valid64).sum() / valid64.sum().clamp(min=1.0)
        return mean_r / num_workers, {}


for _cls in (
    MeanEstimator,
    NodeEstimator,
    BatchEstimator,
    ShrinkEstimator,
    UniformEstimator,
    ReferenceEstimator,
):
    register_estimator(_cls)
_BUILTIN = frozenset(_REGISTRY)


def scale_source(estimator: Estimator) -> str:
    """The method a worker's scale comes from: ``<Class>.scales()`` unless the class overrides
    :meth:`Estimator.worker_scale`."""
    name = type(estimator).__name__
    if type(estimator).worker_scale is Estimator.worker_scale:
        return f"{name}.scales()"
    return f"{name}.worker_scale()"


def check_scale_values(estimator: Estimator, low: float, high: float, where: str) -> None:
    """The smallest and largest worker scale a worker used over some batches (host numbers,
    read where the epoch's numbers are read anyway): a ValueError naming the estimator's
    method when one is not finite or is negative (NaN included: call it only where the
    estimator ran), by :func:`zg._checks.returned_values`. ``where`` says which worker and
    epoch."""
    worst = low if (not math.isfinite(low) or low < 0) else high
    returned_values(
        scale_source(estimator),
        worst,
        where,
        "finite values >= 0 (a negative scale turns the update into gradient ascent)",
    )


def check_factor_values(estimator: Estimator, worst: float, where: str) -> None:
    """The :func:`zg._checks.worst_value` of the per-seed factors a worker's estimator gave over
    some batches (a host number, read with the epoch's others): a ValueError naming
    ``<Class>.factors()`` when it is not finite or is negative (call it only where the
    estimator ran)."""
    returned_values(
        f"{type(estimator).__name__}.factors()",
        worst,
        where,
        "finite values >= 0 (a negative factor turns its seed's update into gradient ascent)",
    )


def _worker_scales_tensor(estimator: Estimator, stats: torch.Tensor):
    """float64 [P] worker scales on the stats' device, and {"lambda": float64 []} for shrink:
    the estimator's :meth:`Estimator.scales` on the stats as float64, checked
    (:meth:`Estimator.checked_scales`)."""
    return estimator.checked_scales(stats.to(torch.float64))


def worker_scales(estimator: Estimator, stats: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
    """float64 [P] worker scales s_p of the hook-based estimators (all but node).

    The ``node`` estimator has no per-worker scale (its weights live in the loss): asking for
    them is a ValueError.
    """
    scales, info = _worker_scales_tensor(estimator, stats)
    return scales, {k: float(v) for k, v in info.items()}
