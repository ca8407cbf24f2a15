"""Training pipelines that differ only in the sampler: one loop, three ways to get blocks.

Where it sits: the chain every pipeline runs (:mod:`zg.step`, named the same everywhere: code,
profiler labels, plots, notebooks):

    seeds -> sample -> compact -> gather -> forward -> loss -> backward -> step

* :class:`DynamicPipeline`: zg's :class:`~zg.sampling.DynamicSampler` (host-mediated, exact
  sizes) + zg models.
* :class:`EnvelopePipeline`: zg's :class:`~zg.sampling.EnvelopeSampler` (fixed shapes, padded
  seeds, device-resident counts) + the same zg models. ``zg.Engine(capture=False)`` is this
  pipeline; ``capture=True`` adds static buffers and CUDA Graph capture on top.
* ``zg.baselines.dgl.DGLPipeline``: DGL's ``NeighborSampler`` + ``DataLoader`` + ``dgl.nn``
  layers, the standard DGL recipe.

All three share the seed order of every epoch (:func:`zg.rng.epoch_order`), the batching, the
one training step and the one overflow policy (:func:`zg.step.train_step`,
:func:`zg.step.run_batches`), the optimizer (:func:`zg.optim.make_optimizer`) and the timing.
So the same seed visits the same batches in the same order in all three, and a comparison is
one class apart. Each :meth:`Pipeline.sample` returns a :class:`zg.MiniBatch`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from .graph import Graph
from .optim import make_optimizer
from .rng import batch_key, epoch_order, seed_dropout
from .sampling import DynamicSampler, EnvelopeSampler, MiniBatch, check_fanouts
from .step import STAGES, OverflowGuard, StageClock, masked_cross_entropy, run_batches, train_step

__all__ = ["epoch_order", "masked_cross_entropy", "make_optimizer", "Pipeline",
           "DynamicPipeline", "EnvelopePipeline", "STAGES", "EpochTiming", "batch_ranges"]


def batch_ranges(count: int, batch_size: int) -> List[Tuple[int, int]]:
    """[(start, end)] of the consecutive batches of ``count`` items (the last may be short)."""
    return [(s, min(s + batch_size, count)) for s in range(0, count, batch_size)]

@dataclass
class EpochTiming:
    """What one epoch of a pipeline measured (seconds are wall clock on this machine)."""

    seconds: float
    iterations: int
    loss: float
    stage_seconds: Dict[str, float] = field(default_factory=dict)
    overflows: int = 0
    rewound_batches: int = 0


class Pipeline:
    """The shared loop. Subclasses implement :meth:`sample` and :meth:`forward`.

    Args:
        g: graph with features, labels and ``train_idx``.
        model: a zg model (or, for the DGL pipeline, a ``dgl.nn`` model).
        fanouts: per layer, input layer first. batch_size: seeds per batch.
        optimizer, lr, weight_decay: see :func:`make_optimizer`. seed: fixes every random choice.
    """

    name = "pipeline"

    def __init__(self, g: Graph, model: torch.nn.Module, fanouts: Sequence[int], batch_size: int,
                 *, optimizer: str = "adam", lr: float = 3e-3, weight_decay: float = 0.0,
                 seed: int = 0, nodes: Optional[torch.Tensor] = None):
        if not isinstance(g, Graph):
            raise TypeError(f"g must be a zg.Graph, got {type(g).__name__}")
        if g.x is None or g.y is None:
            raise ValueError("g needs features (x) and labels (y) to train on")
        if nodes is None:
            if g.train_idx is None or g.train_idx.numel() == 0:
                raise ValueError("g has no train_idx; pass nodes=... to train on")
            nodes = g.train_idx
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self.g, self.model = g, model
        self.fanouts = check_fanouts(fanouts)
        self.batch_size = batch_size
        self.seed = int(seed)
        self.nodes = torch.as_tensor(nodes, dtype=torch.int64).cpu()
        self.device = g.device
        self.optimizer = make_optimizer(model, optimizer, lr, weight_decay)
        self.epoch = 0

    # -- the pieces subclasses provide ---------------------------------------------------

    def sample(self, seeds: torch.Tensor, epoch: int, batch: int, clock=None) -> MiniBatch:
        """-> the batch's :class:`zg.MiniBatch`. ``clock`` (profiling) is called with "sample" /
        "compact" as those stages end, where the sampler can tell."""
        raise NotImplementedError

    def forward(self, blocks: Any, x: torch.Tensor) -> torch.Tensor:
        return self.model(blocks, x)

    def grow(self, wanted: List[int]) -> None:
        """After an overflow: grow the envelope (only sources with an envelope overflow)."""
        raise RuntimeError(f"{type(self).__name__} has no envelope, so it cannot overflow")

    # -- the shared loop -------------------------------------------------------------------

    @property
    def guard(self) -> OverflowGuard:
        if getattr(self, "_guard", None) is None:
            self._guard = OverflowGuard(len(self.fanouts), self.device)
        return self._guard

    def batches(self, epoch: int) -> Iterator[Tuple[int, torch.Tensor]]:
        order = epoch_order(self.nodes, self.seed, epoch)
        for b, (start, end) in enumerate(batch_ranges(order.numel(), self.batch_size)):
            yield b, order[start:end]

    def num_batches(self) -> int:
        return -(-self.nodes.numel() // self.batch_size)

    def sample_epoch(self, epoch: Optional[int] = None) -> EpochTiming:
        """Sampling only, every batch of one epoch (what a sampler benchmark times)."""
        epoch = self.epoch if epoch is None else epoch
        start = time.perf_counter()
        n = 0
        for b, seeds in self.batches(epoch):
            self.sample(seeds, epoch, b)
            n += 1
        return EpochTiming(time.perf_counter() - start, n, float("nan"))

    def train_step(self, seeds: torch.Tensor, epoch: int, batch: int,
                   stage_seconds: Optional[Dict[str, float]] = None) -> torch.Tensor:
        """One iteration through :func:`zg.step.train_step` (gated by the overflow policy).
        Returns the loss. ``stage_seconds``: a mapping each stage's seconds are added into."""
        seed_dropout(batch_key(self.seed, epoch, batch))   # same masks if rerun
        clock = None
        if stage_seconds is not None:
            clock = StageClock(None, into=stage_seconds)
        loss, _, _ = train_step(lambda c: self.sample(seeds, epoch, batch, c), self.model,
                                self.optimizer, self.g.x, self.g.y, guard=self.guard, batch=batch,
                                forward=self.forward, clock=clock)
        return loss

    def rewind(self, first: int) -> None:
        """Grow the envelope from the first overflowed batch's counts (the guard keeps them)."""
        self.grow(self.guard.first_wanted.cpu().tolist())   # a rewind is rare: a plain read

    def train_epoch(self, epoch: Optional[int] = None, stages: bool = False,
                    poll_every: int = 8) -> EpochTiming:
        """Train one epoch with the one overflow policy (an overflowed batch is never applied;
        the envelope grows and the epoch resumes from it). ``stages=True`` also times each
        stage (perf_counter; on CPU exact, on a GPU use zg.profile for CUDA-event timings)."""
        epoch = self.epoch if epoch is None else epoch
        self.model.train()
        stage_seconds: Optional[Dict[str, float]] = {s: 0.0 for s in STAGES} if stages else None
        batches = list(self.batches(epoch))
        start = time.perf_counter()
        run = run_batches(lambda b: self.train_step(batches[b][1], epoch, b, stage_seconds),
                          0, len(batches), self.guard, poll_every, self.rewind)
        seconds = time.perf_counter() - start
        self.epoch = epoch + 1
        return EpochTiming(seconds, len(run.losses), run.mean_loss(), stage_seconds or {},
                           overflows=run.overflows, rewound_batches=run.rewound)


