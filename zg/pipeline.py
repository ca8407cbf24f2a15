"""Training pipelines that differ only in the sampler: one loop, three ways to get blocks.

Where it sits: the chain every pipeline runs, named the same everywhere (code, profiler
labels, plots, notebooks):

    seeds -> sample -> gather -> forward -> loss -> backward -> step

* :class:`DynamicPipeline`: zg's :class:`~zg.sampling.DynamicSampler` (host-mediated, exact
  sizes) + zg models.
* :class:`EnvelopePipeline`: zg's :class:`~zg.sampling.EnvelopeSampler` (fixed shapes, padded
  seeds, device-resident counts) + the same zg models. ``zg.Engine`` adds static buffers, CUDA
  Graph capture and overflow rewind on top of this pipeline.
* ``zg.baselines.dgl.DGLPipeline``: DGL's ``NeighborSampler`` + ``DataLoader`` + ``dgl.nn``
  layers, the standard DGL recipe.

All three share, from this module: the seed order of every epoch (:func:`epoch_order`), the
batching, the feature/label gather, the loss (:func:`masked_cross_entropy`), the optimizer
(:func:`make_optimizer`), the loop and its timing. So the same seed visits the same batches in
the same order in all three, and a comparison is one class apart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from .graph import Graph
from .optim import DeviceAdam
from .sampling import DynamicSampler, EnvelopeSampler, check_fanouts

__all__ = ["epoch_order", "masked_cross_entropy", "make_optimizer", "Pipeline",
           "DynamicPipeline", "EnvelopePipeline", "STAGES", "EpochTiming"]

STAGES = ("sample", "compact", "gather", "forward", "backward", "step")


def epoch_order(nodes: torch.Tensor, seed: int, epoch: int) -> torch.Tensor:
    """The seeded shuffle of ``nodes`` used for ``epoch`` (int64 [len(nodes)], on the host)."""
    gen = torch.Generator().manual_seed((int(seed) * 1_000_003 + int(epoch)) % (2**63 - 1))
    return nodes.cpu()[torch.randperm(nodes.numel(), generator=gen)]


def masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the valid rows, with no host sync.

    logits float [B, C], labels int64 [B], valid bool [B] (padding rows False).
    """
    loss = F.cross_entropy(logits, labels.clamp(min=0), reduction="none")      # [B]
    valid_f = valid.to(loss.dtype)
    return (loss * valid_f).sum() / valid_f.sum().clamp(min=1.0)


def make_optimizer(model: torch.nn.Module, name: str = "adam", lr: float = 3e-3,
                   weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """"adam" (default): :class:`zg.optim.DeviceAdam`, PyTorch's Adam with its step counter on
    the device (no host sync, on-device skip); "torch-adam": ``torch.optim.Adam`` (reads its
    step counter on the host unless on an accelerator with capturable=True); "sgd"."""
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not lr > 0:
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if not isinstance(weight_decay, (int, float)) or weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
    params = list(model.parameters())
    if name == "adam":
        return DeviceAdam(params, lr=lr, weight_decay=weight_decay)
    if name == "torch-adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer must be 'adam', 'torch-adam' or 'sgd', got {name!r}")


