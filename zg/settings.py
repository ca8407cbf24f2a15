"""What an Engine is built with and what it reports: the records beside the loop.

Where it sits: :mod:`zg.engine` builds from these and fills them. :class:`StepHooks` is what
another trainer plugs into the step (Grappa workers, the data-parallel trainer),
:class:`EngineSettings` the settings recorded once (what a checkpoint checks and reports print),
:class:`EpochStats` what one call of :meth:`zg.Engine.train_epoch` measured. The checks of the
build arguments that need a model or a graph live here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from . import kernels
from ._checks import (
    compute_device_arg,
    described,
    int_arg,
    node_ids_arg,
    real_arg,
    returned_logits,
    returned_tensor,
    seed_arg,
)
from .compiled import check_compilable
from .envelope import Envelope
from .graph import Graph, graph_arg
from .models import BlockModel
from .optim import DeviceAdam, DeviceSGD, optimizer_spec
from .sampling import MiniBatch, Sampler, StaticSampler, check_fanouts
from .step import OverflowGuard, _default_loss

__all__ = [
    "EpochStats",
    "StepHooks",
    "EngineSettings",
    "EngineArgs",
    "MODES",
    "MODE_PARTS",
    "check_mode",
    "check_engine_args",
]

MODES = ("dgl", "dynamic", "eager", "static", "graph", "compiled")
# Each mode is a sampler times a launch style: eager (a fresh step per batch), static (the
# capturable step on buffers allocated once), graph (that step captured as one CUDA Graph).
MODE_PARTS = {
    "dgl": ("dgl", "eager"),
    "dynamic": ("dynamic", "eager"),
    "eager": ("envelope", "eager"),
    "static": ("envelope", "static"),
    "graph": ("envelope", "graph"),
    "compiled": ("envelope", "compiled"),  # the static step compiled whole (zg.compiled)
}


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
    :class:`zg.observe.StageTimes` observer ran (empty otherwise). kernel: the kernels that ran
    ("torch", "fused", or "dgl" for DGL's own sampler and layers). interrupted: the call stopped
    on an exception (Ctrl-C, a hook's error); ``iterations`` and ``loss`` then count the batches
    applied before it, the ones the position has passed.
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
    kernel: str = "torch"
    interrupted: bool = False


@dataclass
class StepHooks:
    """What another trainer changes in the Engine's iteration; every field has the
    single-process default.

    nodes: the training nodes (default ``g.train_idx``). batches: ``batches(epoch) -> list of
    int64 seed tensors`` replacing the seeded shuffle cut into ``batch_size`` chunks (every
    epoch the same number of batches, each at most ``batch_size`` long). forward: computes the
    logits from (blocks, x) (default the model; e.g. a DDP wrapper). loss: ``loss(logits,
    labels, mb) -> 0-d``, ``mb`` the minibatch (its ``valid`` mask marks the rows that count;
    default :func:`zg.step.masked_cross_entropy`, which takes ``mb`` or ``mb.valid`` as its
    third argument). features:
    ``features(input_nodes) -> x`` replacing the gather from ``g.x`` (a feature-fetching worker
    asks the owners; ``g`` then needs no features). reduce: called after backward, before the
    optimizer step (a gradient all-reduce that may carry the overflow flag). guard: a shared
    :class:`zg.step.OverflowGuard`. before, after: ``f(epoch, batch)`` around every executed
    batch. poll_every: batches between the host's reads of the overflow flag. grow_factor: how
    much an overflowing envelope grows (> 1).
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

    def __post_init__(self):
        for name in ("batches", "forward", "loss", "features", "reduce", "before", "after"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(
                    f"StepHooks.{name} must be callable or None, got {type(value).__name__}"
                )
        if self.guard is not None and not isinstance(self.guard, OverflowGuard):
            raise TypeError(
                f"StepHooks.guard must be a zg.step.OverflowGuard or None, got "
                f"{type(self.guard).__name__}"
            )
        self.poll_every = int_arg(self.poll_every, "StepHooks.poll_every", low=1)
        self.grow_factor = real_arg(
            self.grow_factor, "StepHooks.grow_factor", low=1.0, low_open=True, high=1e6
        )


@dataclass
class EngineSettings:
    """An Engine's settings, recorded once: what :meth:`Engine.save` writes and
    :meth:`Engine.load` checks (those in :data:`zg.checkpoint.TRAJECTORY_KEYS`), and what
    reports print. ``kernel`` is the kernel that runs ("torch", "fused"; "dgl" in mode "dgl"),
    not the choice that asked for it; ``allow_tf32`` is torch's TF32 setting when the engine
    was built."""

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
    allow_tf32: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, args: EngineArgs, optimizer: Any) -> EngineSettings:
        """The record of an Engine built from ``args`` with this (built) optimizer."""
        group = optimizer.param_groups[0]
        return cls(
            fanouts=args.fanouts,
            batch_size=args.batch_size,
            mode=args.mode,
            device=str(args.device),
            seed=args.seed,
            replace=args.replace,
            optimizer=type(optimizer).__name__.replace("Device", "").lower(),
            lr=float(group["lr"]),
            weight_decay=float(group.get("weight_decay", 0.0)),
            kernel=args.kernel,
            poll_every=args.hooks.poll_every,
            grow_factor=args.hooks.grow_factor,
            model=type(args.model).__name__,
            num_parameters=sum(p.numel() for p in args.model.parameters()),
            num_nodes=args.g.num_nodes,
            num_edges=args.g.num_edges,
            allow_tf32=bool(torch.backends.cuda.matmul.allow_tf32),
        )


