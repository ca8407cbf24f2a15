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

from ._checks import int_arg, node_ids_arg, real_arg
from .graph import Graph
from .models import _BlockModel
from .optim import DeviceAdam, DeviceSGD, optimizer_spec
from .step import OverflowGuard

__all__ = ["EpochStats", "StepHooks", "EngineSettings", "MODES", "check_mode"]

MODES = ("dgl", "dynamic", "eager", "static", "graph")


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
    ("torch", "fused", or "dgl" for DGL's own sampler and layers).
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


@dataclass
class StepHooks:
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


def check_model_fits(model: _BlockModel, g: Graph, fanouts: list[int], gathers_x: bool) -> None:
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
        raise TypeError(f"{name} must return a list of seed tensors, got {type(given).__name__}")
    if not given:
        raise ValueError(f"{name} gave no batch")
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


def _described(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)} on {value.device}"
    return f"{type(value).__name__} {value!r}"[:120]


def _tensor_result(
    value: Any, who: str, wants: str, *, dims: int, rows: int | None = None, cols=None
) -> None:
    """Refuse what a hook returned unless it is a floating tensor of ``dims`` dimensions with
    ``rows`` rows and ``cols(n)`` true of its columns; the error names the hook, what it
    returned and what it must return. Shapes are host metadata: no device read."""
    ok = (
        isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and value.dim() == dims
        and (rows is None or value.shape[0] == rows)
        and (cols is None or cols(value.shape[1]))
    )
    if not ok:
        raise TypeError(f"{who} returned {_described(value)}; it must return {wants}")


def checked_hooks(step: StepHooks, model: Any, num_labels: int, device: torch.device) -> dict:
    """``forward``, ``loss`` and ``features`` of ``step`` for :func:`zg.step.train_step`, each
    wrapped so that a result of the wrong type, shape or device is refused naming the hook
    (instead of a torch error further down, or a step that trains on it). None stays None."""
    out: dict[str, Callable | None] = {"forward": None, "loss": None, "features": None}
    if step.forward is not None:
        user_forward = step.forward

        def forward(blocks, x):
            logits = user_forward(blocks, x)
            last = blocks[-1]
            rows = getattr(last, "num_dst_rows", None)  # int; a DGL block has none
            _tensor_result(
                logits,
                "StepHooks.forward(blocks, x)",
                f"float logits [{rows if rows is not None else 'B'}, C] with C >= {num_labels} "
                "classes",
                dims=2,
                rows=rows,
                cols=lambda c: c >= num_labels,
            )
            return logits

        out["forward"] = forward
    if step.loss is not None:
        user_loss = step.loss

        def loss(logits, labels, mb):
            value = user_loss(logits, labels, mb)
            _tensor_result(
                value, "StepHooks.loss(logits, labels, mb)", "a 0-d float tensor", dims=0
            )
            if torch.is_grad_enabled() and not value.requires_grad:
                raise TypeError(
                    "StepHooks.loss(logits, labels, mb) returned a tensor that does not depend "
                    "on the logits (no grad_fn): backward would have nothing to differentiate; "
                    "compute it from logits"
                )
            return value

        out["loss"] = loss
    if step.features is not None:
        user_features = step.features
        width = model.feature_dims[0] if isinstance(model, _BlockModel) else None

        def features(input_nodes):
            x = user_features(input_nodes)
            rows = input_nodes.shape[0]
            _tensor_result(
                x,
                "StepHooks.features(input_nodes)",
                f"float features [{rows}, {width if width is not None else 'F'}] on {device}",
                dims=2,
                rows=rows,
                cols=None if width is None else (lambda c: c == width),
            )
            if x.device.type != device.type:
                raise TypeError(
                    f"StepHooks.features(input_nodes) returned {_described(x)}; it must "
                    f"return features on {device}, where this engine trains"
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
