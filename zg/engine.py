"""zg.Engine: one training iteration, written out once, run in one of five modes.

Where it sits: on top of the samplers (:mod:`zg.sampling`) and the one training step
(:func:`zg.step.train_step`). Every batch runs the same chain, with the same stage names in
code, profiler labels, plots and notebooks:

    seeds -> sample -> compact -> gather -> forward -> loss -> backward -> step

``mode`` says what runs (a *source* of mini-batches, and how the step is launched):

=========== ===================================================================================
"dgl"       DGL's ``NeighborSampler`` behind its ``DataLoader``, with a ``dgl.nn`` model
            (``zg.baselines.dgl.DGLModel``): the standard DGL recipe, the baseline.
"dynamic"   :class:`zg.DynamicSampler`: host-mediated, exact sizes (what frameworks do: every
            hop asks the host how many nodes it found).
"eager"     :class:`zg.EnvelopeSampler`: fixed shapes sized by the envelope, 0 host syncs,
            fresh tensors every step.
"static"    the same envelope step on buffers allocated once. The epoch's seed order goes to
            the device once per epoch (an ``[I, B]`` table); the step reads its batch at a
            device-resident counter, derives the batch's key on the device and advances the
            counter: nothing in it depends on the host. On the CPU this is the capturable
            step run eagerly; ``zg.audit.SyncAudit`` (0 host syncs) and stable buffer
            addresses are the evidence that it could be captured.
"graph"     (CUDA only) the static step captured once into a ``torch.cuda.CUDAGraph`` and
            replayed: per iteration the host only reseeds dropout and replays.
=========== ===================================================================================

All five share the seed order of every epoch (:func:`zg.rng.epoch_batches`), the batches,
the step, the optimizer and the overflow policy, so a comparison is one argument apart.

The overflow policy (:class:`zg.step.OverflowGuard`, :class:`zg.step.OverflowPoll`): an
overflowed batch never changes parameters or optimizer state (the skip happens on the device);
every ``poll_every`` iterations the host reads a copy of the flag, and on an overflow it grows
the envelope from the first overflowed batch's counts, rebuilds (re-captures) the step and
resumes from that batch. Whatever the envelope, the same batches are applied in the same order
as in a run that never overflowed.

Randomness (:mod:`zg.rng`): sampling is keyed by (seed, epoch, batch); dropout is reseeded from
the same key before every iteration, so a rewound batch draws the same masks.

What other trainers change (Grappa workers, the data-parallel trainer) is one :class:`Step`
(their batches, loss, gradient reduction, shared overflow guard, ...). What measures an epoch
(sync audit, trace, progress, stage times) is an observer (:mod:`zg.observe`), attached from
outside the loop.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._checks import int_arg, node_ids_arg
from ._io import atomic_write, fingerprint_mismatch, graph_fingerprint
from .envelope import Envelope
from .graph import Graph
from .models import _BlockModel
from .observe import AuditSyncs, Callbacks, Observer, Progress, Trace
from .optim import DeviceAdam, DeviceSGD, OptimizerSpec, make_optimizer, optimizer_spec
from .rng import (
    EVAL_EPOCH,
    batch_key,
    batch_ranges,
    epoch_batches,
    epoch_key_table,
    seed_dropout,
)
from .sampling import DynamicSampler, EnvelopeSampler, check_fanouts
from .step import STAGES, OverflowGuard, OverflowPoll, StageClock, mean_loss, train_step

__all__ = [
    "Engine",
    "Step",
    "EngineSettings",
    "EpochStats",
    "MODES",
    "CHECKPOINT_FORMAT",
    "ENGINE_STAGES",
]

CHECKPOINT_FORMAT = "zg.engine"
CHECKPOINT_VERSION = 3  # 3: the graph recorded by content (zg._io.graph_fingerprint)
ENGINE_STAGES = STAGES  # one tuple of stage names for the whole kit
MODES = ("dgl", "dynamic", "eager", "static", "graph")
_STATIC_MODES = ("static", "graph")  # the modes that run on the static buffers


@dataclass
class EpochStats:
    """What one call of :meth:`Engine.train_epoch` did and measured.

    seconds: wall clock of the epoch. iterations: batches applied. host_syncs: host syncs per
    steady-state iteration (:class:`zg.observe.AuditSyncs`; None if none was audited).
    cuda_sync_warnings: on CUDA, the syncs torch's sync-debug mode reported over the same
    iterations (a second, independent count; None on the CPU). launches: ops launched per
    steady-state iteration, counted over the same iterations (:func:`zg.audit.launches_op`; on a
    GPU each is a kernel launch unless the step is captured). overflows: overflow events (each
    one rewinds). replays: executions of the step (CUDA Graph replays on a GPU), rewound ones
    included. rewound_batches: batches executed again after a rewind. polls: host reads of the
    overflow flag. peak_bytes: CUDA ``max_memory_allocated`` on a GPU; on the CPU the envelope
    memory model's total. stage_seconds: seconds per stage over the epoch, when a
    :class:`zg.observe.StageTimes` observer ran (empty otherwise).
    """

    epoch: int
    seconds: float
    iterations: int
    host_syncs: float | None
    overflows: int
    replays: int
    rewound_batches: int
    peak_bytes: int
    loss: float
    envelope_sizes: list[int] = field(default_factory=list)
    cuda_sync_warnings: float | None = None
    launches: float | None = None
    polls: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class Step:
    """What another trainer changes in the Engine's iteration; every field has the
    single-process default.

    nodes: the training nodes (default ``g.train_idx``). batches: ``batches(epoch) -> list of
    int64 seed tensors`` replacing the seeded shuffle cut into ``batch_size`` chunks (every
    epoch the same number of batches, each at most ``batch_size`` long). forward: computes the
    logits from (blocks, x) (default the model; e.g. a DDP wrapper). loss: ``loss(logits,
    labels, mb) -> 0-d`` (default :func:`zg.step.masked_cross_entropy`). features:
    ``features(input_nodes) -> x`` replacing the gather from ``g.x`` (a feature-fetching worker
    asks the owners; ``g`` then needs no features). reduce: called after backward, before the
    optimizer step (a gradient all-reduce that may carry the overflow flag). guard: a shared
    :class:`zg.step.OverflowGuard`. before, after: ``f(epoch, batch)`` around every executed
    batch. poll_every: batches between the host's reads of the overflow flag. grow_factor: how
    much an overflowing envelope grows (> 1). allow_tf32: let CUDA matrix products (and cuDNN)
    run in TF32 during the engine's steps and capture (default False: full FP32); torch's
    global flags are set around them and restored after; on the CPU they change nothing.
    """

    nodes: Any = None
    batches: Callable[[int], list[torch.Tensor]] | None = None
    forward: Callable | None = None
    loss: Callable | None = None
    features: Callable | None = None
    reduce: Callable[[], None] | None = None
    guard: OverflowGuard | None = None
    before: Callable[[int, int], None] | None = None
    after: Callable[[int, int], None] | None = None
    poll_every: int = 8
    grow_factor: float = 1.5
    allow_tf32: bool = False

    def __post_init__(self):
        if not isinstance(self.allow_tf32, bool):
            raise TypeError(f"Step.allow_tf32 must be a bool, got {type(self.allow_tf32).__name__}")
        for name in ("batches", "forward", "loss", "features", "reduce", "before", "after"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"Step.{name} must be callable or None, got {type(value).__name__}")
        if self.guard is not None and not isinstance(self.guard, OverflowGuard):
            raise TypeError(
                f"Step.guard must be a zg.step.OverflowGuard or None, got "
                f"{type(self.guard).__name__}"
            )
        self.poll_every = int_arg(self.poll_every, "Step.poll_every", low=1)
        g = self.grow_factor
        if isinstance(g, bool) or not isinstance(g, (int, float)):
            raise TypeError(f"Step.grow_factor must be a number > 1, got {type(g).__name__} {g!r}")
        if not math.isfinite(g) or not 1.0 < g <= 1e6:
            raise ValueError(f"Step.grow_factor must be a finite number in (1, 1e6], got {g!r}")
        self.grow_factor = float(g)


@contextmanager
def matmul_precision(allow_tf32: bool):
    """torch's TF32 flags (CUDA matrix products and cuDNN) set to ``allow_tf32`` inside the
    block, restored after it."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = (matmul.allow_tf32, cudnn.allow_tf32)
    matmul.allow_tf32 = cudnn.allow_tf32 = allow_tf32
    try:
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = before