# ----------------------------------------------------------------------------- the one check


@dataclass(frozen=True)
class EngineArgs:
    """Every argument of ``zg.Engine(...)`` after :func:`check_engine_args`: the one record the
    Engine's builders take (they do not check again). ``nodes``: host int64 copy of the
    training nodes; ``rows``: the padded batch rows, ``min(batch_size, len(nodes))`` unless
    ``hooks.batches`` gives the batches."""

    g: Graph
    model: torch.nn.Module
    fanouts: list[int]
    batch_size: int
    envelope: Any  # "profiled" | "worst_case" | a zg.Envelope that fits | None (a given sampler)
    mode: str
    device: torch.device
    seed: int
    replace: bool
    optimizer: Any
    kernel: str
    hooks: StepHooks
    sampler: Any
    nodes: torch.Tensor
    rows: int


def check_engine_args(
    g: Any,
    model: Any,
    fanouts: Any,
    batch_size: Any,
    envelope: Any,
    *,
    mode: Any,
    device: Any,
    seed: Any,
    optimizer: Any,
    kernel: Any,
    hooks: Any,
    sampler: Any,
) -> EngineArgs:
    """Check every argument of ``zg.Engine(...)`` once, in one place, and return the record
    (TypeError / ValueError naming the argument otherwise). The graph's structure is checked
    here (one O(N + E) pass and one host read); nothing the Engine builds afterwards checks it
    again."""
    g = graph_arg(g)  # changed in place since it was built? refused, never read
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    device = compute_device_arg(device)
    mode = check_mode(mode, device)
    hooks = StepHooks() if hooks is None else hooks
    if not isinstance(hooks, StepHooks):
        raise TypeError(f"hooks must be a zg.StepHooks or None, got {type(hooks).__name__}")
    # The blocks the model reads are the sampler's: DGL's (mode "dgl", zg.DGLSampler) or zg's.
    dgl_blocks = mode == "dgl" or reads_dgl_blocks(sampler)
    check_model_kind(model, mode, hooks, dgl_blocks)
    if sampler is None:
        envelope = "profiled" if envelope is None else envelope
        if not (
            isinstance(envelope, Envelope)
            or (isinstance(envelope, str) and envelope in ("profiled", "worst_case"))
        ):
            raise (ValueError if isinstance(envelope, str) else TypeError)(
                f"envelope must be 'profiled', 'worst_case' or a zg.Envelope, got {envelope!r}"
            )
    elif envelope is not None:
        raise ValueError(
            "envelope sizes the built-in envelope sampler; with sampler=... the sampler "
            "brings its own sizes: leave envelope out"
        )
    if mode == "compiled":  # the torch code compiled: "auto" is torch, numba is refused
        kernel = "torch" if kernel == "auto" else kernel
        check_compilable(kernels.resolve(kernel, device), hooks)
    kernel = "dgl" if dgl_blocks else kernels.resolve(kernel, device)
    if (g.x is None and hooks.features is None) or g.y is None:
        raise ValueError("g needs features (x) and labels (y) to train")
    nodes = hooks.nodes
    if nodes is None:
        if g.train_idx is None or g.train_idx.numel() == 0:
            raise ValueError(
                "g needs a non-empty train_idx to train (or give StepHooks(nodes=...))"
            )
        nodes = g.train_idx
    fanouts = check_fanouts(fanouts)
    batch_size = int_arg(batch_size, "batch_size", low=1)
    seed = seed_arg(seed)
    if hooks.features is None:
        check_features(g)
    if isinstance(getattr(model, "feature_dims", None), list):  # a zg model or DGLModel
        check_model_fits(model, g, fanouts, hooks.features is None)
    if hooks.guard is not None:
        check_guard(hooks.guard, len(fanouts), device)
    # The kit's own id checks (integers, 1-d, distinct, in range; a mask or floats are
    # refused), on a copy: a later in-place change of g.train_idx must not reach the engine.
    nodes = node_ids_arg(
        nodes.cpu() if isinstance(nodes, torch.Tensor) else nodes,
        "StepHooks.nodes" if hooks.nodes is not None else "g.train_idx",
        g.num_nodes,
        device=torch.device("cpu"),
    ).clone()
    if not bool((g.y.cpu()[nodes] >= 0).any()):
        raise ValueError(
            f"none of the {nodes.numel()} training nodes has a label (y >= 0): "
            "the loss would be 0 and no parameter would ever change"
        )
    # Buffers hold at most the training set: batch 10^6 on 300 nodes is 300 rows.
    rows = batch_size if hooks.batches is not None else min(batch_size, nodes.numel())
    # Sampling with replacement is a sampler's option (the built-in ones sample without).
    replace = False
    if sampler is not None:
        check_sampler(sampler, mode, fanouts, rows, device)
        replace = getattr(sampler, "replace", False) is True
    elif isinstance(envelope, Envelope) and MODE_PARTS[mode][0] == "envelope":
        envelope._check_fits(fanouts, rows, g.num_nodes)
    sampler = sampler if sampler is not None else shorthand_sampler(mode, g, fanouts, seed)
    return EngineArgs(
        g, model, fanouts, batch_size, envelope, mode, device, seed, replace, optimizer,
        kernel, hooks, sampler, nodes, rows,
    )  # fmt: skip


