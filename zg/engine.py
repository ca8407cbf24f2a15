"""zg.Engine: one training iteration as one fixed launch structure, captured and replayed.

Where it sits: on top of the envelope pipeline. The whole chain

    seeds -> sample -> compact -> gather -> forward -> loss -> backward -> step

runs on buffers allocated once (the *static step*). The only per-iteration host work is
writing the batch's seed ids, its seed count and its random key into static buffers.

* On CUDA (``capture=True``): the static step is warmed up on a side stream with its optimizer
  step disabled, then captured into one ``torch.cuda.CUDAGraph``; every iteration is a replay.
* On the CPU there is no CUDA Graph: the same static step runs eagerly on the same buffers.
  ``zg.audit.SyncAudit`` (0 host syncs per iteration) and stable buffer addresses are the
  evidence that it would be capturable.
* ``capture=False`` runs the envelope pipeline eagerly (fresh tensors each step), and
  ``pipeline="dynamic"`` the host-mediated pipeline: comparisons are one flag apart.

Overflow is never silent (exact rewind):

1. The step keeps a sticky device flag ``overflowed`` and the index of the first overflowed
   batch.
2. From that batch on, every optimizer step is skipped *on the device* (DeviceAdam's ``apply``
   flag): parameters, Adam moments and step counters stay bit-for-bit unchanged.
3. Every ``poll_every`` iterations the host copies the flag into pinned memory without
   blocking and records an event; at the next poll it reads the copy only if the event has
   completed (``event.query()``), so the steady state never blocks. The end of an epoch is a
   real synchronisation point anyway: there the host reads the flag directly.
4. On an overflow the host grows the envelope (``Envelope.grow``), rebuilds and re-captures the
   step, and resumes from the first overflowed batch.

So whatever the envelope, exactly the same batches are applied in the same order as in a run
that never overflowed; the parameters agree up to floating-point reassociation, and bitwise
when the envelope sizes are equal.

Randomness: sampling is keyed by (seed, epoch, batch) (``zg.sampling.batch_key``); dropout
draws from torch's generator, reseeded with the same key before every iteration, so a rewound
batch draws the same dropout masks as the first time.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from .envelope import Envelope
from .graph import Graph
from .models import _BlockModel
from .optim import DeviceAdam
from .pipeline import (STAGES, DynamicPipeline, EnvelopePipeline, epoch_order, make_optimizer,
                       masked_cross_entropy)
from .sampling import EnvelopeSampler, batch_key, check_fanouts, mix64

__all__ = ["Engine", "EpochStats", "CHECKPOINT_FORMAT"]

_COPIED = object()      # a finished host-side poll copy (CPU)
CHECKPOINT_FORMAT = "zg.engine"
CHECKPOINT_VERSION = 1
ENGINE_STAGES = ("sample", "compact", "gather", "forward", "backward", "step")


@dataclass
class EpochStats:
    """What one call of :meth:`Engine.train_epoch` did and measured.

    seconds: wall clock of the epoch. iterations: batches applied. host_syncs: host syncs per
    iteration, counted by SyncAudit over the first ``audit_iterations`` steady-state
    iterations (None if not audited). overflows: overflow events (each one rewinds).
    replays: executions of the static step (CUDA Graph replays on a GPU), rewound ones
    included. rewound_batches: batches executed again after a rewind. peak_bytes: CUDA
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