@dataclass
class EpochTiming:
    """What one epoch of a pipeline measured (seconds are wall clock on this machine)."""

    seconds: float
    iterations: int
    loss: float
    stage_seconds: Dict[str, float] = field(default_factory=dict)


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

    def sample(self, seeds: torch.Tensor, epoch: int, batch: int, clock=None) -> Tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> (blocks, input_nodes [S0], output_nodes [B], valid [B] bool). ``clock`` (profiling)
        is called with "sample" / "compact" as those stages end, where the sampler can tell."""
        raise NotImplementedError

    def forward(self, blocks: Any, x: torch.Tensor) -> torch.Tensor:
        return self.model(blocks, x)

    # -- the shared loop -------------------------------------------------------------------

    def batches(self, epoch: int) -> Iterator[Tuple[int, torch.Tensor]]:
        order = epoch_order(self.nodes, self.seed, epoch)
        for b, start in enumerate(range(0, order.numel(), self.batch_size)):
            yield b, order[start: start + self.batch_size]

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
        """One iteration: sample -> gather -> forward -> loss -> backward -> step. Returns the loss."""
        clock = _StageClock(stage_seconds)
        blocks, input_nodes, output_nodes, valid = self.sample(seeds, epoch, batch,
                                                               clock if stage_seconds is not None else None)
        clock.lap("sample")
        x = self.g.x.index_select(0, input_nodes)                         # [S0, F]
        y = self.g.y.index_select(0, output_nodes)                        # [B]
        clock.lap("gather")
        logits = self.forward(blocks, x)                                 # [B, C]
        loss = masked_cross_entropy(logits, y, valid)
        clock.lap("forward")
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        clock.lap("backward")
        self.optimizer.step()
        clock.lap("step")
        return loss.detach()

    def train_epoch(self, epoch: Optional[int] = None, stages: bool = False) -> EpochTiming:
        """Train one epoch. ``stages=True`` also times each stage (perf_counter; on CPU exact,
        on a GPU use zg.profile for CUDA-event timings)."""
        epoch = self.epoch if epoch is None else epoch
        self.model.train()
        stage_seconds: Optional[Dict[str, float]] = {s: 0.0 for s in STAGES} if stages else None
        losses: List[torch.Tensor] = []
        start = time.perf_counter()
        for b, seeds in self.batches(epoch):
            losses.append(self.train_step(seeds, epoch, b, stage_seconds))
        mean_loss = float(torch.stack(losses).mean())                    # one read, after the epoch
        seconds = time.perf_counter() - start
        self.epoch = epoch + 1
        return EpochTiming(seconds, len(losses), mean_loss, stage_seconds or {})


class _StageClock:
    def __init__(self, into: Optional[Dict[str, float]]):
        self.into = into
        self.last = time.perf_counter() if into is not None else 0.0

    def __call__(self, stage: str) -> None:
        self.lap(stage)

    def lap(self, stage: str) -> None:
        if self.into is None:
            return
        now = time.perf_counter()
        self.into[stage] += now - self.last
        self.last = now


class DynamicPipeline(Pipeline):
    """zg's host-mediated pipeline: DynamicSampler + zg models (exact, unpadded sizes)."""

    name = "zg dynamic"

    def __init__(self, g: Graph, model: torch.nn.Module, fanouts: Sequence[int], batch_size: int,
                 *, replace: bool = False, **kwargs):
        super().__init__(g, model, fanouts, batch_size, **kwargs)
        self.sampler = DynamicSampler(g, self.fanouts, replace=replace, seed=self.seed)

    def sample(self, seeds, epoch, batch, clock=None):
        mb = self.sampler.sample(seeds, epoch, batch, clock=clock)
        valid = torch.ones(mb.seeds.numel(), dtype=torch.bool, device=self.device)
        return mb.blocks, mb.input_nodes, mb.seeds, valid


class EnvelopePipeline(Pipeline):
    """zg's fixed-shape pipeline: EnvelopeSampler + zg models, eager, no host syncs per step.

    Args:
        envelope: a :class:`zg.Envelope`, or "profiled" (default) / "worst_case".
        Other arguments as :class:`Pipeline`.
    """

    name = "zg envelope"

    def __init__(self, g: Graph, model: torch.nn.Module, fanouts: Sequence[int], batch_size: int,
                 *, envelope: Any = "profiled", replace: bool = False, **kwargs):
        from .envelope import Envelope

        super().__init__(g, model, fanouts, batch_size, **kwargs)
        if isinstance(envelope, str):
            if envelope == "profiled":
                envelope = Envelope.profile(g, self.fanouts, batch_size, replace=replace,
                                            seed=self.seed, nodes=self.nodes)
            elif envelope == "worst_case":
                envelope = Envelope.worst_case(g, self.fanouts, batch_size)
            else:
                raise ValueError(f"envelope must be 'profiled', 'worst_case' or a zg.Envelope, got {envelope!r}")
        self.sampler = EnvelopeSampler(g, self.fanouts, batch_size, envelope=envelope,
                                       replace=replace, seed=self.seed)
        self.overflow_flags: List[torch.Tensor] = []
        self.count_log: List[torch.Tensor] = []      # per-batch true counts (the oracle's sizes)

    @property
    def envelope(self):
        return self.sampler.envelope

    def sample(self, seeds, epoch, batch, clock=None):
        mb = self.sampler.sample(seeds, epoch, batch, clock=clock)
        self.overflow_flags.append(mb.overflowed)      # read after the epoch, never per step
        self.count_log.append(mb.counts)
        valid = torch.arange(self.batch_size, device=self.device) < mb.num_seeds
        return mb.blocks, mb.input_nodes, mb.seeds, valid

    def take_counts(self) -> torch.Tensor:
        """int64 [K, L]: true per-block counts of the batches since the last call (host read)."""
        counts, self.count_log = self.count_log, []
        return torch.stack(counts).cpu() if counts else torch.zeros(0, len(self.fanouts), dtype=torch.int64)

    def overflow_count(self) -> int:
        """Overflowed batches since the last call (one host read for the whole list)."""
        flags, self.overflow_flags = self.overflow_flags, []
        return int(torch.stack(flags).sum()) if flags else 0