def reads_dgl_blocks(sampler: Any) -> bool:
    """Whether ``sampler`` hands the model DGL's blocks (``block_format = "dgl"``:
    :class:`zg.DGLSampler`), which a ``dgl.nn`` model reads, rather than zg's padded ones."""
    return getattr(sampler, "block_format", "zg") == "dgl"


def shorthand_sampler(mode: str, g: Graph, fanouts: list[int], seed: int) -> Any:
    """The sampler a mode that is a shorthand names, built from checked values, or None:
    ``mode="dgl"`` is ``mode="eager", sampler=zg.DGLSampler(g, fanouts, seed=seed)`` (the
    other modes' samplers are built by the Engine, on its device's copy of the graph)."""
    if mode != "dgl":
        return None
    from .baselines.dgl import DGLSampler  # DGL itself is imported when one is built

    return DGLSampler._checked(g, fanouts, False, seed)


def check_model_kind(
    model: torch.nn.Module, mode: str, hooks: StepHooks, dgl_blocks: bool = False
) -> None:
    """A zg model reads padded zg blocks; a sampler of DGL's blocks (mode "dgl",
    :class:`zg.DGLSampler`) trains a dgl.nn model."""
    if dgl_blocks and isinstance(model, BlockModel):
        if mode == "dgl":
            who, instead = "mode='dgl'", "use mode 'dynamic', 'eager' or 'static'"
        else:
            who, instead = "a sampler of DGL's blocks (zg.DGLSampler)", "give it a zg sampler"
        raise TypeError(
            f"{who} trains a dgl.nn model (zg.baselines.dgl.DGLModel); a zg model reads "
            f"padded zg blocks: {instead}"
        )
    if not dgl_blocks and hooks.forward is None and not isinstance(model, BlockModel):
        raise TypeError(
            f"model must be a zg model (a zg.models.BlockModel: SAGE, GCN, GAT or your own "
            f"subclass; it reads padded zg blocks), got {type(model).__name__}"
        )


