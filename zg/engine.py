"""zg.Engine: one training iteration as one fixed launch structure, captured and replayed.

Where it sits: on top of the samplers and the one training step (:mod:`zg.step`). The chain

    seeds -> sample -> compact -> gather -> forward -> loss -> backward -> step

runs in one of three ways, one flag apart:

* ``capture=True`` (the *static step*): every buffer is allocated once. The epoch's seed order
  goes to the device once per epoch (a ``[I, B]`` table); the step reads its batch at a
  device-resident batch counter, derives the batch's sampling key on the device from
  (seed, epoch, counter), and advances the counter itself. On CUDA the static step is warmed up
  on a side stream with its optimizer step disabled, then captured into one
  ``torch.cuda.CUDAGraph``, and every iteration is a replay: the host does nothing per iteration
  but reseed dropout and replay (no per-iteration copy, so no host buffer a pending copy could
  still be reading). On the CPU there is no CUDA Graph: the same static step runs eagerly on the
  same buffers; ``zg.audit.SyncAudit`` (0 host syncs per iteration) and stable buffer addresses
  are the evidence that it would be capturable.
* ``capture=False``: the envelope pipeline eagerly (fresh tensors each step).
* ``pipeline="dynamic"``: the host-mediated pipeline (DynamicSampler).

The one overflow policy (:class:`zg.step.OverflowGuard`, :func:`zg.step.run_batches`), in every
mode: an overflowed batch never changes parameters or optimizer state (the skip happens on the
device, no host read); every ``poll_every`` iterations the host reads a copy of the flag it
started at the previous poll point, and on an overflow it grows the envelope from the first
overflowed batch's counts, rebuilds (re-captures) the step, and resumes from that batch. So
whatever the envelope, exactly the same batches are applied in the same order as in a run that
never overflowed; the parameters agree up to floating-point reassociation: bitwise on the CPU
when the envelope sizes are equal, within a tolerance on a GPU (float atomics).

Randomness (:mod:`zg.rng`): sampling is keyed by (seed, epoch, batch); dropout draws from
torch's generator, reseeded from the same key before every iteration, so a rewound batch draws
the same dropout masks as the first time.

The same Engine runs inside every Grappa worker and the data-parallel trainer: they pass the
model wrapped for gradient reduction (``forward``), their loss, their batches and a guard whose
flag rides the gradient all-reduce (``guard``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from ._checks import int_arg
from ._io import atomic_write
from .envelope import Envelope
from .graph import Graph
from .models import _BlockModel
from .optim import DeviceAdam, DeviceSGD, _check_hyper, make_optimizer
from .pipeline import batch_ranges
from .rng import EVAL_EPOCH, batch_key, batch_key_device, epoch_order, mix64, seed_dropout
from .sampling import DynamicSampler, EnvelopeSampler, check_fanouts, max_in_degree, resolve_kernel
from .step import STAGES, OverflowGuard, StageClock, run_batches, train_step

__all__ = ["Engine", "EngineSettings", "EpochStats", "CHECKPOINT_FORMAT", "ENGINE_STAGES"]

CHECKPOINT_FORMAT = "zg.engine"
CHECKPOINT_VERSION = 1
ENGINE_STAGES = STAGES                   # one tuple of stage names for the whole kit


@dataclass
class EpochStats:
    """What one call of :meth:`Engine.train_epoch` did and measured.

    seconds: wall clock of the epoch. iterations: batches applied. host_syncs: host syncs per
    iteration counted by SyncAudit over the first ``audit_iterations`` steady-state iterations
    (None if not audited). cuda_sync_warnings: on CUDA, the syncs torch's sync-debug mode
    reported over the same iterations, per iteration (a second, independent count; None on the
    CPU). overflows: overflow events (each one rewinds). replays: executions of the step
    (CUDA Graph replays on a GPU), rewound ones included. rewound_batches: batches executed
    again after a rewind. polls: host reads of the overflow flag. peak_bytes: CUDA
    ``max_memory_allocated`` on a GPU; on the CPU the envelope memory model's total.
    """

    epoch: int
    seconds: float
    iterations: int
    host_syncs: Optional[float]
    overflows: int
    replays: int
    rewound_batches: int
    peak_bytes: int
    loss: float
    envelope_sizes: List[int] = field(default_factory=list)
    cuda_sync_warnings: Optional[float] = None
    polls: int = 0


@dataclass
class EngineSettings:
    """An Engine's settings (see :class:`Engine` for each)."""

    fanouts: List[int]
    batch_size: int
    optimizer: str = "adam"
    lr: float = 3e-3
    weight_decay: float = 0.0
    device: str = "cpu"
    capture: bool = True
    seed: int = 0
    pipeline: str = "envelope"
    poll_every: int = 8
    replace: bool = False
    audit_iterations: int = 1
    trace: bool = False
    grow_factor: float = 1.5
    kernel: str = "auto"