@dataclass
class EngineSettings:
    """An Engine's settings, recorded once: what :meth:`Engine.save` writes and
    :meth:`Engine.load` checks (those in :data:`CHECKPOINT_KEYS`), and what reports print."""

    fanouts: list[int]
    batch_size: int
    mode: str
    device: str
    seed: int
    replace: bool
    optimizer: str
    lr: float
    weight_decay: float
    kernel: str
    poll_every: int
    grow_factor: float
    model: str
    num_parameters: int
    num_nodes: int
    num_edges: int
    allow_tf32: bool = False  # how it runs (TF32 products on CUDA), not the trajectory's key

    # What a checkpoint must agree on to be loaded: what defines the training trajectory,
    # not how it runs (a static run on the CPU may resume as a CUDA Graph on a GPU).
    CHECKPOINT_KEYS = (
        "fanouts",
        "batch_size",
        "optimizer",
        "lr",
        "weight_decay",
        "seed",
        "replace",
        "num_nodes",
        "num_edges",
        "model",
        "num_parameters",
    )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
            raise ValueError(
                f"device {device!r}: there are only {torch.cuda.device_count()} CUDA device(s) here"
            )
        dev = torch.device("cuda", index)
    return dev


def _check_mode(mode: Any, device: torch.device) -> str:
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
    if mode == "graph" and device.type != "cuda":
        raise ValueError(
            "mode='graph' captures a CUDA Graph, which needs a CUDA device; on the "
            "CPU mode='static' is its twin (the same static step, run eagerly)"
        )
    if mode == "dgl" and device.type != "cpu":
        raise ValueError(
            "mode='dgl' runs on the CPU here (the reference environment's DGL has no CUDA build)"
        )
    return mode


# Old keyword arguments, translated with a DeprecationWarning that names the replacement.
_STEP_KEYWORDS = {
    "nodes": "nodes",
    "batches": "batches",
    "forward": "forward",
    "loss": "loss",
    "features": "features",
    "reduce": "reduce",
    "guard": "guard",
    "before_step": "before",
    "after_step": "after",
    "poll_every": "poll_every",
    "grow_factor": "grow_factor",
}
_OLD_KEYWORDS = (
    "capture",
    "cuda_graph",
    "pipeline",
    "lr",
    "weight_decay",
    "audit_iterations",
    "trace",
) + tuple(_STEP_KEYWORDS)