def check_sampler(sampler: Any, mode: str, fanouts: list[int], rows: int, device) -> None:
    """A sampler given to the Engine: the :class:`zg.sampling.Sampler` protocol (and
    :class:`zg.sampling.StaticSampler` for the static launches), for these fanouts, rows and
    device."""
    built_in, launch = MODE_PARTS[mode]
    if built_in != "envelope":
        raise ValueError(
            f"mode={mode!r} names its own sampler ({built_in}); with sampler=... choose the "
            "launch style: mode 'eager', 'static' or 'graph'"
        )
    if not isinstance(sampler, Sampler):
        raise TypeError(
            "sampler must implement zg.Sampler (fanouts and sample(seeds, epoch, batch, "
            f"clock=None)), got {type(sampler).__name__}"
        )
    if launch != "eager" and not isinstance(sampler, StaticSampler):
        raise TypeError(
            f"mode={mode!r} runs the static step, which calls sampler.sample_static on fixed "
            f"buffers (zg.StaticSampler: batch_size, sizes, sample_static); "
            f"{type(sampler).__name__} does not have them: use mode='eager'"
        )
    if list(sampler.fanouts) != fanouts:
        raise ValueError(f"sampler.fanouts is {list(sampler.fanouts)} but fanouts is {fanouts}")
    if launch != "eager" and sampler.batch_size != rows:
        raise ValueError(
            f"sampler.batch_size is {sampler.batch_size} but the engine's batches have {rows} "
            "rows (min(batch_size, training nodes)): build the sampler with that batch size"
        )
    where = getattr(sampler, "device", None)
    if where is not None and torch.device(where).type != device.type:
        raise ValueError(f"sampler samples on {where} but the engine trains on {device}")


def check_mode(mode: Any, device: torch.device) -> str:
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


def check_features(g: Graph) -> None:
    """``g.x`` as every mode gathers it (the same check for all of them, before any sampler
    or DGL kernel sees it): a dense floating tensor ``[num_nodes, F]`` with ``F >= 1``,
    contiguous. (:class:`zg.Graph` builds it so; a later assignment to ``g.x`` may not be.)"""
    x = g.x
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"g.x must be a tensor [num_nodes, feat_dim], got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(
            f"g.x must be a dense tensor, got a sparse one (layout {x.layout}); densify it "
            "first: x.to_dense()"
        )
    if not x.is_floating_point():
        raise TypeError(f"g.x must hold floating-point features, got dtype {x.dtype}")
    if x.dim() != 2 or x.shape[0] != g.num_nodes:
        raise ValueError(
            f"g.x must have shape [num_nodes={g.num_nodes}, feat_dim], got {tuple(x.shape)}"
        )
    if x.shape[1] == 0:
        raise ValueError(
            "g.x has 0 feature columns: every model needs at least one input feature per node "
            f"(without features, give a constant one: torch.ones({g.num_nodes}, 1))"
        )
    if not x.is_contiguous():
        raise ValueError(
            f"g.x of shape {tuple(x.shape)} is not contiguous in memory (a transposed or "
            "sliced view); give g.x.contiguous()"
        )


