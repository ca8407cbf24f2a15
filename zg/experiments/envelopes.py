"""zg.experiments.envelopes: how big the execution envelope must be, and what it costs (notebook 02).

Where it sits: before training, where the envelope that sizes every buffer is chosen
(:class:`zg.Envelope`). :func:`sample_counts` draws the exact per-block counts of many batches
(what an oracle would allocate); :func:`overflow_curve` profiles envelopes at several margins
and measures how often held-out batches overflow them and how much memory each takes.
Figures: :func:`zg.viz.count_distributions`, :func:`zg.viz.memory_per_hop`,
:func:`zg.viz.overflow_vs_margin`.

    held_out = ex.sample_counts(g, [10, 5], 256, num_batches=64, seed=1)
    curve = ex.overflow_curve(g, [10, 5], 256, margins=[0, 0.05, 0.1])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from .._checks import SEED_MAX, int_arg, seed_arg
from ..envelope import Envelope
from ..graph import Graph
from ..sampling import EnvelopeSampler, check_fanouts
from ._progress import progress, progress_bar

__all__ = ["sample_counts", "overflow_curve"]


def sample_counts(
    g: Graph,
    fanouts: Sequence[int],
    batch_size: int,
    *,
    num_batches: int = 64,
    seed: int = 1,
    epoch: int = 0,
    replace: bool = False,
    nodes: Any = None,
) -> torch.Tensor:
    """int64 [K, L]: the true source-node count of every block (input layer first) for
    ``K = num_batches`` full batches, drawn as an epoch draws them.

    The batches are sampled with the worst-case envelope, which never overflows, so every
    count is exact: these are the sizes an *oracle* would allocate. Use a different ``seed``
    from the one an envelope was profiled with to get held-out batches.
    """
    fanouts = check_fanouts(fanouts)
    num_batches = int_arg(num_batches, "num_batches", low=1)
    seed = seed_arg(seed)
    if nodes is None:
        nodes = (
            g.train_idx
            if g.train_idx is not None and g.train_idx.numel()
            else torch.arange(g.num_nodes)
        )
    nodes = torch.as_tensor(nodes, dtype=torch.int64).cpu()
    if nodes.numel() < batch_size:
        raise ValueError(
            f"only {nodes.numel()} nodes to draw seeds from, fewer than batch_size={batch_size}"
        )
    sampler = EnvelopeSampler(g, fanouts, batch_size, envelope=None, replace=replace, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    counts: list[torch.Tensor] = []
    with progress_bar(num_batches, desc="sampling batches", unit="batch") as bar:
        while len(counts) < num_batches:
            order = torch.randperm(nodes.numel(), generator=gen)
            for start in range(0, nodes.numel() - batch_size + 1, batch_size):
                counts.append(
                    sampler.sample(
                        nodes[order[start : start + batch_size]], epoch=epoch, batch=len(counts)
                    ).counts
                )
                bar.update(1)
                if len(counts) == num_batches:
                    break
    return torch.stack(counts).cpu()


def overflow_curve(
    g: Graph,
    fanouts: Sequence[int],
    batch_size: int,
    *,
    margins: Iterable[float] = (0.0, 0.02, 0.05, 0.1, 0.2),
    quantile: float = 0.99,
    profile_batches: int = 32,
    held_out: torch.Tensor | None = None,
    held_out_batches: int = 64,
    hidden_dim: int = 64,
    seed: int = 0,
) -> dict:
    """How often a profiled envelope overflows, and what it costs in memory, per margin.

    For each margin the envelope is profiled exactly as the engine profiles it
    (:meth:`zg.Envelope.profile` with ``profile_batches``, ``quantile``, ``margin``, ``seed``)
    and checked against ``held_out`` batch counts (default: :func:`sample_counts` with seed
    ``seed + 1``, 0 after the largest seed: batches the profile never saw). A batch overflows if any block's true count
    exceeds that block's envelope size, which is exactly when the engine would rewind.

    Returns lists aligned with ``margins``: ``sizes`` (per block), ``overflow_probability``
    (fraction of held-out batches that overflow), ``envelope_bytes`` (memory model total),
    plus ``oracle_mean_bytes``, ``oracle_max_bytes`` and ``worst_case_bytes`` (scalars),
    ``worst_case_sizes`` and the settings.
    """
    fanouts, seed = check_fanouts(fanouts), seed_arg(seed)
    margins = [float(m) for m in margins]
    if not margins:
        raise ValueError("margins is empty: give at least one margin")
    if held_out is None:
        held_out = sample_counts(
            g, fanouts, batch_size, num_batches=held_out_batches, seed=(seed + 1) % (SEED_MAX + 1)
        )
    held_out = torch.as_tensor(held_out, dtype=torch.int64)
    if held_out.dim() != 2 or held_out.shape[1] != len(fanouts):
        raise ValueError(
            f"held_out must be int [K, {len(fanouts)}], got shape {tuple(held_out.shape)}"
        )
    classes = max(g.num_classes, 1)
    out: dict[str, Any] = {
        "margins": margins,
        "quantile": float(quantile),
        "batch_size": batch_size,
        "fanouts": fanouts,
        "profile_batches": profile_batches,
        "held_out_batches": int(held_out.shape[0]),
        "sizes": [],
        "overflow_probability": [],
        "envelope_bytes": [],
    }
    for margin in progress(margins, desc="profiling margins", unit="margin"):
        env = Envelope.profile(
            g,
            fanouts,
            batch_size,
            num_batches=profile_batches,
            quantile=quantile,
            margin=margin,
            seed=seed,
        )
        sizes = torch.tensor(env.sizes, dtype=torch.int64)
        overflowed = (held_out > sizes).any(dim=1)  # [K]
        totals = env.memory_model(g.feat_dim, hidden_dim, classes, oracle_counts=held_out)["totals"]
        out["sizes"].append(list(env.sizes))
        out["overflow_probability"].append(float(overflowed.double().mean()))
        out["envelope_bytes"].append(int(totals["envelope"]))
    out["oracle_mean_bytes"] = int(totals["oracle_mean"])
    out["oracle_max_bytes"] = int(totals["oracle_max"])
    out["worst_case_bytes"] = int(totals["worst_case"])
    out["worst_case_sizes"] = Envelope.worst_case(g, fanouts, batch_size).sizes
    return out