def _translate_old_keywords(kwargs: dict[str, Any]):
    """(new kwargs, observer changes) for a call that used the old keyword arguments."""
    old = {k: kwargs.pop(k) for k in _OLD_KEYWORDS if k in kwargs}
    for name in ("cuda_graph", "trace"):
        if name in old and not isinstance(old[name], bool):
            raise TypeError(f"{name} must be True or False, got {old[name]!r}")
    if "capture" in old and old["capture"] not in (None, True, False):
        raise TypeError(f"capture must be None, True or False, got {old['capture']!r}")
    if "pipeline" in old and old["pipeline"] not in ("envelope", "dynamic"):
        raise ValueError(
            f"pipeline must be 'envelope' or 'dynamic', got {old['pipeline']!r} "
            "(its replacement: mode='eager' | 'static' | 'dynamic' | 'dgl')"
        )
    audit = old.get("audit_iterations", 0)
    if isinstance(audit, bool) or not isinstance(audit, int) or audit < 0:
        raise ValueError(f"audit_iterations must be an int >= 0, got {audit!r}")
    replaced = []
    if {"capture", "cuda_graph", "pipeline"} & set(old):
        if "mode" in kwargs:
            raise TypeError(
                "give mode=... alone: capture=, cuda_graph= and pipeline= are its old spellings"
            )
        device = _check_device(kwargs.get("device", "cpu"))
        capture, pipeline = old.get("capture"), old.get("pipeline", "envelope")
        if pipeline == "dynamic":
            mode = "dynamic"
        elif capture is False:
            mode = "eager"
        else:
            mode = "graph" if device.type == "cuda" and old.get("cuda_graph", True) else "static"
        kwargs["mode"] = mode
        replaced.append(f"capture/cuda_graph/pipeline -> mode={mode!r}")
    if {"lr", "weight_decay"} & set(old):
        name = kwargs.get("optimizer", "adam")
        if not isinstance(name, str):
            raise TypeError(
                "lr= and weight_decay= go with optimizer='adam' or 'sgd'; an optimizer "
                "object carries its own"
            )
        kwargs["optimizer"] = OptimizerSpec(name, old.get("lr", 3e-3), old.get("weight_decay", 0.0))
        replaced.append("lr/weight_decay -> optimizer=zg.optim.adam(lr=..., weight_decay=...)")
    step_fields = {new: old[k] for k, new in _STEP_KEYWORDS.items() if k in old}
    if step_fields:
        if kwargs.get("step") is not None:
            raise TypeError(f"give {sorted(step_fields)} inside step=zg.Step(...), not beside it")
        kwargs["step"] = Step(**step_fields)
        replaced.append(f"{', '.join(k for k in _STEP_KEYWORDS if k in old)} -> step=zg.Step(...)")
    observers = {k: old[k] for k in ("audit_iterations", "trace") if k in old}
    if observers:
        replaced.append("audit_iterations/trace -> engine.observers (zg.observe.AuditSyncs, Trace)")
    warnings.warn(
        "zg.Engine: old keyword arguments; " + "; ".join(replaced) + " (see docs/what_changed.md)",
        DeprecationWarning,
        stacklevel=3,
    )
    return kwargs, observers


class _OldKeywords(type):
    """Lets ``zg.Engine(..., capture=True, lr=...)`` (the old spelling) keep working for a while,
    with a DeprecationWarning naming each replacement; the constructor itself takes only the
    new arguments."""

    def __call__(cls, *args, **kwargs):
        if len(args) > 5:
            raise TypeError(
                "zg.Engine takes (g, model, fanouts, batch_size, envelope) by position; "
                "give the rest by keyword (mode=, device=, seed=, optimizer=, ...)"
            )
        observers = {}
        if any(k in kwargs for k in _OLD_KEYWORDS):
            kwargs, observers = _translate_old_keywords(kwargs)
        engine = super().__call__(*args, **kwargs)
        if "audit_iterations" in observers:
            n = observers["audit_iterations"]
            engine.observers = [AuditSyncs(n)] if n else []
        if observers.get("trace"):
            engine.observers.append(Trace())
        return engine