class DynamicPipeline(Pipeline):
    """zg's host-mediated pipeline: DynamicSampler + zg models (exact, unpadded sizes)."""

    name = "zg dynamic"

    def __init__(self, g: Graph, model: torch.nn.Module, fanouts: Sequence[int], batch_size: int,
                 *, replace: bool = False, **kwargs):
        super().__init__(g, model, fanouts, batch_size, **kwargs)
        self.sampler = DynamicSampler(g, self.fanouts, replace=replace, seed=self.seed)

    def sample(self, seeds, epoch, batch, clock=None):
        return self.sampler.sample(seeds, epoch, batch, clock=clock)


class EnvelopePipeline(Pipeline):
    """zg's fixed-shape pipeline: EnvelopeSampler + zg models, eager, no host syncs per step.

    Args:
        envelope: a :class:`zg.Envelope`, or "profiled" (default) / "worst_case".
        kernel: the sampler's implementation, "auto" (default), "fused" or "torch" (see
            :func:`zg.sampling.resolve_kernel`; the same samples either way).
        Other arguments as :class:`Pipeline`.
    """

    name = "zg envelope"

    def __init__(self, g: Graph, model: torch.nn.Module, fanouts: Sequence[int], batch_size: int,
                 *, envelope: Any = "profiled", replace: bool = False, kernel: str = "auto",
                 **kwargs):
        from .envelope import Envelope

        super().__init__(g, model, fanouts, batch_size, **kwargs)
        self.kernel = kernel
        if isinstance(envelope, str):
            if envelope == "profiled":
                envelope = Envelope.profile(g, self.fanouts, batch_size, replace=replace,
                                            seed=self.seed, nodes=self.nodes)
            elif envelope == "worst_case":
                envelope = Envelope.worst_case(g, self.fanouts, batch_size)
            else:
                raise ValueError(f"envelope must be 'profiled', 'worst_case' or a zg.Envelope, got {envelope!r}")
        self.sampler = EnvelopeSampler(g, self.fanouts, batch_size, envelope=envelope,
                                       replace=replace, seed=self.seed, kernel=kernel)
        self.overflow_flags: List[torch.Tensor] = []
        self.count_log: List[torch.Tensor] = []      # per-batch true counts (the oracle's sizes)

    @property
    def envelope(self):
        return self.sampler.envelope

    def sample(self, seeds, epoch, batch, clock=None):
        mb = self.sampler.sample(seeds, epoch, batch, clock=clock)
        self.overflow_flags.append(mb.overflowed)      # read after the epoch, never per step
        self.count_log.append(mb.counts)
        return mb

    def grow(self, wanted: List[int], factor: float = 1.5) -> None:
        """Grow the envelope (``Envelope.grow``) and rebuild the sampler for it."""
        envelope = self.sampler.envelope.grow(factor, observed=wanted)
        self.sampler = EnvelopeSampler(self.g, self.fanouts, self.batch_size, envelope=envelope,
                                       replace=self.sampler.replace, seed=self.seed,
                                       kernel=self.kernel)

    def take_counts(self) -> torch.Tensor:
        """int64 [K, L]: true per-block counts of the batches since the last call (host read)."""
        counts, self.count_log = self.count_log, []
        return torch.stack(counts).cpu() if counts else torch.zeros(0, len(self.fanouts), dtype=torch.int64)

    def overflow_count(self) -> int:
        """Overflowed batches since the last call (one host read for the whole list)."""
        flags, self.overflow_flags = self.overflow_flags, []
        return int(torch.stack(flags).sum()) if flags else 0