def check_model_fits(model: BlockModel, g: Graph, fanouts: list[int], gathers_x: bool) -> None:
    if model.num_layers != len(fanouts):
        raise ValueError(
            f"model has {model.num_layers} layers but fanouts has "
            f"{len(fanouts)} entries; give one fanout per layer"
        )
    if gathers_x and model.feature_dims[0] != g.feat_dim:
        raise ValueError(
            f"model takes {model.feature_dims[0]} input features but g has feat_dim={g.feat_dim}"
        )
    kinds = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if gathers_x and kinds - {g.x.dtype}:
        raise TypeError(
            f"model has {sorted(str(k) for k in kinds)} parameters but g.x is {g.x.dtype}; "
            f"build the model in {g.x.dtype} (as zg.models does), e.g. model.to({g.x.dtype})"
        )
    if model.feature_dims[-1] < int(g.num_classes):
        raise ValueError(
            f"model has {model.feature_dims[-1]} output classes but g's labels "
            f"have num_classes={int(g.num_classes)}; build the model with "
            f"num_classes >= {int(g.num_classes)}"
        )


def build_optimizer(optimizer: Any, model: torch.nn.Module):
    if isinstance(optimizer, (DeviceAdam, DeviceSGD)):
        return optimizer
    return optimizer_spec(optimizer).build(model)


def check_batches(
    given: Any, epoch: int, num_nodes: int, rows: int, *, allow_empty: bool
) -> list[torch.Tensor]:
    """What ``StepHooks.batches(epoch)`` returned, each batch checked as ``nodes`` is (integer
    ids, 1-d, distinct, in ``[0, num_nodes)``, at most ``rows``) and named
    ``StepHooks.batches(epoch)[i]``: host int64 tensors. ``allow_empty``: a data-parallel share
    may be empty in the static modes (a no-op step that still joins the all-reduce)."""
    name = f"StepHooks.batches({epoch})"
    if not isinstance(given, (list, tuple)):
        raise TypeError(
            f"{name} returned {described(given)}; expected a list of seed tensors, one a batch"
        )
    if not given:
        raise ValueError(
            f"{name} returned an empty {type(given).__name__}; expected a list of seed "
            "tensors, one a batch"
        )
    out = []
    for i, seeds in enumerate(given):
        if isinstance(seeds, torch.Tensor):
            seeds = seeds.detach().cpu()
        if allow_empty and _is_empty(seeds):
            out.append(torch.zeros(0, dtype=torch.int64))
            continue
        try:
            ids = node_ids_arg(
                seeds, f"{name}[{i}]", num_nodes, device=torch.device("cpu"), max_len=rows
            )
        except ValueError as exc:
            if "is empty" in str(exc):
                raise ValueError(
                    f"{exc} (only modes 'static' and 'graph' take empty batches)"
                ) from None
            raise
        out.append(ids.clone())
    return out


def _is_empty(seeds: Any) -> bool:
    """A batch with no seeds (a tensor, array or list of length 0)."""
    try:
        return len(seeds) == 0
    except TypeError:
        return False


# ----------------------------------------------------------------------------- what hooks return


def checked_minibatch(
    mb: Any, sampler: Any, method: str, hops: int, rows: int | None, device: Any = None
) -> MiniBatch:
    """What a sampler's ``sample`` / ``sample_static`` returned, checked where it comes back
    (host metadata only, no device read, so a captured step keeps it): a
    :class:`zg.MiniBatch` with one block per layer, int seeds ``[rows]`` (None: any length),
    an int ``num_seeds`` ``[]``, int ``counts`` ``[hops]`` and a bool ``overflowed`` ``[]``,
    each on ``device`` (the engine's) when given, by :func:`zg._checks.returned_tensor`.
    A TypeError names ``<Sampler class>.<method>()``, what it returned and what it must. A
    sampler class of the kit itself (defined in ``zg``) is not a plug-in: its output is not
    re-checked on the training path."""
    if type(sampler).__module__.partition(".")[0] == "zg":
        return mb  # the kit's own samplers are held to this by their tests, not every iteration
    who = f"{type(sampler).__name__}.{method}()"
    if not isinstance(mb, MiniBatch):
        raise TypeError(
            f"{who} returned {described(mb)}; expected a zg.MiniBatch (seeds, num_seeds, "
            f"blocks: one per layer, counts, overflowed)"
        )
    blocks = mb.blocks
    if not isinstance(blocks, (list, tuple)) or len(blocks) != hops:
        got = f"{len(blocks)} blocks" if isinstance(blocks, (list, tuple)) else described(blocks)
        raise TypeError(
            f"{who} returned a MiniBatch with {got}; expected a list of {hops} blocks, one per "
            "model layer, input layer first"
        )
    on = dict(device=device)
    returned_tensor(mb.seeds, f"{who}.seeds", shape=[rows], kind="integer", **on)
    returned_tensor(mb.num_seeds, f"{who}.num_seeds", shape=[], kind="integer", **on)
    returned_tensor(mb.counts, f"{who}.counts", shape=[hops], kind="integer", **on)
    returned_tensor(mb.overflowed, f"{who}.overflowed", shape=[], kind="bool", **on)
    return mb