class Engine(metaclass=_OldKeywords):
    """Train a zg model: the chain of :mod:`zg.engine`'s docstring in one of :data:`MODES`.

    Args:
        g: the graph (features, labels, ``train_idx``); moved to ``device``. The Engine keeps
            its own Graph object and a copy of the training nodes, so a later reassignment of
            ``g.x`` or ``g.y`` is not seen (build a new Engine); in-place changes to the feature
            and label tensors are (they are shared).
        model: a zg model (``zg.models.SAGE`` / ``GCN`` / ``GAT``; with mode "dgl" a
            ``zg.baselines.dgl.DGLModel``); moved to ``device``.
        fanouts: per layer, input layer first. batch_size: seeds per iteration (buffers are
            sized by ``min(batch_size, training nodes)``).
        envelope: "profiled" (default), "worst_case", or a :class:`zg.Envelope` (envelope modes).
        mode: "dgl" | "dynamic" | "eager" | "static" (default) | "graph" (CUDA): see the module.
        device: "cpu" or "cuda[:i]".
        seed: fixes sampling, dropout and the seed order of every epoch.
        replace: sample neighbours with replacement.
        optimizer: "adam" (default) | "sgd" | ``zg.optim.adam(lr=..., weight_decay=...)`` |
            ``zg.optim.sgd(...)`` | a ``zg.optim.DeviceAdam`` / ``DeviceSGD`` over the model's
            parameters. The learning rate lives in a device tensor: :meth:`set_lr` changes it,
            also after capture.
        kernel: "auto" (default: the compiled numba kernels on the CPU when numba is
            installed), "fused" (those kernels) or "torch" (the torch reference of every kernel,
            sampling and aggregation, as CUDA runs them). The same samples either way, bit for
            bit; the fused sampler runs below torch's dispatcher, so SyncAudit sees the rest of
            the step only, and ``kernel="torch"`` audits the capturable sampling ops too.
        step: a :class:`Step` (what another trainer changes; default: single process).

    Attributes: ``observers`` (list of :class:`zg.observe.Observer`; default audits one steady
    iteration per epoch), ``settings`` (:class:`EngineSettings`), ``history`` (EpochStats of
    every call of :meth:`train_epoch`), ``envelope`` (None in modes "dgl" and "dynamic").
    """

    def __init__(
        self,
        g: Graph,
        model: torch.nn.Module,
        fanouts: Sequence[int],
        batch_size: int,
        envelope: Any = "profiled",
        *,
        mode: str = "static",
        device: Any = "cpu",
        seed: int = 0,
        replace: bool = False,
        optimizer: Any = "adam",
        kernel: str = "auto",
        step: Step | None = None,
    ):
        if not isinstance(g, Graph):
            raise TypeError(f"g must be a zg.Graph, got {type(g).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.device = _check_device(device)
        mode = _check_mode(mode, self.device)
        step = Step() if step is None else step
        if not isinstance(step, Step):
            raise TypeError(f"step must be a zg.Step or None, got {type(step).__name__}")
        self.step = step
        if mode == "dgl" and isinstance(model, _BlockModel):
            raise TypeError(
                "mode='dgl' trains a dgl.nn model (zg.baselines.dgl.DGLModel); a zg "
                "model reads padded zg blocks: use mode 'dynamic', 'eager' or 'static'"
            )
        if mode != "dgl" and step.forward is None and not isinstance(model, _BlockModel):
            raise TypeError(
                f"model must be a zg model (zg.models.SAGE, GCN or GAT: it reads padded "
                f"zg blocks), got {type(model).__name__}"
            )
        if not (
            isinstance(envelope, Envelope)
            or (isinstance(envelope, str) and envelope in ("profiled", "worst_case"))
        ):
            raise (ValueError if isinstance(envelope, str) else TypeError)(
                f"envelope must be 'profiled', 'worst_case' or a zg.Envelope, got {envelope!r}"
            )
        if not isinstance(kernel, str) or kernel not in ("auto", "fused", "torch"):
            raise ValueError(f"kernel must be 'auto', 'fused' or 'torch', got {kernel!r}")
        if (g.x is None and step.features is None) or g.y is None:
            raise ValueError("g needs features (x) and labels (y) to train")
        nodes = step.nodes
        if nodes is None:
            if g.train_idx is None or g.train_idx.numel() == 0:
                raise ValueError("g needs a non-empty train_idx to train (or give Step(nodes=...))")
            nodes = g.train_idx
        fanouts = check_fanouts(fanouts)
        batch_size = int_arg(batch_size, "batch_size", low=1)
        seed = int_arg(seed, "seed", low=0, high=2**63 - 1)  # an int64 (a device tensor)
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be a bool, got {type(replace).__name__}")
        if isinstance(model, _BlockModel):
            _check_model_fits(model, g, fanouts, step.features is None)
        # The kit's own id checks (integers, 1-d, distinct, in range; a mask or floats are
        # refused), on a copy: a later in-place change of g.train_idx must not reach the engine.
        self.nodes = node_ids_arg(
            nodes.cpu() if isinstance(nodes, torch.Tensor) else nodes,
            "Step.nodes" if step.nodes is not None else "g.train_idx",
            g.num_nodes,
            device=torch.device("cpu"),
        ).clone()
        if g.y is not None and not bool((g.y.cpu()[self.nodes] >= 0).any()):
            raise ValueError(
                f"none of the {self.nodes.numel()} training nodes has a label (y >= 0): "
                "the loss would be 0 and no parameter would ever change"
            )
        # Buffers hold at most the training set: batch 10^6 on 300 nodes is 300 rows.
        self.rows = batch_size if step.batches is not None else min(batch_size, self.nodes.numel())

        self.g = g.to(self.device)
        self.model = model.to(self.device)
        if isinstance(self.model, _BlockModel):
            self.model.set_kernel(kernel)
        self.optimizer = _build_optimizer(optimizer, self.model)
        group = self.optimizer.param_groups[0]
        self.settings = EngineSettings(
            fanouts=fanouts,
            batch_size=batch_size,
            mode=mode,
            device=str(self.device),
            seed=seed,
            replace=replace,
            optimizer=type(self.optimizer).__name__.replace("Device", "").lower(),
            lr=float(group["lr"]),
            weight_decay=float(group.get("weight_decay", 0.0)),
            kernel=kernel,
            poll_every=step.poll_every,
            grow_factor=step.grow_factor,
            model=type(model).__name__,
            num_parameters=sum(p.numel() for p in model.parameters()),
            num_nodes=g.num_nodes,
            num_edges=g.num_edges,
            allow_tf32=step.allow_tf32,
        )
        self.features = step.features if step.features is not None else self.g.x
        self.guard = (
            step.guard if step.guard is not None else OverflowGuard(len(self.fanouts), self.device)
        )
        self.observers: list[Observer] = [AuditSyncs(1)]
        self._callbacks = [Callbacks(step.before, step.after)] if step.before or step.after else []

        self.epoch, self.batch = 0, 0  # the position: the next batch to train
        self.steps_done = 0
        self.history: list[EpochStats] = []
        self.last_batch = None  # the MiniBatch of the last executed step
        self._captured_batch = None  # mode "graph": the captured step's MiniBatch
        self.applied: torch.Tensor | None = None  # bool []: whether that step was applied
        self.clock: StageClock | None = None  # lent by a zg.observe.StageTimes observer
        self.graph = None  # the CUDA Graph (mode "graph")
        self.epoch_table: torch.Tensor | None = None  # int64 [I, rows + 2 + hops]: the batches
        self.epoch_seeds: torch.Tensor | None = None  # int64 [I, rows]: this epoch's batches
        self._loaded_epoch: int | None = None
        self._epoch_batches: tuple | None = None  # (epoch, its batch list)
        self._next_batch = 0  # where the device counter points

        self.envelope: Envelope | None = None
        if self.mode == "dgl":
            from .baselines.dgl import DGLSource

            self.source = DGLSource(
                self.g,
                self.fanouts,
                self.rows,
                replace=replace,
                seed=self.seed,
                batches=self.batches,
            )
            return
        if self.mode == "dynamic":
            self.source = DynamicSampler(self.g, self.fanouts, replace=replace, seed=self.seed)
            return
        self.envelope = Envelope.resolve(
            envelope,
            self.g,
            self.fanouts,
            self.rows,
            replace=replace,
            seed=self.seed,
            nodes=self.nodes,
        )
        if self.mode in _STATIC_MODES:
            dev = self.device
            # The static buffers: the step's inputs and outputs, and the flags the host polls.
            self.counter = torch.zeros((), dtype=torch.int64, device=dev)  # the batch counter
            self.loss_buf = torch.zeros((), dtype=torch.float32, device=dev)
            self.applied_buf = self.guard.decision  # the step's gate, written by guard.apply()
        self._build()

    # The settings live in one record; these read it.
    mode = property(lambda self: self.settings.mode, doc="What runs (:data:`MODES`).")
    fanouts = property(lambda self: self.settings.fanouts, doc="Per layer, input layer first.")
    batch_size = property(lambda self: self.settings.batch_size, doc="Seeds per iteration.")
    seed = property(lambda self: self.settings.seed, doc="Sampling, dropout and seed order.")
    replace = property(lambda self: self.settings.replace, doc="Sampling with replacement.")
    kernel = property(lambda self: self.settings.kernel, doc='"auto" | "fused" | "torch".')

    # ------------------------------------------------------------------------- the loop

    def train_epoch(
        self, max_batches: int | None = None, observers: Sequence[Observer] = ()
    ) -> EpochStats:
        """Train from the current position to the end of the epoch (or ``max_batches`` batches).

        Returns the :class:`EpochStats` of this call. A call that stops mid-epoch leaves the
        position (epoch, batch) for the next call or a checkpoint. ``observers``: more
        :class:`zg.observe.Observer` s for this call, after ``self.observers``. A non-finite
        epoch loss stops training with a FloatingPointError naming the likely causes.
        """
        if max_batches is not None:
            max_batches = int_arg(max_batches, "max_batches", low=1)
        epoch, first = self.epoch, self.batch
        batches = self._load_epoch(epoch)
        end = len(batches) if max_batches is None else min(len(batches), first + max_batches)
        watch = [*self.observers, *observers, *self._callbacks]
        poll = OverflowPoll(self.guard, self.settings.poll_every, first, end)
        self.model.train()
        self.guard.reset()
        for o in watch:
            o.epoch_start(self, epoch, first)
        if self.mode == "dgl":  # DGL's loader starts before the clock, as zg's table loads
            self.source.prepare(epoch, first)
        losses: dict[int, torch.Tensor] = {}
        start_time = time.perf_counter()
        b = first
        while b < end:
            for o in watch:
                o.batch_start(self, epoch, b)
            # sample -> compact -> gather -> forward -> loss -> backward -> step (gated on device)
            losses[b] = self._run(batches, epoch, b, self.clock)
            self.steps_done += 1
            for o in reversed(watch):
                o.batch_end(self, epoch, b)
            overflowed_at = poll.after(b)  # the host looks every poll_every batches
            b += 1
            if overflowed_at is not None:  # never applied: grow, rebuild, resume there
                losses = {k: v for k, v in losses.items() if k < overflowed_at}
                self._grow()
                b = overflowed_at
        seconds = time.perf_counter() - start_time
        self.epoch, self.batch = (epoch + 1, 0) if end >= len(batches) else (epoch, end)
        loss = mean_loss(losses)
        stats = EpochStats(
            epoch=epoch,
            seconds=seconds,
            iterations=len(losses),
            host_syncs=None,
            overflows=poll.overflows,
            replays=poll.executed,
            rewound_batches=poll.rewound,
            peak_bytes=self._peak_bytes(),
            loss=loss,
            polls=poll.polls,
            envelope_sizes=list(self.envelope.sizes) if self.envelope else [],
        )
        for o in watch:
            o.epoch_end(self, stats)
        self.history.append(stats)
        if not math.isfinite(loss):
            raise FloatingPointError(
                f"epoch {epoch}: the mean training loss is {loss}. Likely causes: non-finite "
                "features (g.x holds NaN/inf), a learning rate too large for this model, or "
                "labels outside [0, num_classes). Training stopped; the parameters are those "
                "after the epoch"
            )
        return stats

    def _run(self, batches: list[torch.Tensor], epoch: int, b: int, clock=None) -> torch.Tensor:
        """Batch ``b`` of ``epoch``, its step gated by the overflow guard; its loss (device)."""
        # Drop the last batch's tensors before sampling this one: kept alive, they would make
        # the next step allocate (and on the CPU page-fault) fresh buffers instead of reusing.
        self.last_batch = None
        seed_dropout(batch_key(self.seed, epoch, b))  # the same masks if rerun
        if self.mode in _STATIC_MODES:  # the device reads batch b itself
            if self._next_batch != b:  # only after a rewind or a jump
                self.counter.fill_(b)
            self._next_batch = b + 1
            if self.graph is not None and clock is None:
                self.graph.replay()
                self.last_batch = self._captured_batch  # rewritten by every replay
            else:
                with matmul_precision(self.settings.allow_tf32):
                    self._static_step(clock)
            return self.loss_buf.clone()
        mb = self.source.sample(batches[b], epoch, b, clock=clock)  # sample -> compact
        with matmul_precision(self.settings.allow_tf32):
            loss, self.last_batch, self.applied = train_step(
                mb,
                self.model,
                self.optimizer,
                self.features,
                self.g.y,
                guard=self.guard,
                batch=b,
                loss=self.step.loss,
                forward=self.step.forward,
                reduce=self.step.reduce,
                clock=clock,
            )
        return loss

    def _static_step(self, clock=None) -> None:
        """The capturable step on static buffers: it reads batch ``counter`` of the epoch table,
        derives its key on the device and advances the counter; nothing depends on the host."""
        b, rows = self.counter, self.rows  # int64 [], int
        row = self.epoch_table.index_select(0, b.view(1)).view(-1)  # [rows + 2 + hops]
        seeds, num_seeds, keys = row[:rows], row[rows], row[rows + 1 :]  # views
        mb = self.source.sample_static(seeds, num_seeds, keys[0], clock=clock, hop_keys=keys[1:])
        loss, self.last_batch, apply = train_step(
            mb,
            self.model,
            self.optimizer,
            self.features,
            self.g.y,
            guard=self.guard,
            batch=b,
            loss=self.step.loss,
            forward=self.step.forward,
            reduce=self.step.reduce,
            clock=clock,
        )
        self.loss_buf.copy_(loss)
        self.applied = apply  # the guard's decision buffer (applied_buf)
        self.counter.add_(1)

    # ------------------------------------------------------------------------- the envelope

    @property
    def overflowed(self) -> torch.Tensor:
        """bool [] device: the sticky overflow flag (see :class:`zg.step.OverflowGuard`)."""
        return self.guard.overflowed

    def _build(self) -> None:
        """(Re)build the sampler for the current envelope and, in mode "graph", (re)capture."""
        self.source = EnvelopeSampler(
            self.g,
            self.fanouts,
            self.rows,
            envelope=self.envelope,
            replace=self.replace,
            seed=self.seed,
            kernel=self.kernel,
        )
        self.graph = None
        if self.mode == "graph" and self.epoch_seeds is not None:
            self._capture()

    def _grow(self) -> None:
        """After an overflow: grow the envelope from the first overflowed batch's counts and
        rebuild. Under a shared guard only the processes that overflowed grow; all resume."""
        if self.envelope is None:
            raise RuntimeError(
                f"mode {self.mode!r} reported an overflow; it has no envelope to grow"
            )
        if bool(self.guard.local):  # a rewind is rare: plain reads are fine
            wanted = self.guard.first_wanted.cpu().tolist()
            self.envelope = self.envelope.grow(self.settings.grow_factor, observed=wanted)
            self._build()
        self._next_batch = -1  # the counter must be set again
        self.guard.reset()

    def _capture(self) -> None:
        """Warm up on a side stream (optimizer disabled), then capture one CUDA Graph."""
        dev = self.device
        with torch.cuda.device(dev), matmul_precision(self.settings.allow_tf32):
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
            self._captured_batch = self.last_batch  # its tensors live in the graph's pool
            torch.cuda.synchronize(dev)
            self.guard.reset()
            self.guard.enabled.fill_(True)
            self.counter.fill_(self._next_batch)

    def _load_epoch(self, epoch: int) -> list[torch.Tensor]:
        """The epoch's batches; in the static modes also uploaded to the device table once.
        The list is kept, so ``run_batch`` in a loop (profilers, benchmarks) does not redo the
        epoch's permutation on every call."""
        if self._epoch_batches is not None and self._epoch_batches[0] == epoch:
            batches = self._epoch_batches[1]
        else:
            batches = self.batches(epoch)
            self._epoch_batches = (epoch, batches)
        if self.mode not in _STATIC_MODES or self._loaded_epoch == epoch:
            return batches
        count, rows = len(batches), self.rows
        # One int64 table, one row per batch: [seeds (padded) | count | key | hop keys], so the
        # step reads its batch with one index_select; epoch_seeds / epoch_counts / epoch_keys
        # are views of it.
        keys = epoch_key_table(self.seed, epoch, count, len(self.fanouts))  # [I, 1 + hops]
        host = torch.zeros(count, rows + 1 + keys.shape[1], dtype=torch.int64)
        for i, seeds in enumerate(batches):
            host[i, : seeds.numel()] = seeds
            host[i, rows] = seeds.numel()
        host[:, rows + 1 :] = keys
        if self.device.type == "cuda":
            host = host.pin_memory()
        rebuilt = self.epoch_table is None or self.epoch_table.shape != host.shape
        if rebuilt:
            self.epoch_table = torch.zeros(host.shape, dtype=torch.int64, device=self.device)
            self.epoch_seeds = self.epoch_table[:, :rows]  # [I, rows]
            self.epoch_counts = self.epoch_table[:, rows]  # [I]
            self.epoch_keys = self.epoch_table[:, rows + 1 :]  # [I, 1 + hops] (zg.rng)
        # Stream-ordered after every earlier replay; the pinned source stays referenced (and the
        # caching host allocator keeps it until the copy ran) so it is never overwritten early.
        self.epoch_table.copy_(host, non_blocking=True)
        self._epoch_host = host
        self._loaded_epoch = epoch
        if rebuilt and self.mode == "graph":
            self._capture()
        return batches

    # ------------------------------------------------------------------------- one batch

    def batches(self, epoch: int) -> list[torch.Tensor]:
        """The seed tensors (host, int64) of every batch of ``epoch``, in order."""
        if self.step.batches is None:
            return epoch_batches(self.nodes, self.seed, epoch, self.rows)
        out = [torch.as_tensor(b, dtype=torch.int64).cpu() for b in self.step.batches(epoch)]
        # A data-parallel share may be empty; the static step runs it as a no-op that still
        # joins the gradient all-reduce. The other modes have no such step, so they refuse it.
        low = 0 if self.mode in _STATIC_MODES else 1
        if not out or any(b.numel() > self.rows or b.numel() < low for b in out):
            raise ValueError(
                f"Step.batches({epoch}) gave no batch, a batch of more than "
                f"batch_size={self.rows} seeds, or an empty one (only modes 'static' "
                "and 'graph' take empty batches)"
            )
        return out

    def run_batch(
        self, batch: int, epoch: int | None = None, clock: StageClock | None = None
    ) -> torch.Tensor:
        """Run one training iteration on batch ``batch`` of ``epoch`` (default: the current
        epoch), outside the epoch loop: what profilers and benchmarks time. It trains (use an
        engine whose state you no longer need). ``clock``: a :class:`zg.step.StageClock` the
        stages lap into (a CUDA Graph cannot be split: with a clock the static step runs
        uncaptured). Returns the loss tensor (device)."""
        epoch = self.epoch if epoch is None else int_arg(epoch, "epoch", low=0)
        batches = self._load_epoch(epoch)
        batch = int_arg(batch, "batch", low=0) % len(batches)
        return self._run(batches, epoch, batch, clock)

    def sample(self, batch: int, epoch: int | None = None):
        """Only the sampling of batch ``batch`` of ``epoch`` (sample -> compact): its
        :class:`zg.MiniBatch`, the same one the step would train on. What a sampler benchmark times."""
        epoch = self.epoch if epoch is None else int_arg(epoch, "epoch", low=0)
        batches = self._load_epoch(epoch)
        batch = int_arg(batch, "batch", low=0) % len(batches)
        return self.source.sample(batches[batch], epoch, batch)

    def set_lr(self, lr: float) -> None:
        """Change the learning rate in place (a captured step sees the new value)."""
        self.optimizer.set_lr(lr)
        self.settings.lr = float(lr)

    def applied_trace(self) -> list[tuple]:
        """(epoch, batch, node-set hash) of every applied step, in order: needs a
        :class:`zg.observe.Trace` in ``observers`` (``engine.observers.append(Trace())``)."""
        traces = [o for o in self.observers if isinstance(o, Trace)]
        if not traces:
            raise ValueError(
                "no zg.observe.Trace is attached: engine.observers.append(zg.observe.Trace()) "
                "before training"
            )
        return traces[0].applied()

    def fit(self, epochs: int, progress: bool = True) -> list[EpochStats]:
        """Train ``epochs`` epochs with a tqdm progress bar; returns their EpochStats."""
        epochs = int_arg(epochs, "epochs", low=1)
        bar = None
        if progress:
            try:
                from tqdm.auto import tqdm

                bar = tqdm(
                    total=epochs * len(self.batches(self.epoch)), desc="training", unit="batch"
                )
            except ImportError:
                bar = None
        watch = [Progress(bar)] if bar is not None else []
        out = []
        try:
            for _ in range(epochs):
                stats = self.train_epoch(observers=watch)
                out.append(stats)
                if bar is not None:
                    bar.set_postfix(
                        epoch=stats.epoch, loss=f"{stats.loss:.3f}", overflows=stats.overflows
                    )
        finally:
            if bar is not None:
                bar.close()
        return out

    # ------------------------------------------------------------------------- memory

    @property
    def hidden_dim(self) -> int:
        """The model's hidden width (1 for a one-layer model), for the memory model."""
        dims = getattr(self.model, "feature_dims", None)
        return int(dims[1]) if dims and len(dims) > 2 else 1

    def memory_model(self) -> dict[str, Any]:
        """The envelope's memory model for this graph and model (see :meth:`zg.Envelope.memory_model`)."""
        if self.envelope is None:
            raise ValueError(f"mode {self.mode!r} has no envelope to model")
        return self.envelope.memory_model(
            self.g.feat_dim, self.hidden_dim, max(int(self.g.num_classes), 1)
        )

    def _peak_bytes(self) -> int:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        if self.envelope is None:
            return 0
        return int(self.memory_model()["totals"]["envelope"])

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
        if not isinstance(self.model, _BlockModel):
            raise TypeError(
                f"evaluate runs zg models; this engine trains a {type(self.model).__name__}"
            )
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

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "settings": self.settings.as_dict(),
            "graph": graph_fingerprint(self.g),
            "model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "optimizer": _optimizer_state_to_cpu(self.optimizer.state_dict()),
            "envelope": None if self.envelope is None else list(self.envelope.sizes),
            "epoch": self.epoch,
            "batch": self.batch,
        }

    def save(self, path: Any) -> Path:
        """Write a checkpoint atomically (:func:`zg._io.atomic_write`: temp file + rename, nothing
        left behind on failure): model, optimizer, envelope, position (epoch, batch), settings.
        Randomness is keyed by (seed, epoch, batch), so the position is the whole RNG state."""
        state = self.state_dict()
        return atomic_write(path, lambda f: torch.save(state, f), name="path", make_parents=True)

    def load(self, path: Any) -> Engine:
        """Restore a checkpoint written by :meth:`save` into this engine.

        Everything is read and checked first (format, version, the settings of
        :data:`EngineSettings.CHECKPOINT_KEYS`, parameter names and shapes, optimizer state);
        only then is anything assigned. The graph is compared by content (structure, features,
        labels and splits, each by its digest): a checkpoint of another graph is refused, the
        differing parts named. A corrupt or mismatched file raises ValueError and leaves the
        engine exactly as it was. Version-1 and -2 checkpoints (which did not record the graph;
        version 1 has ``config`` instead of ``settings``) load too, with a warning that the
        graph could not be checked. To start from another graph's parameters without its
        position, load them into ``engine.model`` with ``load_state_dict``.
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
        version = state.get("version")
        if version not in (1, 2, CHECKPOINT_VERSION):
            raise ValueError(
                f"checkpoint version {version!r} is not supported "
                f"(this zg reads versions 1 to {CHECKPOINT_VERSION})"
            )
        settings_key = "config" if version == 1 else "settings"
        for key in (settings_key, "model", "optimizer", "envelope", "epoch", "batch"):
            if key not in state:
                raise ValueError(f"checkpoint {str(path)!r} lacks {key!r}")
        theirs, mine = state[settings_key], self.settings.as_dict()
        if not isinstance(theirs, dict):
            raise ValueError(f"checkpoint {str(path)!r}: its {settings_key!r} is not a mapping")
        diff = [k for k in EngineSettings.CHECKPOINT_KEYS if theirs.get(k) != mine[k]]
        if diff:
            raise ValueError(
                "checkpoint was written by an engine with different settings: "
                + ", ".join(f"{k}: {theirs.get(k)!r} != {mine[k]!r}" for k in diff)
            )
        if version >= 3:
            differ = fingerprint_mismatch(state.get("graph"), graph_fingerprint(self.g))
            if differ is not None:
                raise ValueError(
                    f"checkpoint {str(path)!r} was written for another graph ({differ})"
                )
        else:
            warnings.warn(
                f"checkpoint {str(path)!r} (version {version}) does not record its graph, "
                "so it cannot be checked to be this engine's graph",
                stacklevel=2,
            )
        current = self.model.state_dict()
        model_state = state["model"]
        if set(model_state) != set(current):
            raise ValueError(
                f"checkpoint parameters {sorted(model_state)} do not match the model's "
                f"{sorted(current)}"
            )
        for k, v in model_state.items():
            if (
                not isinstance(v, torch.Tensor)
                or v.shape != current[k].shape
                or v.dtype != current[k].dtype
            ):
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
            new_envelope = Envelope(
                envelope,
                "checkpoint",
                fanouts=self.fanouts,
                batch_size=self.rows,
                num_nodes=self.g.num_nodes,
                settings=self.envelope.settings,
                max_degree=self.envelope.max_degree,
            )
            new_envelope.check(self.fanouts, self.rows, self.g.num_nodes)
        probe = make_optimizer(
            _clone_module(self.model),
            self.settings.optimizer,
            self.settings.lr,
            self.settings.weight_decay,
        )
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


def _check_model_fits(model: _BlockModel, g: Graph, fanouts: list[int], gathers_x: bool) -> None:
    if model.num_layers != len(fanouts):
        raise ValueError(
            f"model has {model.num_layers} layers but fanouts has "
            f"{len(fanouts)} entries; give one fanout per layer"
        )
    if gathers_x and model.feature_dims[0] != g.feat_dim:
        raise ValueError(
            f"model takes {model.feature_dims[0]} input features but g has feat_dim={g.feat_dim}"
        )
    if model.feature_dims[-1] < int(g.num_classes):
        raise ValueError(
            f"model has {model.feature_dims[-1]} output classes but g's labels "
            f"have num_classes={int(g.num_classes)}; build the model with "
            f"num_classes >= {int(g.num_classes)}"
        )


def _build_optimizer(optimizer: Any, model: torch.nn.Module):
    if isinstance(optimizer, (DeviceAdam, DeviceSGD)):
        return optimizer
    return optimizer_spec(optimizer).build(model)


def _clone_module(model):
    import copy

    return copy.deepcopy(model).cpu()


def _optimizer_state_to_cpu(state: dict) -> dict:
    out = {"param_groups": [dict(g) for g in state["param_groups"]], "state": {}}
    for k, s in state["state"].items():
        out["state"][k] = {
            n: (v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v)
            for n, v in s.items()
        }
    return out


def _check_optimizer_state(probe, state: dict) -> None:
    params = [p for g in probe.param_groups for p in g["params"]]
    for i, p in enumerate(params):
        s = state["state"].get(i, {})
        for name in ("exp_avg", "exp_avg_sq"):
            if name in s and s[name].shape != p.shape:
                raise ValueError(
                    f"state {name} of parameter {i} has shape {tuple(s[name].shape)}, "
                    f"expected {tuple(p.shape)}"
                )


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