def _int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


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
        g: the graph (features, labels, ``train_idx``); moved to ``device``.
        model: a zg model (``zg.models.SAGE`` / ``GCN`` / ``GAT``); moved to ``device``.
        fanouts: per layer, input layer first. batch_size: seeds per iteration.
        envelope: "profiled" (default), "worst_case", or a :class:`zg.Envelope`.
        optimizer: "adam" (DeviceAdam) or "sgd"; lr, weight_decay: its settings.
        device: "cpu" or "cuda[:i]".
        capture: None (default: capture when possible), True (static step; a CUDA Graph on a
            GPU, the same static step eagerly on the CPU) or False (eager envelope pipeline).
        pipeline: "envelope" (default) or "dynamic" (the host-mediated reference).
        poll_every: iterations between asynchronous overflow polls.
        seed: fixes sampling, dropout and the seed order of every epoch.
        audit_iterations: steady-state iterations per epoch run under SyncAudit (0 to skip).
        trace: record (epoch, batch, node-set hash, applied) of every executed step, for tests
            and notebooks (adds one tiny device write per step).
    """

    def __init__(self, g: Graph, model: torch.nn.Module, fanouts: Sequence[int], batch_size: int,
                 envelope: Any = "profiled", optimizer: str = "adam", lr: float = 3e-3,
                 weight_decay: float = 0.0, device: Any = "cpu", capture: Optional[bool] = None,
                 seed: int = 0, pipeline: str = "envelope", poll_every: int = 8,
                 replace: bool = False, audit_iterations: int = 1, trace: bool = False,
                 grow_factor: float = 1.5):
        if not isinstance(g, Graph):
            raise TypeError(f"g must be a zg.Graph, got {type(g).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if pipeline not in ("envelope", "dynamic"):
            raise ValueError(f"pipeline must be 'envelope' or 'dynamic', got {pipeline!r}")
        if capture not in (None, True, False):
            raise TypeError(f"capture must be None, True or False, got {capture!r}")
        if pipeline == "dynamic" and capture:
            raise ValueError("capture=True needs the envelope pipeline: the dynamic pipeline's "
                             "shapes change every iteration, so it cannot be captured")
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device {device!r} is not a valid torch device: {exc}") from None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but CUDA is not available here")
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
        if g.x is None or g.y is None or g.train_idx is None or g.train_idx.numel() == 0:
            raise ValueError("g needs features (x), labels (y) and a non-empty train_idx to train")
        self.fanouts = check_fanouts(fanouts)
        self.batch_size = _int(batch_size, "batch_size", 1)
        self.poll_every = _int(poll_every, "poll_every", 1)
        self.audit_iterations = _int(audit_iterations, "audit_iterations", 0)
        self.seed = _int(seed, "seed", 0)
        if isinstance(model, _BlockModel) and model.num_layers != len(self.fanouts):
            raise ValueError(f"model has {model.num_layers} layers but fanouts has "
                             f"{len(self.fanouts)} entries; give one fanout per layer")
        if not float(grow_factor) > 1.0:
            raise ValueError(f"grow_factor must be > 1, got {grow_factor}")
        self.grow_factor = float(grow_factor)
        self.pipeline_kind = pipeline
        self.replace = replace
        self.trace_enabled = bool(trace)
        self.config = dict(fanouts=self.fanouts, batch_size=self.batch_size, optimizer=optimizer,
                           lr=lr, weight_decay=weight_decay, seed=self.seed, pipeline=pipeline,
                           replace=replace, num_nodes=g.num_nodes, num_edges=g.num_edges,
                           model=type(model).__name__,
                           num_parameters=sum(p.numel() for p in model.parameters()))
        self.g = g.to(self.device)
        self.model = model.to(self.device)
        self.nodes = self.g.train_idx.cpu()
        self.optimizer = make_optimizer(self.model, optimizer, lr, weight_decay)
        self.epoch, self.batch = 0, 0
        self._steps_done = 0
        self.history: List[EpochStats] = []
        self.trace: List[dict] = []
        self._trace_device: List[torch.Tensor] = []

        if pipeline == "dynamic":
            self.capture = False
            self._pipe = DynamicPipeline(self.g, self.model, self.fanouts, self.batch_size,
                                         seed=self.seed, replace=replace)
            self._pipe.optimizer = self.optimizer
            self.envelope = None
            return
        if isinstance(envelope, str):
            if envelope == "profiled":
                envelope = Envelope.profile(self.g, self.fanouts, self.batch_size, replace=replace,
                                            seed=self.seed, nodes=self.nodes)
            elif envelope == "worst_case":
                envelope = Envelope.worst_case(self.g, self.fanouts, self.batch_size)
            else:
                raise ValueError(f"envelope must be 'profiled', 'worst_case' or a zg.Envelope, got {envelope!r}")
        if not isinstance(envelope, Envelope):
            raise TypeError(f"envelope must be a str or zg.Envelope, got {type(envelope).__name__}")
        if envelope.fanouts is None:   # explicit sizes: tell it what it is for, so it can grow
            envelope = Envelope(envelope.sizes, envelope.policy, fanouts=self.fanouts,
                                batch_size=self.batch_size, num_nodes=self.g.num_nodes,
                                observed=envelope.observed, settings=envelope.settings)
        envelope.check(self.fanouts, self.batch_size, self.g.num_nodes)
        self.envelope = envelope
        self.capture = capture is not False
        self.use_cuda_graph = self.capture and self.device.type == "cuda"
        dev = self.device
        # The static buffers: everything the host writes per iteration, and the flags it polls.
        self.seed_buf = torch.zeros(self.batch_size, dtype=torch.int64, device=dev)
        self.num_seeds_buf = torch.zeros((), dtype=torch.int64, device=dev)
        self.key_buf = torch.zeros((), dtype=torch.int64, device=dev)
        self.batch_index_buf = torch.zeros((), dtype=torch.int64, device=dev)
        self.enabled_buf = torch.ones((), dtype=torch.bool, device=dev)
        self.overflowed = torch.zeros((), dtype=torch.bool, device=dev)
        self.first_overflow = torch.full((), -1, dtype=torch.int64, device=dev)
        self.loss_buf = torch.zeros((), dtype=torch.float32, device=dev)
        self.wanted_buf = torch.zeros(len(self.fanouts), dtype=torch.int64, device=dev)
        self.hash_buf = torch.zeros((), dtype=torch.int64, device=dev)
        self.applied_buf = torch.zeros((), dtype=torch.bool, device=dev)
        pin = dev.type == "cuda"
        self._poll_host = torch.zeros(2, dtype=torch.int64, pin_memory=pin)
        self._seed_host = torch.zeros(self.batch_size, dtype=torch.int64, pin_memory=pin)
        self._build()

    # ------------------------------------------------------------------------- the step

    def _build(self) -> None:
        """(Re)build the sampler for the current envelope and, on CUDA, (re)capture the step."""
        self.sampler = EnvelopeSampler(self.g, self.fanouts, self.batch_size, envelope=self.envelope,
                                       replace=self.replace, seed=self.seed)
        self.graph = None
        self._eager_pipe = None
        if not self.capture:
            self._eager_pipe = EnvelopePipeline(self.g, self.model, self.fanouts, self.batch_size,
                                                envelope=self.envelope, replace=self.replace,
                                                seed=self.seed)
            self._eager_pipe.sampler = self.sampler
            self._eager_pipe.optimizer = self.optimizer
            return
        if self.use_cuda_graph:
            self._capture()

    def _static_step(self, clock=None) -> None:
        """sample -> compact -> gather -> forward -> loss -> backward -> step, on static buffers."""
        mb = self.sampler.sample_static(self.seed_buf, self.num_seeds_buf, self.key_buf, clock=clock)
        x = self.g.x.index_select(0, mb.input_nodes)                     # [S0, F]
        y = self.g.y.index_select(0, mb.seeds)                           # [B]
        if clock is not None:
            clock("gather")
        logits = self.model(mb.blocks, x)                                # [B, C]
        valid = torch.arange(self.batch_size, device=self.device) < self.num_seeds_buf
        loss = masked_cross_entropy(logits, y, valid)
        if clock is not None:
            clock("forward")
        # Overflow bookkeeping, all on device: remember the first overflowed batch, stay sticky.
        first_time = mb.overflowed & ~self.overflowed
        self.first_overflow.copy_(torch.where(first_time, self.batch_index_buf, self.first_overflow))
        self.overflowed.copy_(self.overflowed | mb.overflowed)
        apply = ~self.overflowed & self.enabled_buf
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        if clock is not None:
            clock("backward")
        self.optimizer.step(apply=apply)
        self.loss_buf.copy_(loss.detach())
        self.wanted_buf.copy_(mb.wanted)
        self.applied_buf.copy_(apply)
        if self.trace_enabled:
            self.hash_buf.copy_(node_set_hash(mb))
        if clock is not None:
            clock("step")

    def _capture(self) -> None:
        """Warm up on a side stream (optimizer disabled), then capture one CUDA Graph."""
        self.enabled_buf.fill_(False)
        self._load_batch(self.nodes[: self.batch_size], 0, 0)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                self._static_step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._static_step()
        torch.cuda.synchronize(self.device)
        self.overflowed.fill_(False)
        self.first_overflow.fill_(-1)
        self.enabled_buf.fill_(True)

    def _load_batch(self, seeds: torch.Tensor, epoch: int, batch: int) -> None:
        """The only per-iteration host work: seed ids, their count, the key, the batch index."""
        n = seeds.numel()
        self._seed_host[:n].copy_(seeds)
        self.seed_buf[:n].copy_(self._seed_host[:n], non_blocking=True)
        self.num_seeds_buf.fill_(n)
        key = batch_key(self.seed, epoch, batch)
        self.key_buf.fill_(key)
        self.batch_index_buf.fill_(batch)
        torch.manual_seed(key & ((1 << 63) - 1))          # dropout: same masks if rewound

    def _run_static(self, seeds, epoch, batch, clock=None) -> None:
        self._load_batch(seeds, epoch, batch)
        if self.graph is not None and clock is None:
            self.graph.replay()
        else:
            self._static_step(clock)

    # ------------------------------------------------------------------------- polling

    def _poll_start(self):
        """Non-blocking copy of (overflowed, first_overflow) to host memory + an event."""
        flags = torch.stack([self.overflowed.to(torch.int64), self.first_overflow])
        self._poll_host.copy_(flags, non_blocking=True)
        if self.device.type == "cuda":
            event = torch.cuda.Event()
            event.record()
            return event
        return _COPIED          # on the CPU the copy has already happened

    def _poll_ready(self, event) -> bool:
        return event is _COPIED or event.query()

    def _poll_read(self):
        values = self._poll_host.numpy()       # host memory: reading it is not a device sync
        return bool(values[0]), int(values[1])

    # ------------------------------------------------------------------------- training

    def batches(self, epoch: int) -> List[torch.Tensor]:
        order = epoch_order(self.nodes, self.seed, epoch)
        return [order[s: s + self.batch_size] for s in range(0, order.numel(), self.batch_size)]

    def train_epoch(self, max_batches: Optional[int] = None, progress=None) -> EpochStats:
        """Train from the current position to the end of the epoch (or ``max_batches`` batches).

        Returns the :class:`EpochStats` of this call. A call that stops mid-epoch leaves the
        position (epoch, batch) for the next call or a checkpoint.
        """
        from .audit import SyncAudit

        if max_batches is not None:
            max_batches = _int(max_batches, "max_batches", 1)
        epoch = self.epoch
        batches = self.batches(epoch)
        if self.pipeline_kind == "dynamic" or not self.capture:
            return self._train_epoch_eager(epoch, batches, max_batches, progress)
        self.model.train()
        start_time = time.perf_counter()
        end = len(batches) if max_batches is None else min(len(batches), self.batch + max_batches)
        b = self.batch
        losses: List[torch.Tensor] = []
        loss_batches: List[int] = []
        overflows = replays = rewound = 0
        audited = audited_syncs = 0
        pending = None
        seen_max = self.batch
        while b < end:
            audit = None
            if audited < self.audit_iterations and (b > self.batch or self._steps_done):
                audit = SyncAudit()
                audit.__enter__()
            try:
                self._run_static(batches[b], epoch, b)
            finally:
                if audit is not None:
                    audit.__exit__(None, None, None)
                    audited += 1
                    audited_syncs += audit.host_syncs + audit.cuda_sync_warnings
            replays += 1
            self._steps_done += 1
            if b < seen_max:
                rewound += 1
            seen_max = max(seen_max, b + 1)
            losses.append(self.loss_buf.clone())
            loss_batches.append(b)
            if self.trace_enabled:
                self._trace_device.append(torch.stack([self.hash_buf, self.applied_buf.to(torch.int64)]))
                self.trace.append({"epoch": epoch, "batch": b})
            if progress is not None:
                progress.update(1)
            b += 1
            # Asynchronous overflow poll: start a copy now, read it at the next poll if done.
            overflow_at = None
            if pending is not None and self._poll_ready(pending):
                hit, first = self._poll_read()
                pending = None
                if hit:
                    overflow_at = first
            if overflow_at is None and (b - self.batch) % self.poll_every == 0 and pending is None:
                pending = self._poll_start()
            if overflow_at is None and b == end:        # the epoch's end: a real sync point
                self._poll_start()
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                hit, first = self._poll_read()
                pending = None
                if hit:
                    overflow_at = first
            if overflow_at is not None:
                overflows += 1
                b = self._rewind(overflow_at)
                keep = [i for i, lb in enumerate(loss_batches) if lb < b]
                losses = [losses[i] for i in keep]
                loss_batches = [loss_batches[i] for i in keep]
        seconds = time.perf_counter() - start_time
        applied = end - self.batch
        self._advance(epoch, end, len(batches))
        loss = float(torch.stack(losses).mean()) if losses else float("nan")
        stats = EpochStats(epoch=epoch, seconds=seconds, iterations=applied,
                           host_syncs=(audited_syncs / audited) if audited else None,
                           overflows=overflows, replays=replays, rewound_batches=rewound,
                           peak_bytes=self._peak_bytes(), loss=loss,
                           envelope_sizes=list(self.envelope.sizes))
        self.history.append(stats)
        self._flush_trace()
        return stats

    def _rewind(self, first: int) -> int:
        """Grow the envelope, rebuild (re-capture) the step, and return the batch to resume at."""
        wanted = self.wanted_buf.cpu().tolist()          # a rewind is rare: a plain read is fine
        self.envelope = self.envelope.grow(self.grow_factor, observed=wanted)
        self.overflowed.fill_(False)
        self.first_overflow.fill_(-1)
        self._build()
        return first

    def _advance(self, epoch: int, end: int, num_batches: int) -> None:
        if end >= num_batches:
            self.epoch, self.batch = epoch + 1, 0
        else:
            self.epoch, self.batch = epoch, end

    def _train_epoch_eager(self, epoch, batches, max_batches, progress) -> EpochStats:
        """capture=False or pipeline="dynamic": the eager pipelines through the same API."""
        from .audit import SyncAudit

        pipe = self._pipe if self.pipeline_kind == "dynamic" else self._eager_pipe
        self.model.train()
        start_time = time.perf_counter()
        end = len(batches) if max_batches is None else min(len(batches), self.batch + max_batches)
        losses, audited, audited_syncs = [], 0, 0
        for b in range(self.batch, end):
            torch.manual_seed(batch_key(self.seed, epoch, b) & ((1 << 63) - 1))
            if audited < self.audit_iterations and (b > self.batch or self._steps_done):
                with SyncAudit() as audit:
                    losses.append(pipe.train_step(batches[b], epoch, b))
                audited += 1
                audited_syncs += audit.host_syncs + audit.cuda_sync_warnings
            else:
                losses.append(pipe.train_step(batches[b], epoch, b))
            self._steps_done += 1
            if progress is not None:
                progress.update(1)
        seconds = time.perf_counter() - start_time
        overflows = pipe.overflow_count() if self.pipeline_kind == "envelope" else 0
        applied = end - self.batch
        self._advance(epoch, end, len(batches))
        stats = EpochStats(epoch=epoch, seconds=seconds, iterations=applied,
                           host_syncs=(audited_syncs / audited) if audited else None,
                           overflows=overflows, replays=0, rewound_batches=0,
                           peak_bytes=self._peak_bytes(),
                           loss=float(torch.stack(losses).mean()) if losses else float("nan"),
                           envelope_sizes=list(self.envelope.sizes) if self.envelope else [])
        self.history.append(stats)
        return stats

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

    def _peak_bytes(self) -> int:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        if self.envelope is None:
            return 0
        mm = self.envelope.memory_model(self.g.feat_dim, _hidden(self.model), max(self.g.num_classes, 1))
        return int(mm["totals"]["envelope"])

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
        fanouts through the dynamic sampler, keyed by the engine's seed (epoch -2).
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
                from .sampling import DynamicSampler
                sampler = DynamicSampler(self.g, self.fanouts, replace=self.replace, seed=self.seed)
                correct = torch.zeros((), dtype=torch.int64, device=self.device)
                for b, start in enumerate(range(0, idx.numel(), self.batch_size)):
                    seeds = idx[start: start + self.batch_size].cpu()
                    mb = sampler.sample(seeds, epoch=-2, batch=b)
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
        """Write a checkpoint atomically (temp file + rename): model, optimizer, envelope,
        position (epoch, batch) and config. Randomness is keyed by (seed, epoch, batch), so the
        position is the whole RNG state."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(self.state_dict(), f)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

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
                                    batch_size=self.batch_size, num_nodes=self.g.num_nodes,
                                    settings=self.envelope.settings)
            new_envelope.check(self.fanouts, self.batch_size, self.g.num_nodes)
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
        self.epoch, self.batch = epoch, batch
        if new_envelope is not None and new_envelope.sizes != self.envelope.sizes:
            self.envelope = new_envelope
            self._build()
        return self


def _hidden(model) -> int:
    dims = getattr(model, "feature_dims", None)
    return int(dims[1]) if dims and len(dims) > 2 else 1


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