def _checked_forward(call: Callable, who: str, num_labels: int, device: torch.device) -> Callable:
    """``call(blocks, x)`` with its logits checked where they come back
    (:func:`zg._checks.returned_logits`)."""

    def forward(blocks, x):
        logits = call(blocks, x)
        returned_logits(logits, who, getattr(blocks[-1], "num_dst_rows", None), num_labels, device)
        return logits

    return forward


def checked_hooks(step: StepHooks, model: Any, num_labels: int, device: torch.device) -> dict:
    """``forward``, ``loss`` and ``features`` of ``step`` for :func:`zg.step.train_step`, each
    wrapped so that a result of the wrong type, shape, dtype or device is refused naming the
    hook (instead of a torch error further down, or a step that trains on it), by the one check
    of plug-in results (:func:`zg._checks.returned_tensor`). Without a ``forward`` hook the
    model's own logits are checked the same way as the loss receives them, named
    ``<Model class>.forward(blocks, x)``. None stays None for ``features``."""
    out: dict[str, Callable | None] = {"forward": None, "loss": None, "features": None}
    if step.forward is not None:
        out["forward"] = _checked_forward(
            step.forward, "StepHooks.forward(blocks, x)", num_labels, device
        )
        model_logits = None
    else:  # the model's own logits, checked as the loss receives them (no frame in between)
        model_logits = f"{type(model).__name__}.forward(blocks, x)"
    user_loss = step.loss

    def loss(logits, labels, mb):
        if model_logits is not None:
            rows = getattr(mb.blocks[-1], "num_dst_rows", None)  # int; a DGL block has none
            returned_logits(logits, model_logits, rows, num_labels, device)
        if user_loss is None:
            return _default_loss(logits, labels, mb)
        value = user_loss(logits, labels, mb)
        # Computed from the logits, so that backward has something to differentiate.
        grad = True if torch.is_grad_enabled() else None
        returned_tensor(
            value, "StepHooks.loss(logits, labels, mb)", shape=[], device=device, requires_grad=grad
        )
        return value

    if user_loss is not None or model_logits is not None:
        out["loss"] = loss
    if step.features is not None:
        user_features = step.features
        width = model.feature_dims[0] if isinstance(model, BlockModel) else None

        def features(input_nodes):
            x = user_features(input_nodes)
            returned_tensor(
                x,
                "StepHooks.features(input_nodes)",
                shape=[input_nodes.shape[0], width],
                device=device,
                named=("rows", "F"),
            )
            return x

        out["features"] = features
    return out


def check_guard(guard: OverflowGuard, hops: int, device: torch.device) -> None:
    """A shared guard must be built for this engine: one slot per hop, on its device."""
    if guard.first_wanted.numel() != max(hops, 1) or guard.device.type != device.type:
        raise ValueError(
            f"StepHooks.guard was built for {guard.first_wanted.numel()} hop(s) on "
            f"{guard.device}; this engine samples {hops} hop(s) on {device}: build it as "
            f"zg.step.OverflowGuard({hops}, {str(device)!r})"
        )
