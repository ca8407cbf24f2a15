"""Execution envelopes: how big every buffer of a fixed-shape iteration is, and what it costs.

Where it sits: the :class:`~zg.sampling.EnvelopeSampler` allocates its per-hop buffers from an
Envelope; the engine grows the envelope when a batch overflows it; notebooks and benchmarks
compare its memory with the worst case and the oracle.

An envelope holds one size per block, input layer first, aligned with ``fanouts``: ``sizes[i]``
is the number of source rows of block ``i`` (the distinct nodes that layer reads). Hop by hop
from the seeds outward, a block with ``R`` destination rows and fanout ``k`` can see at most
``R * (k + 1)`` distinct nodes (itself plus ``k`` neighbours per row) and never more than the
``N`` nodes of the graph.

Sizing policies:

* ``Envelope.worst_case``: ``E = max(R, min(N, R * (min(k, D) + 1)))`` per hop, ``D`` the
  graph's largest in-degree (a row never has more distinct neighbours than ``min(k, D)``, with
  or without replacement; the samplers clamp larger fanouts, see
  :func:`zg.sampling.effective_fanouts`). Never overflows; often several times what a batch
  really needs.
* ``Envelope.profile``: sample ``num_batches`` real batches (default 32, seeds drawn from the
  training nodes as in an epoch), take the ``quantile`` (default 0.99) of each hop's true count
  and add a ``margin`` (default 5 %), capped by the worst case. Tight, may rarely overflow;
  the engine then grows it (:meth:`Envelope.grow`) and replays the batch.
* ``Envelope(sizes=[...])``: explicit sizes.
* the *oracle* is not an envelope: it allocates each batch's exact size (what dynamic
  allocation does). :meth:`Envelope.memory_model` reports it as the memory ideal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ._checks import (
    batch_size_arg,
    bool_arg,
    choice_arg,
    fanouts_arg,
    int_arg,
    memory_arg,
    node_ids_arg,
    positive_ints_arg,
    real_arg,
    seed_arg,
)
from .graph import MAX_NODES, graph_arg
from .rng import batch_key, device_scalar
from .sampling import EnvelopeSampler, effective_fanouts, max_in_degree, worst_case_sizes

__all__ = ["Envelope", "worst_case_sizes", "block_bytes"]

INDEX_BYTES = 8  # int64 ids
MASK_BYTES = 1  # bool
VALUE_BYTES = 4  # float32

# Batches Envelope.profile draws at most: its quantiles settle within a few thousand, and it
# keeps every batch's counts, so more is a typo (num_batches=1e12 would sample until killed).
MAX_PROFILE_BATCHES = 100_000


def block_bytes(
    src_rows: Sequence[int],
    dst_rows: Sequence[int],
    fanouts: Sequence[int],
    feat_dim: int,
    hidden_dim: int,
    num_classes: int,
) -> list[dict[str, int]]:
    """Bytes each block's buffers take, input layer first.

    Per block ``i`` with ``S`` source rows, ``D`` destination rows and fanout ``k``:
    ``index`` = neighbour slots and mask ``D * k * (8 + 1)`` plus source ids ``S * 8``;
    ``features`` = the layer's input rows ``S * in_dim * 4`` (``in_dim`` is the feature width for
    the input layer, the hidden width after it); ``activations`` = its output ``D * out_dim * 4``.
    """
    out = []
    num_layers = len(fanouts)
    for i, k in enumerate(fanouts):
        s, d = int(src_rows[i]), int(dst_rows[i])
        in_dim = feat_dim if i == 0 else hidden_dim
        out_dim = num_classes if i == num_layers - 1 else hidden_dim
        row = {
            "index": d * k * (INDEX_BYTES + MASK_BYTES) + s * INDEX_BYTES,
            "features": s * in_dim * VALUE_BYTES,
            "activations": d * out_dim * VALUE_BYTES,
        }
        row["total"] = sum(row.values())
        out.append(row)
    return out


def _profile_fits(g, fanouts, batch_size: int, replace: bool, max_degree: int) -> None:
    """Refuse, before a batch is drawn, a profile whose batches cannot fit: each hop's
    worst-case neighbour slots and ids (:func:`block_bytes`' index bytes, sized by the graph's
    node count and largest in-degree, sizes read from data, and the fanouts), three times over
    for the sampler's sort and compaction temporaries."""
    slots = effective_fanouts(fanouts, max_degree, replace)
    worst = worst_case_sizes(g.num_nodes, fanouts, batch_size, max_degree)
    blocks = block_bytes(worst, worst[1:] + [batch_size], slots, 0, 1, 1)
    memory_arg(
        3 * sum(b["index"] for b in blocks),
        f"sampling fanouts {list(fanouts)} at batch_size={batch_size} on a graph of "
        f"{g.num_nodes} nodes whose largest in-degree is {max_degree} (worst-case source "
        f"rows {worst})",
        g.device if g.device.type == "cuda" else None,
    )