def _int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_device(device: Any) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"device {device!r} is not a valid torch device: {exc}") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {device!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but CUDA is not available here")
        index = 0 if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: there are only {torch.cuda.device_count()} "
                             "CUDA device(s) here")
        dev = torch.device("cuda", index)
    return dev


def node_set_hash(mb) -> torch.Tensor:
    """int64 []: an order-independent hash of every block's true source-node set (device)."""
    total = torch.zeros((), dtype=torch.int64, device=mb.seeds.device)
    for i, b in enumerate(mb.blocks):
        rows = torch.arange(b.src_nodes.shape[0], device=b.src_nodes.device)
        h = mix64(b.src_nodes * 131 + i)
        total = total + torch.where(rows < b.num_src, h, 0).sum()
    return total


class Engine:
    """Train a zg model with the envelope pipeline as one static, capturable step.

    Args:
        g: the graph (features, labels, ``train_idx``); moved to ``device``. The Engine keeps
            what it was given at construction: its own Graph object and a copy of the training
            nodes, so a later reassignment of ``g.x`` or ``g.y`` is not seen (build a new Engine);
            in-place changes to the feature and label tensors are (they are shared).
        model: a zg model (``zg.models.SAGE`` / ``GCN`` / ``GAT``); moved to ``device``.
        fanouts: per layer, input layer first. batch_size: seeds per iteration (buffers are
            sized by ``min(batch_size, training nodes)``).
        envelope: "profiled" (default), "worst_case", or a :class:`zg.Envelope`.
        optimizer: "adam" (DeviceAdam) or "sgd" (DeviceSGD), or such an optimizer object over
            the model's parameters; lr, weight_decay: its settings. The learning rate lives in a
            device tensor: :meth:`set_lr` changes it, also after capture.
        device: "cpu" or "cuda[:i]".
        capture: None (default: capture when possible), True (static step; a CUDA Graph on a
            GPU, the same static step eagerly on the CPU) or False (eager envelope pipeline).
        pipeline: "envelope" (default) or "dynamic" (the host-mediated reference).
        poll_every: iterations between host reads of the overflow flag.
        seed: fixes sampling, dropout and the seed order of every epoch.
        audit_iterations: steady-state iterations per epoch run under SyncAudit (0 to skip).
        trace: record (epoch, batch, node-set hash, applied) of every executed step, for tests
            and notebooks (adds one tiny device write per step).
        grow_factor: how much an overflowing envelope grows (> 1).
        cuda_graph: with ``capture=True`` on CUDA, capture the static step into a CUDA Graph
            (default) or run the same static step eagerly (for numerics checks).
        nodes: the training nodes (default ``g.train_idx``).
        batches: ``batches(epoch) -> list of int64 seed tensors`` replacing the default seeded
            shuffle cut into ``batch_size`` chunks (Grappa workers: their own split); every
            epoch must have the same number of batches, each at most ``batch_size`` long.
        forward: what computes the logits from (blocks, x) (default ``model``; e.g. a DDP wrapper).
        loss: ``loss(logits, labels, mb) -> 0-d tensor`` (default: masked mean cross-entropy).
        features: ``features(input_nodes) -> x`` replacing the gather from ``g.x`` (a
            feature-fetching worker asks the owners); ``g`` then needs no features.
        reduce: called after backward, before the optimizer step (the data-parallel trainer's
            gradient all-reduce, which also carries the overflow flag).
        guard: a :class:`zg.step.OverflowGuard` to share (default: the Engine's own).
        before_step, after_step: ``f(epoch, batch)`` called around every executed batch
            (rewound ones included) by :meth:`train_epoch`.
        kernel: the envelope sampler's implementation: "auto" (default: the fused numba kernel
            on the CPU when numba is installed, else the torch ops), "fused" or "torch"; both
            sample the same tensors bit for bit (see :func:`zg.sampling.resolve_kernel`). The
            fused kernel runs below torch's dispatcher, so SyncAudit (``host_syncs``) sees the
            rest of the step only; ``kernel="torch"`` audits the capturable sampling ops too.
    """

    def __init__(self, g: Graph, model: torch.nn.Module, fanouts: Sequence[int], batch_size: int,
                 envelope: Any = "profiled", optimizer: Any = "adam", lr: float = 3e-3,
                 weight_decay: float = 0.0, device: Any = "cpu", capture: Optional[bool] = None,
                 seed: int = 0, pipeline: str = "envelope", poll_every: int = 8,
                 replace: bool = False, audit_iterations: int = 1, trace: bool = False,
                 grow_factor: float = 1.5, *, cuda_graph: bool = True, nodes: Any = None,
                 batches: Optional[Callable[[int], List[torch.Tensor]]] = None,
                 forward: Optional[Callable] = None, loss: Optional[Callable] = None,
                 features: Optional[Callable] = None, reduce: Optional[Callable[[], None]] = None,
                 guard: Optional[OverflowGuard] = None,
                 before_step: Optional[Callable[[int, int], None]] = None,
                 after_step: Optional[Callable[[int, int], None]] = None,
                 kernel: str = "auto"):
        if not isinstance(g, Graph):
            raise TypeError(f"g must be a zg.Graph, got {type(g).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if forward is None and not isinstance(model, _BlockModel):
            raise TypeError(f"model must be a zg model (zg.models.SAGE, GCN or GAT: it reads padded "
                            f"zg blocks), got {type(model).__name__}")
        if pipeline not in ("envelope", "dynamic"):
            raise ValueError(f"pipeline must be 'envelope' or 'dynamic', got {pipeline!r}")
        if capture is not None and not isinstance(capture, bool):
            raise TypeError(f"capture must be None, True or False, got {capture!r}")
        for flag_name, flag in (("trace", trace), ("cuda_graph", cuda_graph)):
            if not isinstance(flag, bool):
                raise TypeError(f"{flag_name} must be True or False, got {flag!r}")
        if pipeline == "dynamic" and capture:
            raise ValueError("capture=True needs the envelope pipeline: the dynamic pipeline's "
                             "shapes change every iteration, so it cannot be captured")
        self.device = _check_device(device)
        resolve_kernel(kernel, self.device)              # a bad choice fails before any work
        self.kernel = kernel
        if (g.x is None and features is None) or g.y is None:
            raise ValueError("g needs features (x) and labels (y) to train")
        if nodes is None:
            if g.train_idx is None or g.train_idx.numel() == 0:
                raise ValueError("g needs a non-empty train_idx to train (or pass nodes=...)")
            nodes = g.train_idx
        self.fanouts = check_fanouts(fanouts)
        lr = _check_hyper(lr, "lr", open_low=True)
        weight_decay = _check_hyper(weight_decay, "weight_decay")
        self.batch_size = _int(batch_size, "batch_size", 1)
        self.poll_every = _int(poll_every, "poll_every", 1)
        self.audit_iterations = _int(audit_iterations, "audit_iterations", 0)
        self.seed = int_arg(seed, "seed", low=0, high=2**63 - 1)       # an int64 (a device tensor)
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be a bool, got {type(replace).__name__}")
        if isinstance(model, _BlockModel):
            if model.num_layers != len(self.fanouts):
                raise ValueError(f"model has {model.num_layers} layers but fanouts has "
                                 f"{len(self.fanouts)} entries; give one fanout per layer")
            if features is None and model.feature_dims[0] != g.feat_dim:
                raise ValueError(f"model takes {model.feature_dims[0]} input features but g has "
                                 f"feat_dim={g.feat_dim}")
            if model.feature_dims[-1] < int(g.num_classes):
                raise ValueError(f"model has {model.feature_dims[-1]} output classes but g's labels "
                                 f"have num_classes={int(g.num_classes)}; build the model with "
                                 f"num_classes >= {int(g.num_classes)}")
        if isinstance(grow_factor, bool) or not isinstance(grow_factor, (int, float)):
            raise TypeError(f"grow_factor must be a number > 1, got {type(grow_factor).__name__} "
                            f"{grow_factor!r}")
        if not math.isfinite(grow_factor) or not 1.0 < grow_factor <= 1e6:
            raise ValueError(f"grow_factor must be a finite number in (1, 1e6], got {grow_factor!r}")
        # A copy: a later in-place change of g.train_idx must not reach the running engine.
        self.nodes = torch.as_tensor(nodes, dtype=torch.int64).cpu().clone()
        if self.nodes.numel() == 0:
            raise ValueError("nodes is empty: there is nothing to train on")
        if int(self.nodes.min()) < 0 or int(self.nodes.max()) >= g.num_nodes:
            raise ValueError(f"the training nodes must be node ids in [0, {g.num_nodes}); "
                             f"got ids in [{int(self.nodes.min())}, {int(self.nodes.max())}]")
        self._custom_batches = batches
        # Buffers hold at most the training set: batch 10^6 on 300 nodes is 300 rows.
        self.rows = self.batch_size if batches is not None else min(self.batch_size, self.nodes.numel())
        self.pipeline_kind = pipeline
        self.capture = pipeline == "envelope" and capture is not False
        self.use_cuda_graph = self.capture and self.device.type == "cuda" and bool(cuda_graph)
        self.replace = replace
        self.trace_enabled = bool(trace)
        self.settings = EngineSettings(
            fanouts=self.fanouts, batch_size=self.batch_size,
            optimizer=optimizer if isinstance(optimizer, str) else type(optimizer).__name__,
            lr=float(lr), weight_decay=float(weight_decay), device=str(self.device),
            capture=self.capture, seed=self.seed, pipeline=pipeline, poll_every=self.poll_every,
            replace=replace, audit_iterations=self.audit_iterations, trace=self.trace_enabled,
            grow_factor=float(grow_factor), kernel=kernel)
        self.grow_factor = float(grow_factor)
        self.config = dict(fanouts=self.fanouts, batch_size=self.batch_size,
                           optimizer=self.settings.optimizer, lr=lr, weight_decay=weight_decay,
                           seed=self.seed, pipeline=pipeline, replace=replace,
                           num_nodes=g.num_nodes, num_edges=g.num_edges, model=type(model).__name__,
                           num_parameters=sum(p.numel() for p in model.parameters()))
        self.g = g.to(self.device)
        self.model = model.to(self.device)
        self.forward = forward
        self.loss = loss
        self.features = features if features is not None else self.g.x
        self.before_step, self.after_step = before_step, after_step
        self.reduce = reduce
        if isinstance(optimizer, str):
            self.optimizer = make_optimizer(self.model, optimizer, lr, weight_decay)
        elif isinstance(optimizer, (DeviceAdam, DeviceSGD)):
            self.optimizer = optimizer
        else:
            raise TypeError(f"optimizer must be 'adam', 'sgd' or a zg.optim.DeviceAdam/DeviceSGD, "
                            f"got {type(optimizer).__name__}")
        self.guard = guard if guard is not None else OverflowGuard(len(self.fanouts), self.device)
        self.epoch, self.batch = 0, 0
        self._steps_done = 0
        self.history: List[EpochStats] = []
        self.trace: List[dict] = []
        self._trace_device: List[torch.Tensor] = []
        self.graph = None                                # the CUDA Graph, when captured
        self.epoch_seeds: Optional[torch.Tensor] = None  # int64 [I, rows]: this epoch's batches
        self._loaded_epoch: Optional[int] = None
        self._epoch_batches: Optional[tuple] = None      # (epoch, its batch list), see _load_epoch
        self._next_batch = 0                              # where the device counter points

        if pipeline == "dynamic":
            self.envelope = None
            self.sampler = DynamicSampler(self.g, self.fanouts, replace=replace, seed=self.seed)
            return
        if isinstance(envelope, str):
            if envelope == "profiled":
                envelope = Envelope.profile(self.g, self.fanouts, self.rows, replace=replace,
                                            seed=self.seed, nodes=self.nodes)
            elif envelope == "worst_case":
                envelope = Envelope.worst_case(self.g, self.fanouts, self.rows)
            else:
                raise ValueError(f"envelope must be 'profiled', 'worst_case' or a zg.Envelope, got {envelope!r}")
        if not isinstance(envelope, Envelope):
            raise TypeError(f"envelope must be a str or zg.Envelope, got {type(envelope).__name__}")
        if len(envelope.sizes) != len(self.fanouts):
            raise ValueError(f"envelope has {len(envelope.sizes)} sizes but fanouts has "
                             f"{len(self.fanouts)} entries; give one envelope size per layer")
        if envelope.fanouts is None or envelope.batch_size != self.rows:
            # explicit sizes (or sized for more rows): tell it what it is for, so it can grow
            envelope = Envelope(envelope.sizes, envelope.policy, fanouts=self.fanouts,
                                batch_size=self.rows, num_nodes=self.g.num_nodes,
                                observed=envelope.observed, settings=envelope.settings,
                                max_degree=max_in_degree(self.g))
        envelope.check(self.fanouts, self.rows, self.g.num_nodes)
        self.envelope = envelope
        dev = self.device
        # The static buffers: the step's inputs live here and the flags the host polls.
        self.counter = torch.zeros((), dtype=torch.int64, device=dev)       # the batch counter
        self.epoch_buf = torch.zeros((), dtype=torch.int64, device=dev)
        self.seed_tensor = torch.tensor(self.seed, dtype=torch.int64, device=dev)
        self.loss_buf = torch.zeros((), dtype=torch.float32, device=dev)
        self.hash_buf = torch.zeros((), dtype=torch.int64, device=dev)
        self.applied_buf = torch.zeros((), dtype=torch.bool, device=dev)
        self._build()

    # ------------------------------------------------------------------------- the step

    @property
    def overflowed(self) -> torch.Tensor:
        """bool [] device: the sticky overflow flag (see :class:`zg.step.OverflowGuard`)."""
        return self.guard.overflowed

    def _build(self) -> None:
        """(Re)build the sampler for the current envelope and, on CUDA, (re)capture the step."""
        self.sampler = EnvelopeSampler(self.g, self.fanouts, self.rows, envelope=self.envelope,
                                       replace=self.replace, seed=self.seed, kernel=self.kernel)
        self.graph = None
        if self.use_cuda_graph and self.epoch_seeds is not None:
            self._capture()

    def _static_step(self, clock=None) -> None:
        """sample -> compact -> gather -> forward -> loss -> backward -> step, on static buffers.

        Reads batch ``counter`` of the epoch table, derives its key on the device, and advances
        the counter: nothing in it depends on the host."""
        b = self.counter                                                     # int64 []
        seeds = self.epoch_seeds.index_select(0, b.view(1)).view(-1)         # [rows]
        num_seeds = self.epoch_counts.index_select(0, b.view(1)).view(())    # []
        key = batch_key_device(self.seed_tensor, self.epoch_buf, b)          # []
        loss, mb, apply = train_step(
            lambda c: self.sampler.sample_static(seeds, num_seeds, key, clock=c),
            self.model, self.optimizer, self.features, self.g.y, guard=self.guard, batch=b,
            loss=self.loss, forward=self.forward, reduce=self.reduce, clock=clock)
        self.loss_buf.copy_(loss)
        self.applied_buf.copy_(apply)
        if self.trace_enabled:
            self.hash_buf.copy_(node_set_hash(mb))
        self.counter.add_(1)

    def _capture(self) -> None:
        """Warm up on a side stream (optimizer disabled), then capture one CUDA Graph."""
        dev = self.device
        with torch.cuda.device(dev):
            self.guard.enabled.fill_(False)
            side = torch.cuda.Stream(device=dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.counter.fill_(0)
                    self._static_step()
            torch.cuda.current_stream(dev).wait_stream(side)
            self.counter.fill_(0)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=side):
                self._static_step()
            torch.cuda.synchronize(dev)
            self.guard.reset()
            self.guard.enabled.fill_(True)
            self.counter.fill_(self._next_batch)

    def _load_epoch(self, epoch: int) -> List[torch.Tensor]:
        """Upload the epoch's batches to the device table once (static step), return them.
        The epoch's batch list is kept, so ``run_batch`` called in a loop (profilers, benchmarks)
        does not redo the epoch's permutation on every call."""
        if self._epoch_batches is not None and self._epoch_batches[0] == epoch:
            batches = self._epoch_batches[1]
        else:
            batches = self.batches(epoch)
            self._epoch_batches = (epoch, batches)
        if not self.capture or self._loaded_epoch == epoch:
            return batches
        count = len(batches)
        host = torch.zeros(count, self.rows, dtype=torch.int64)          # [I, rows], padded
        counts = torch.zeros(count, dtype=torch.int64)
        for i, seeds in enumerate(batches):
            host[i, : seeds.numel()] = seeds
            counts[i] = seeds.numel()
        if self.device.type == "cuda":
            host, counts = host.pin_memory(), counts.pin_memory()
        if self.epoch_seeds is None or self.epoch_seeds.shape[0] != count:
            self.epoch_seeds = torch.zeros(count, self.rows, dtype=torch.int64, device=self.device)
            self.epoch_counts = torch.zeros(count, dtype=torch.int64, device=self.device)
            rebuilt = True
        else:
            rebuilt = False
        # Stream-ordered after every earlier replay; the pinned source stays referenced (and the
        # caching host allocator keeps it until the copy ran) so it is never overwritten early.
        self.epoch_seeds.copy_(host, non_blocking=True)
        self.epoch_counts.copy_(counts, non_blocking=True)
        self._epoch_host = (host, counts)
        self.epoch_buf.fill_(epoch)
        self._loaded_epoch = epoch
        if rebuilt and self.use_cuda_graph:
            self._capture()
        return batches

    def _run_batch(self, batches: List[torch.Tensor], epoch: int, b: int, clock=None) -> torch.Tensor:
        """Run batch ``b`` of ``epoch`` (gated by the guard); returns its loss (device)."""
        seed_dropout(batch_key(self.seed, epoch, b))   # same masks if rerun
        if self.capture:
            if self._next_batch != b:                 # only after a rewind or a new position
                self.counter.fill_(b)
            self._next_batch = b + 1
            if self.graph is not None and clock is None:
                self.graph.replay()
            else:
                self._static_step(clock)
            return self.loss_buf.clone()
        seeds = batches[b]
        loss, mb, apply = train_step(
            lambda c: self.sampler.sample(seeds, epoch, b, clock=c), self.model, self.optimizer,
            self.features, self.g.y, guard=self.guard, batch=b, loss=self.loss, forward=self.forward,
            reduce=self.reduce, clock=clock)
        if self.trace_enabled:
            self.applied_buf = apply if apply is not None else torch.ones((), dtype=torch.bool)
            self.hash_buf = node_set_hash(mb)
        return loss

    def run_batch(self, batch: int, epoch: Optional[int] = None,
                  clock: Optional[StageClock] = None) -> torch.Tensor:
        """Run one training iteration on batch ``batch`` of ``epoch`` (default: the current
        epoch), outside the epoch loop: what profilers and benchmarks time. It trains (use an
        engine whose state you no longer need). Returns the loss tensor (device)."""
        epoch = self.epoch if epoch is None else _int(epoch, "epoch", 0)
        batches = self._load_epoch(epoch)
        batch = _int(batch, "batch", 0) % len(batches)
        return self._run_batch(batches, epoch, batch, clock)

    def set_lr(self, lr: float) -> None:
        """Change the learning rate in place (a captured step sees the new value)."""
        self.optimizer.set_lr(lr)
        self.config["lr"] = float(lr)

    # ------------------------------------------------------------------------- training

    def batches(self, epoch: int) -> List[torch.Tensor]:
        """The seed tensors (host, int64) of every batch of ``epoch``, in order."""
        if self._custom_batches is not None:
            out = [torch.as_tensor(b, dtype=torch.int64).cpu() for b in self._custom_batches(epoch)]
            low = 0 if self.capture else 1      # the static step runs an empty batch as a no-op
            if not out or any(b.numel() > self.rows or b.numel() < low for b in out):
                raise ValueError(f"batches({epoch}) gave no batch, a batch of more than "
                                 f"batch_size={self.rows} seeds, or an empty one (only the static "
                                 "step, capture=True, takes empty batches)")
            return out
        order = epoch_order(self.nodes, self.seed, epoch)
        return [order[s:e] for s, e in batch_ranges(order.numel(), self.rows)]

    def _rewind(self, first: int) -> None:
        """Grow the envelope from the first overflowed batch's counts and rebuild (re-capture).
        Under a shared reduction only the processes that overflowed grow; all resume at
        ``first``."""
        if bool(self.guard.local):                     # a rewind is rare: plain reads are fine
            wanted = self.guard.first_wanted.cpu().tolist()
            self.envelope = self.envelope.grow(self.grow_factor, observed=wanted)
            self._build()
        self._next_batch = -1                          # the counter must be set again

    def train_epoch(self, max_batches: Optional[int] = None, progress=None) -> EpochStats:
        """Train from the current position to the end of the epoch (or ``max_batches`` batches).

        Returns the :class:`EpochStats` of this call. A call that stops mid-epoch leaves the
        position (epoch, batch) for the next call or a checkpoint. A non-finite epoch loss stops
        training with a FloatingPointError naming the likely causes.
        """
        from .audit import SyncAudit

        if max_batches is not None:
            max_batches = _int(max_batches, "max_batches", 1)
        epoch = self.epoch
        self.model.train()
        batches = self._load_epoch(epoch)
        start_batch = self.batch
        end = len(batches) if max_batches is None else min(len(batches), start_batch + max_batches)
        audit = {"done": 0, "syncs": 0, "warnings": 0}

        def run(b: int) -> torch.Tensor:
            if self.before_step is not None:
                self.before_step(epoch, b)
            steady = b > start_batch or self._steps_done > 0
            self._steps_done += 1
            if audit["done"] < self.audit_iterations and steady:
                with SyncAudit() as counter:
                    loss = self._run_batch(batches, epoch, b)
                audit["done"] += 1
                audit["syncs"] += counter.host_syncs
                audit["warnings"] += counter.cuda_sync_warnings
                return loss
            return self._run_batch(batches, epoch, b)

        def after(b: int) -> None:
            if self.after_step is not None:
                self.after_step(epoch, b)
            if self.trace_enabled:
                self._trace_device.append(torch.stack([self.hash_buf, self.applied_buf.to(torch.int64)]))
                self.trace.append({"epoch": epoch, "batch": b})
            if progress is not None:
                progress.update(1)

        start_time = time.perf_counter()
        self.guard.reset()
        run_result = run_batches(run, start_batch, end, self.guard, self.poll_every,
                                 self._rewind if self.envelope is not None else _never_rewinds,
                                 after_step=after)
        seconds = time.perf_counter() - start_time
        self._advance(epoch, end, len(batches))
        loss = run_result.mean_loss()
        done = audit["done"]
        stats = EpochStats(epoch=epoch, seconds=seconds, iterations=len(run_result.losses),
                           host_syncs=(audit["syncs"] / done) if done else None,
                           cuda_sync_warnings=(audit["warnings"] / done) if done and self.device.type == "cuda" else None,
                           overflows=run_result.overflows, replays=run_result.executed,
                           rewound_batches=run_result.rewound, peak_bytes=self._peak_bytes(),
                           loss=loss, polls=run_result.polls,
                           envelope_sizes=list(self.envelope.sizes) if self.envelope else [])
        self.history.append(stats)
        self._flush_trace()
        if not math.isfinite(loss):
            raise FloatingPointError(
                f"epoch {epoch}: the mean training loss is {loss}. Likely causes: non-finite "
                "features (g.x holds NaN/inf), a learning rate too large for this model, or "
                "labels outside [0, num_classes). Training stopped; the parameters are those "
                "after the epoch")
        return stats

    def _advance(self, epoch: int, end: int, num_batches: int) -> None:
        if end >= num_batches:
            self.epoch, self.batch = epoch + 1, 0
        else:
            self.epoch, self.batch = epoch, end

    def _flush_trace(self) -> None:
        if not self._trace_device:
            return
        values = torch.stack(self._trace_device).cpu().tolist()
        pending = [t for t in self.trace if "hash" not in t]
        for entry, (h, applied) in zip(pending, values):
            entry["hash"], entry["applied"] = h, bool(applied)
        self._trace_device = []

    def applied_trace(self) -> List[tuple]:
        """(epoch, batch, node-set hash) of every applied step, in order (needs trace=True)."""
        self._flush_trace()
        return [(t["epoch"], t["batch"], t["hash"]) for t in self.trace if t.get("applied")]

    @property
    def hidden_dim(self) -> int:
        """The model's hidden width (1 for a one-layer model), for the memory model."""
        dims = getattr(self.model, "feature_dims", None)
        return int(dims[1]) if dims and len(dims) > 2 else 1

    def memory_model(self) -> Dict[str, Any]:
        """The envelope's memory model for this graph and model (see :meth:`zg.Envelope.memory_model`)."""
        if self.envelope is None:
            raise ValueError("the dynamic pipeline has no envelope to model")
        return self.envelope.memory_model(self.g.feat_dim, self.hidden_dim, max(int(self.g.num_classes), 1))

    def _peak_bytes(self) -> int:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        if self.envelope is None:
            return 0
        return int(self.memory_model()["totals"]["envelope"])

    def fit(self, epochs: int, progress: bool = True) -> List[EpochStats]:
        """Train ``epochs`` epochs with a tqdm progress bar; returns their EpochStats."""
        epochs = _int(epochs, "epochs", 1)
        bar = None
        if progress:
            try:
                from tqdm.auto import tqdm
                bar = tqdm(total=epochs * len(self.batches(self.epoch)), desc="training", unit="batch")
            except ImportError:
                bar = None
        out = []
        try:
            for _ in range(epochs):
                stats = self.train_epoch(progress=bar)
                out.append(stats)
                if bar is not None:
                    bar.set_postfix(epoch=stats.epoch, loss=f"{stats.loss:.3f}", overflows=stats.overflows)
        finally:
            if bar is not None:
                bar.close()
        return out

    # ------------------------------------------------------------------------- evaluation

    @torch.no_grad()
    def evaluate(self, split: str = "val", mode: str = "full") -> float:
        """Accuracy on ``split`` ("train" | "val" | "test").

        ``mode="full"`` (default): exact full-neighbour inference, layer by layer over every
        node (no sampling noise; what DGL's examples report). ``mode="sampled"``: the training
        fanouts through the dynamic sampler, keyed by the engine's seed (epoch
        :data:`zg.rng.EVAL_EPOCH`).
        """
        if split not in ("train", "val", "test"):
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        if mode not in ("full", "sampled"):
            raise ValueError(f"mode must be 'full' or 'sampled', got {mode!r}")
        idx = getattr(self.g, f"{split}_idx")
        if idx is None or idx.numel() == 0:
            raise ValueError(f"the graph has no {split}_idx to evaluate on")
        was_training = self.model.training
        self.model.eval()
        try:
            if mode == "full":
                from .inference import full_neighbour_logits
                logits = full_neighbour_logits(self.model, self.g)[idx]
                correct = (logits.argmax(1) == self.g.y[idx]).sum()
            else:
                sampler = DynamicSampler(self.g, self.fanouts, replace=self.replace, seed=self.seed)
                correct = torch.zeros((), dtype=torch.int64, device=self.device)
                for b, (start, end) in enumerate(batch_ranges(idx.numel(), self.batch_size)):
                    mb = sampler.sample(idx[start:end].cpu(), epoch=EVAL_EPOCH, batch=b)
                    logits = self.model(mb.blocks, self.g.x.index_select(0, mb.input_nodes))
                    correct += (logits.argmax(1) == self.g.y[mb.seeds]).sum()
            return float(correct) / idx.numel()
        finally:
            self.model.train(was_training)

    # ------------------------------------------------------------------------- checkpoints

    def state_dict(self) -> Dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
            "config": dict(self.config),
            "model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "optimizer": _optimizer_state_to_cpu(self.optimizer.state_dict()),
            "envelope": None if self.envelope is None else list(self.envelope.sizes),
            "epoch": self.epoch, "batch": self.batch,
        }

    def save(self, path: Any) -> Path:
        """Write a checkpoint atomically (:func:`zg._io.atomic_write`: temp file + rename, nothing
        left behind on failure): model, optimizer, envelope, position (epoch, batch) and config.
        Randomness is keyed by (seed, epoch, batch), so the position is the whole RNG state."""
        state = self.state_dict()
        return atomic_write(path, lambda f: torch.save(state, f), name="path", make_parents=True)

    def load(self, path: Any) -> "Engine":
        """Restore a checkpoint written by :meth:`save` into this engine.

        Everything is read and checked first (format, version, config, parameter names and
        shapes, optimizer state); only then is anything assigned. A corrupt or mismatched file
        raises ValueError and leaves the engine exactly as it was.
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise ValueError(f"checkpoint {str(path)!r} is unreadable or corrupt: {exc}") from None
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{str(path)!r} is not a zg engine checkpoint")
        if state.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"checkpoint version {state.get('version')!r} is not supported "
                             f"(this zg reads version {CHECKPOINT_VERSION})")
        for key in ("config", "model", "optimizer", "envelope", "epoch", "batch"):
            if key not in state:
                raise ValueError(f"checkpoint {str(path)!r} lacks {key!r}")
        theirs, mine = state["config"], self.config
        diff = sorted(k for k in mine if theirs.get(k) != mine[k])
        if diff:
            raise ValueError("checkpoint was written by an engine with a different configuration: "
                             + ", ".join(f"{k}: {theirs.get(k)!r} != {mine[k]!r}" for k in diff))
        current = self.model.state_dict()
        model_state = state["model"]
        if set(model_state) != set(current):
            raise ValueError(f"checkpoint parameters {sorted(model_state)} do not match the model's "
                             f"{sorted(current)}")
        for k, v in model_state.items():
            if not isinstance(v, torch.Tensor) or v.shape != current[k].shape or v.dtype != current[k].dtype:
                raise ValueError(f"checkpoint parameter {k!r} has the wrong shape or dtype")
        epoch, batch = state["epoch"], state["batch"]
        if not (isinstance(epoch, int) and isinstance(batch, int) and epoch >= 0 and batch >= 0):
            raise ValueError("checkpoint position (epoch, batch) is invalid")
        if batch > len(self.batches(epoch)):
            raise ValueError(f"checkpoint batch {batch} is past the end of the epoch")
        envelope = state["envelope"]
        new_envelope = None
        if self.envelope is not None:
            if not (isinstance(envelope, list) and len(envelope) == len(self.fanouts)):
                raise ValueError("checkpoint envelope does not match the engine's layers")
            new_envelope = Envelope(envelope, "checkpoint", fanouts=self.fanouts,
                                    batch_size=self.rows, num_nodes=self.g.num_nodes,
                                    settings=self.envelope.settings,
                                    max_degree=self.envelope.max_degree)
            new_envelope.check(self.fanouts, self.rows, self.g.num_nodes)
        probe = make_optimizer(_clone_module(self.model), self.config["optimizer"], self.config["lr"],
                               self.config["weight_decay"])
        try:
            probe.load_state_dict(state["optimizer"])
            _check_optimizer_state(probe, state["optimizer"])
        except Exception as exc:
            raise ValueError(f"checkpoint optimizer state does not fit this model: {exc}") from None
        # All checks passed: assign. In place, so static buffers (and a captured graph) stay valid.
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                v.copy_(model_state[k].to(v.device))
        _copy_optimizer_state(self.optimizer, state["optimizer"])
        if hasattr(self.optimizer, "_lr"):
            for group, tensor in zip(self.optimizer.param_groups, self.optimizer._lr):
                tensor.fill_(float(group["lr"]))
        self.epoch, self.batch = epoch, batch
        self._next_batch = -1
        if new_envelope is not None and new_envelope.sizes != self.envelope.sizes:
            self.envelope = new_envelope
            self._build()
        return self


def _never_rewinds(first: int) -> None:
    raise RuntimeError("the dynamic pipeline reported an overflow; it has no envelope to grow")


def _clone_module(model):
    import copy
    return copy.deepcopy(model).cpu()


def _optimizer_state_to_cpu(state: dict) -> dict:
    out = {"param_groups": [dict(g) for g in state["param_groups"]], "state": {}}
    for k, s in state["state"].items():
        out["state"][k] = {n: (v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v)
                           for n, v in s.items()}
    return out


def _check_optimizer_state(probe, state: dict) -> None:
    params = [p for g in probe.param_groups for p in g["params"]]
    for i, p in enumerate(params):
        s = state["state"].get(i, {})
        for name in ("exp_avg", "exp_avg_sq"):
            if name in s and s[name].shape != p.shape:
                raise ValueError(f"state {name} of parameter {i} has shape {tuple(s[name].shape)}, "
                                 f"expected {tuple(p.shape)}")


def _copy_optimizer_state(optimizer, state: dict) -> None:
    """Copy saved optimizer state into the existing state tensors (keeps their addresses)."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for group, saved in zip(optimizer.param_groups, state["param_groups"]):
        for key, value in saved.items():
            if key != "params":
                group[key] = value
    for i, p in enumerate(params):
        saved = state["state"].get(i)
        if saved is None:
            continue
        current = optimizer.state[p]
        for name, value in saved.items():
            if isinstance(value, torch.Tensor) and isinstance(current.get(name), torch.Tensor):
                current[name].copy_(value.to(current[name].device, current[name].dtype))
            else:
                current[name] = value.to(p.device) if isinstance(value, torch.Tensor) else value