class Envelope:
    """Per-block buffer sizes for the fixed-shape pipeline (input layer first).

    Args:
        sizes: source rows of each block, input layer first.
        policy: a label, one of :attr:`POLICIES` ("explicit", "worst_case", "profiled",
            "grown", "checkpoint").
        fanouts, batch_size, num_nodes: what the envelope was sized for (optional for explicit
            sizes; needed by :meth:`grow` and :meth:`memory_model`).
        observed: int64 [K, L] true counts seen while profiling (the oracle's sizes).
        max_degree: the graph's largest in-degree (optional): bounds the worst case and the
            neighbour slots of fanouts above it (:func:`zg.sampling.effective_fanouts`).
    """

    # How an envelope's sizes were chosen: given, the worst case, a profile, grown after an
    # overflow, or read back from a checkpoint (zg.checkpoint).
    POLICIES = ("explicit", "worst_case", "profiled", "grown", "checkpoint")

    def __init__(
        self,
        sizes: Sequence[int],
        policy: str = "explicit",
        *,
        fanouts: Sequence[int] | None = None,
        batch_size: int | None = None,
        num_nodes: int | None = None,
        observed: torch.Tensor | None = None,
        settings: dict | None = None,
        max_degree: int | None = None,
    ):
        sizes = positive_ints_arg(sizes, "sizes")
        for i, size in enumerate(sizes):  # a block never holds more rows than a graph's nodes
            int_arg(size, f"sizes[{i}]", low=1, high=MAX_NODES)
        policy = choice_arg(policy, "policy", self.POLICIES)
        fanouts = None if fanouts is None else fanouts_arg(fanouts, "fanouts")
        batch_size = None if batch_size is None else int_arg(batch_size, "batch_size", low=1)
        num_nodes = None if num_nodes is None else int_arg(num_nodes, "num_nodes", low=1)
        max_degree = None if max_degree is None else int_arg(max_degree, "max_degree", low=0)
        if batch_size is not None and num_nodes is not None:
            batch_size_arg(batch_size, num_nodes)
        if observed is not None and not (
            isinstance(observed, torch.Tensor)
            and observed.dim() == 2
            and observed.shape[1] == len(sizes)
            and not observed.is_floating_point()
        ):
            got = (
                f"{observed.dtype} {tuple(observed.shape)}"
                if isinstance(observed, torch.Tensor)
                else type(observed).__name__
            )
            raise TypeError(
                f"observed must be None or an integer tensor [K, {len(sizes)}] "
                f"(one row of counts per profiled batch), got {got}"
            )
        if settings is not None and not isinstance(settings, dict):
            raise TypeError(f"settings must be a dict or None, got {type(settings).__name__}")
        if fanouts is not None and len(fanouts) != len(sizes):
            raise ValueError(
                f"sizes has {len(sizes)} entries but fanouts has {len(fanouts)}; "
                "give one size per layer"
            )
        self._set(sizes, policy, fanouts, batch_size, num_nodes, observed, settings, max_degree)

    def _set(self, sizes, policy, fanouts, batch_size, num_nodes, observed, settings, max_degree):
        """Assign values already checked (by ``__init__``, or by the code that computed them)."""
        self.sizes, self.policy, self.fanouts = list(sizes), policy, fanouts
        self.batch_size, self.num_nodes, self.max_degree = batch_size, num_nodes, max_degree
        self.observed, self.settings = observed, dict(settings or {})

    @classmethod
    def _made(
        cls,
        sizes,
        policy,
        *,
        fanouts=None,
        batch_size=None,
        num_nodes=None,
        observed=None,
        settings=None,
        max_degree=None,
    ) -> Envelope:
        """An Envelope of values this module computed or its caller checked (no re-check)."""
        self = cls.__new__(cls)
        self._set(sizes, policy, fanouts, batch_size, num_nodes, observed, settings, max_degree)
        return self

    # ------------------------------------------------------------------------- policies

    @classmethod
    def worst_case(cls, g, fanouts: Sequence[int], batch_size: int) -> Envelope:
        """``max(R, min(N, R * (min(k, D) + 1)))`` rows per hop: can never overflow."""

        g = graph_arg(g)
        fanouts = fanouts_arg(fanouts, "fanouts")
        batch_size = batch_size_arg(batch_size, g.num_nodes)
        return cls._worst_case(g, fanouts, batch_size, max_in_degree(g))

    @classmethod
    def _worst_case(cls, g, fanouts: list[int], batch_size: int, max_degree: int) -> Envelope:
        """:meth:`worst_case` of checked values."""
        return cls._made(
            worst_case_sizes(g.num_nodes, fanouts, batch_size, max_degree),
            "worst_case",
            fanouts=fanouts,
            batch_size=batch_size,
            num_nodes=g.num_nodes,
            max_degree=max_degree,
        )

    @classmethod
    def profile(
        cls,
        g,
        fanouts: Sequence[int],
        batch_size: int,
        *,
        num_batches: int = 32,
        quantile: float = 0.99,
        margin: float = 0.05,
        replace: bool = False,
        seed: int = 0,
        nodes: Any = None,
    ) -> Envelope:
        """Size the envelope from ``num_batches`` real batches.

        Seeds are drawn as an epoch draws them: a seeded permutation of ``nodes`` (default: the
        training nodes, or all nodes if the graph has no split; else a non-empty 1-d list of
        distinct node ids) cut into ``batch_size`` chunks.
        Each hop's size is ``ceil(quantile(counts) * (1 + margin))``, at least the hop's rows
        and at most the worst case. Profiling reads the counts on the host once, at the end;
        it happens before training, not inside the iteration.
        """

        g = graph_arg(g)
        fanouts = fanouts_arg(fanouts, "fanouts")
        batch_size = batch_size_arg(batch_size, g.num_nodes)
        num_batches = int_arg(num_batches, "num_batches", low=1, high=MAX_PROFILE_BATCHES)
        quantile = real_arg(quantile, "quantile", low=0.0, high=1.0, low_open=True)
        margin = real_arg(margin, "margin", low=0.0, high=10.0)
        replace = bool_arg(replace, "replace")
        seed = seed_arg(seed)
        if nodes is None:
            nodes = (
                g.train_idx
                if g.train_idx is not None and g.train_idx.numel()
                else torch.arange(g.num_nodes)
            )
        if isinstance(nodes, torch.Tensor):
            nodes = nodes.cpu()  # validated on the host, where reading ids is free
        nodes = node_ids_arg(nodes, "nodes", g.num_nodes, device=torch.device("cpu"))
        settings = {"num_batches": num_batches, "quantile": quantile, "margin": margin}
        return cls._profiled(
            g, fanouts, batch_size, replace, seed, nodes, max_in_degree(g), **settings
        )

    @classmethod
    def _profiled(
        cls,
        g,
        fanouts,
        batch_size,
        replace,
        seed,
        nodes,
        max_degree,
        *,
        num_batches=32,
        quantile=0.99,
        margin=0.05,
    ) -> Envelope:
        """:meth:`profile` of checked values (``nodes``: host int64 ids, checked)."""
        _profile_fits(g, fanouts, batch_size, replace, max_degree)
        sampler = EnvelopeSampler._checked(
            g, fanouts, batch_size, None, replace, seed, "torch", max_degree
        )
        gen = torch.Generator().manual_seed(seed)
        counts, drawn = [], 0
        order = torch.randperm(nodes.numel(), generator=gen)
        while drawn < num_batches:
            for b in range(0, nodes.numel(), batch_size):
                seeds = nodes[order[b : b + batch_size]]
                if seeds.numel() < batch_size and nodes.numel() >= batch_size:
                    continue  # profile full batches only; a short last batch needs less
                # Profiling draws from its own stream (epoch -1), never an epoch's batches.
                key = device_scalar(batch_key(seed, -1, drawn), g.device)
                # The nodes were checked once (a subset of them needs no check per batch).
                counts.append(sampler._sample(seeds.to(g.device), key).counts)
                drawn += 1
                if drawn == num_batches:
                    break
            order = torch.randperm(nodes.numel(), generator=gen)
        observed = torch.stack(counts).cpu()  # [K, L]
        worst = worst_case_sizes(g.num_nodes, fanouts, batch_size, max_degree)
        q = torch.quantile(observed.double(), quantile, dim=0)  # [L]
        wanted = [math.ceil(float(v) * (1 + margin)) for v in q]
        sizes = cls._feasible(wanted, worst, batch_size)
        return cls._made(
            sizes,
            "profiled",
            fanouts=fanouts,
            batch_size=batch_size,
            num_nodes=g.num_nodes,
            observed=observed,
            max_degree=max_degree,
            settings={
                "num_batches": num_batches,
                "quantile": quantile,
                "margin": margin,
                "seed": seed,
                "replace": replace,
            },
        )

    @staticmethod
    def _feasible(wanted: Sequence[int], worst: Sequence[int], batch_size: int) -> list[int]:
        """Clamp to the worst case and make each hop hold at least its destination rows."""
        sizes = [min(int(w), int(c)) for w, c in zip(wanted, worst)]
        rows = batch_size
        for i in reversed(range(len(sizes))):  # seeds outward
            sizes[i] = max(sizes[i], rows)
            rows = sizes[i]
        return sizes

    @classmethod
    def resolve(
        cls,
        envelope: Any,
        g,
        fanouts: Sequence[int],
        batch_size: int,
        *,
        replace: bool = False,
        seed: int = 0,
        nodes: Any = None,
        quantile: float = 0.99,
        margin: float = 0.05,
    ) -> Envelope:
        """The one place an ``envelope`` argument becomes an :class:`Envelope` for a sampler.

        ``envelope``: "profiled" (:meth:`profile` with ``quantile``, ``margin``, ``replace``,
        ``seed`` and ``nodes``), "worst_case" (:meth:`worst_case`), or an Envelope. An Envelope
        of bare sizes (or one sized for another batch size) is told what it is for, so it can
        grow after an overflow; then it is checked against ``fanouts``, ``batch_size`` and the
        graph.
        """
        if isinstance(envelope, str):
            if envelope == "profiled":
                return cls.profile(
                    g,
                    fanouts,
                    batch_size,
                    replace=replace,
                    seed=seed,
                    nodes=nodes,
                    quantile=quantile,
                    margin=margin,
                )
            if envelope == "worst_case":
                return cls.worst_case(g, fanouts, batch_size)
            raise ValueError(
                f"envelope must be 'profiled', 'worst_case' or a zg.Envelope, got {envelope!r}"
            )
        if not isinstance(envelope, Envelope):
            raise TypeError(
                f"envelope must be 'profiled', 'worst_case' or a zg.Envelope, got "
                f"{type(envelope).__name__}"
            )
        fanouts = fanouts_arg(fanouts, "fanouts")
        if len(envelope.sizes) != len(fanouts):
            raise ValueError(
                f"envelope has {len(envelope.sizes)} sizes but fanouts has "
                f"{len(fanouts)} entries; give one envelope size per layer"
            )
        if envelope.fanouts is None or envelope.batch_size != batch_size:
            envelope = cls(
                envelope.sizes,
                envelope.policy,
                fanouts=fanouts,
                batch_size=batch_size,
                num_nodes=g.num_nodes,
                observed=envelope.observed,
                settings=envelope.settings,
                max_degree=max_in_degree(g),
            )
        envelope.check(fanouts, batch_size, g.num_nodes)
        return envelope

    @classmethod
    def _resolved(cls, envelope, g, fanouts, batch_size, replace, seed, nodes, max_degree):
        """:meth:`resolve` of checked values (what the Engine calls once it has checked every
        argument, ``envelope`` included: "profiled", "worst_case" or an Envelope that fits)."""
        if isinstance(envelope, str) and envelope == "profiled":
            return cls._profiled(g, fanouts, batch_size, replace, seed, nodes, max_degree)
        if isinstance(envelope, str):  # "worst_case"
            return cls._worst_case(g, fanouts, batch_size, max_degree)
        if envelope.fanouts is None or envelope.batch_size != batch_size:
            envelope = cls._made(
                envelope.sizes,
                envelope.policy,
                fanouts=fanouts,
                batch_size=batch_size,
                num_nodes=g.num_nodes,
                observed=envelope.observed,
                settings=envelope.settings,
                max_degree=max_degree,
            )
        return envelope

    def grow(self, factor: float = 1.5, observed: Sequence[int] | None = None) -> Envelope:
        """The envelope to use after an overflow.

        Each size becomes ``max(ceil(size * factor), ceil(observed * (1 + margin)))`` (``observed``
        = the overflowing batch's true counts when known), capped by the worst case, so repeated
        overflows reach the never-overflowing worst case in a few steps.
        """
        factor = real_arg(factor, "factor")
        if not factor > 1.0:
            raise ValueError(f"factor must be > 1, got {factor}")
        if observed is not None:
            if isinstance(observed, (str, bytes, dict)) or not isinstance(observed, (list, tuple)):
                raise TypeError(
                    f"observed must be None or a list of {len(self.sizes)} ints, got "
                    f"{type(observed).__name__}"
                )
            if len(observed) != len(self.sizes):
                raise ValueError(
                    f"observed has {len(observed)} counts but the envelope has "
                    f"{len(self.sizes)} sizes; give one count per block"
                )
            observed = [int_arg(v, f"observed[{i}]", low=0) for i, v in enumerate(observed)]
        if self.fanouts is None or self.batch_size is None or self.num_nodes is None:
            raise ValueError(
                "grow needs the envelope's fanouts, batch_size and num_nodes; build it "
                "with Envelope.worst_case / Envelope.profile or pass them to Envelope(...)"
            )
        margin = float(self.settings.get("margin", 0.05))
        wanted = [math.ceil(s * factor) for s in self.sizes]
        if observed is not None:
            wanted = [max(w, math.ceil(o * (1 + margin))) for w, o in zip(wanted, observed)]
        worst = worst_case_sizes(self.num_nodes, self.fanouts, self.batch_size, self.max_degree)
        return Envelope(
            self._feasible(wanted, worst, self.batch_size),
            "grown",
            fanouts=self.fanouts,
            batch_size=self.batch_size,
            num_nodes=self.num_nodes,
            observed=self.observed,
            max_degree=self.max_degree,
            settings=dict(self.settings, grown_from=list(self.sizes)),
        )

    def check(self, fanouts: Sequence[int], batch_size: int, num_nodes: int) -> None:
        """Raise ValueError unless this envelope fits a pipeline with these settings.

        Every block must hold its destination rows, and no block may exceed ``num_nodes`` rows:
        no batch can ever have more distinct nodes, so a larger size would only allocate
        memory that is never used.
        """
        fanouts = fanouts_arg(fanouts, "fanouts")
        num_nodes = int_arg(num_nodes, "num_nodes", low=1)
        batch_size = batch_size_arg(batch_size, num_nodes)
        self._check_fits(fanouts, batch_size, num_nodes)

    def _check_fits(self, fanouts: list[int], batch_size: int, num_nodes: int) -> None:
        """:meth:`check` of checked values."""
        if len(self.sizes) != len(fanouts):
            raise ValueError(
                f"envelope has {len(self.sizes)} sizes but there are {len(fanouts)} fanouts"
            )
        rows = batch_size
        for i in reversed(range(len(self.sizes))):
            if self.sizes[i] < rows:
                raise ValueError(
                    f"envelope size {self.sizes[i]} for block {i} is smaller than its "
                    f"{rows} destination rows; every block must hold its destination nodes"
                )
            if self.sizes[i] > num_nodes:
                raise ValueError(
                    f"envelope size {self.sizes[i]} for block {i} is larger than any batch "
                    f"can fill: at most num_nodes={num_nodes} rows"
                )
            rows = self.sizes[i]

    # ------------------------------------------------------------------------- memory

    def memory_model(
        self,
        feat_dim: int,
        hidden_dim: int,
        num_classes: int,
        oracle_counts: torch.Tensor | None = None,
    ) -> dict[str, Any]:
        """Bytes per block under worst-case, this envelope's and oracle sizing.

        Returns ``{"worst_case": [...], "envelope": [...], "oracle_mean": [...], "oracle_max": [...],
        "totals": {policy: bytes}}``, each list with one :func:`block_bytes` dict per block, input
        layer first. The oracle allocates each batch's exact counts (``oracle_counts`` int [K, L],
        default: the counts observed while profiling); its mean and max over batches are given.
        """
        feat_dim = int_arg(feat_dim, "feat_dim", low=0)
        hidden_dim = int_arg(hidden_dim, "hidden_dim", low=1)
        num_classes = int_arg(num_classes, "num_classes", low=1)
        if self.fanouts is None or self.batch_size is None or self.num_nodes is None:
            raise ValueError("memory_model needs the envelope's fanouts, batch_size and num_nodes")
        if oracle_counts is None:
            oracle_counts = self.observed
        worst = worst_case_sizes(self.num_nodes, self.fanouts, self.batch_size, self.max_degree)
        # The samplers' neighbour slots per row: the fanout, clamped to the largest in-degree
        # when sampling without replacement (zg.sampling.effective_fanouts).
        slots = list(self.fanouts)
        if self.max_degree is not None and not self.settings.get("replace", False):
            slots = [min(k, max(self.max_degree, 1)) for k in slots]

        def model(src_rows):
            dst_rows = list(src_rows[1:]) + [self.batch_size]
            return block_bytes(src_rows, dst_rows, slots, feat_dim, hidden_dim, num_classes)

        out: dict[str, Any] = {"worst_case": model(worst), "envelope": model(self.sizes)}
        if oracle_counts is not None:
            per_batch = [model(row.tolist()) for row in torch.as_tensor(oracle_counts)]
            totals = [sum(b["total"] for b in blocks) for blocks in per_batch]
            out["oracle_mean"] = [
                {
                    key: int(np.mean([blocks[i][key] for blocks in per_batch]))
                    for key in per_batch[0][i]
                }
                for i in range(len(self.sizes))
            ]
            out["oracle_max"] = per_batch[int(np.argmax(totals))]
        out["totals"] = {name: sum(b["total"] for b in blocks) for name, blocks in out.items()}
        return out

    def __repr__(self) -> str:
        return f"Envelope(sizes={self.sizes}, policy={self.policy!r})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Envelope) and self.sizes == other.sizes
