"""Saving and loading an Engine: one file holds the model, the optimizer, the envelope and the
position (epoch, batch), with the settings and the graph it was written for.

Where it sits: beside the loop, not in it. :meth:`zg.Engine.save` and :meth:`zg.Engine.load`
call :func:`save` and :func:`load`. Randomness is keyed by (seed, epoch, batch)
(:mod:`zg.rng`), so the position is the whole RNG state: a resumed run draws exactly the
batches, samples and dropout masks of one that never stopped.

A load reads and checks everything first (format, version, the run's identity, the graph by
content, parameter names, shapes and dtypes, optimizer state, the envelope, the position) and
only then assigns, in place: a corrupt, crafted or mismatched file raises ValueError naming the
field and leaves the engine exactly as it was, and a captured step's static buffers stay valid.

The identity (what defines the trajectory; a checkpoint of another run is refused, naming the
field that differs):

* the settings of :data:`TRAJECTORY_KEYS` (fanouts, batch size, optimizer and weight decay,
  seed, sampling with replacement, the graph's sizes, the model's class and size);
* the graph by content (:func:`zg._io.graph_fingerprint`: structure, features, labels, splits);
* the training nodes (``StepHooks(nodes=...)`` or ``g.train_idx``), by content;
* the model's options (:func:`model_options`: every module's class and its plain attributes,
  such as layer widths, dropout, heads, activations; the kernel is not one: a checkpoint of a
  fused-kernel run resumes under the torch kernels and back);
* the optimizer's options (every parameter group's settings but the learning rate: betas, eps,
  weight decay, ...);
* the hooks that compute the step, by a stated rule (:func:`hooks_fingerprint`): which of
  ``StepHooks.batches / forward / loss / features / reduce`` are set and, for each, its
  qualified name (``module.qualname``; a ``functools.partial`` by its function). A changed
  *body* under the same name cannot be detected. The callbacks ``before`` / ``after``, a shared
  ``guard``, ``poll_every`` and ``grow_factor`` are not part of it: they observe or schedule the
  loop, and the overflow policy applies the same batches whatever they are (a checkpoint saved
  from an ``after`` callback resumes in an engine without it).

The learning rate is state, not identity: a load restores the checkpoint's learning rate (a
schedule's :meth:`zg.Engine.set_lr` before the save included) over whatever the engine had,
its construction value or a :meth:`zg.Engine.set_lr` before the load, and ``settings.lr``
says so. Call ``set_lr`` after ``load`` to change it.
"""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ._interrupt import held_interrupt
from ._io import (
    _digest,
    atomic_write,
    fingerprint_mismatch,
    graph_fingerprint,
    open_regular_file,
)
from .envelope import Envelope
from .log import get as _logger
from .optim import make_optimizer

if TYPE_CHECKING:  # the engine imports this module; the type is only named here
    from .engine import Engine

_log = _logger(__name__)  # "zg.checkpoint": a resumed run says so (zg.log)

__all__ = [
    "FORMAT",
    "VERSION",
    "TRAJECTORY_KEYS",
    "STEP_HOOKS",
    "state",
    "save",
    "load",
    "identity",
    "model_options",
    "hooks_fingerprint",
    "callable_name",
]

FORMAT = "zg.engine"
# 3: the graph is recorded by content (zg._io.graph_fingerprint). 4: the run's identity
# (training nodes, model and optimizer options, hooks; see the module docstring).
VERSION = 4

# What a checkpoint must agree on to be loaded: what defines the training trajectory, not how
# it runs (a static run on the CPU may resume as a CUDA Graph on a GPU, or with other kernels).
TRAJECTORY_KEYS = (
    "fanouts",
    "batch_size",
    "optimizer",
    "weight_decay",
    "seed",
    "replace",
    "num_nodes",
    "num_edges",
    "model",
    "num_parameters",
)

# The StepHooks fields that compute the step: recorded by qualified name (hooks_fingerprint).
STEP_HOOKS = ("batches", "forward", "loss", "features", "reduce")

# Module attributes that say how a model computes, not what: not part of its options.
_NOT_OPTIONS = frozenset({"kernel"})

# A position past this is not one a run reaches (an int64 device counter holds the batch).
_MAX_POSITION = 2**62


def state(engine: Engine) -> dict[str, Any]:
    """The checkpoint of ``engine`` as a dict of CPU tensors and plain values. Written from a
    hook mid-epoch, its position is the first batch not applied: a batch that overflowed (and
    every one after it) was skipped on the device, which one host read of the guard tells."""
    epoch, batch = engine.applied_position()
    return {
        "format": FORMAT,
        "version": VERSION,
        "settings": engine.settings.as_dict(),
        "graph": graph_fingerprint(engine.g),
        "model": {k: v.detach().cpu().clone() for k, v in engine.model.state_dict().items()},
        "optimizer": _optimizer_state_to_cpu(engine.optimizer.state_dict()),
        "envelope": None if engine.envelope is None else list(engine.envelope.sizes),
        "identity": identity(engine),
        "epoch": epoch,
        "batch": batch,
    }


def save(engine: Engine, path: Any) -> Path:
    """Write ``engine``'s checkpoint atomically (temp file + rename, nothing left on failure).

    Through :func:`zg._io.atomic_write`: a file this user may not write is a PermissionError
    naming ``path``; a full disk is an OSError (``ENOSPC``, ``EFBIG``) naming ``path`` and the
    room left, not torch's ``unexpected pos``; the old checkpoint is kept either way."""
    snapshot = state(engine)
    return atomic_write(path, lambda f: torch.save(snapshot, f), name="path", make_parents=True)


def load(engine: Engine, path: Any) -> Engine:
    """Restore the checkpoint at ``path`` into ``engine`` (see the module docstring).

    Raises FileNotFoundError (no file) or ValueError (anything else wrong with it, a crafted
    value of any type included; a directory, a named pipe or a device at ``path`` is refused
    naming ``path`` before it is opened), and then leaves the engine as it was."""
    path = Path(path)
    where = repr(str(path))
    try:
        saved, model_state, (epoch, batch), envelope, lrs = _checked(engine, path, where)
    except (TypeError, KeyError, AttributeError, IndexError, RuntimeError, OverflowError) as exc:
        # A crafted file may hold values of any type the unpickler allows where the checks
        # expect others: still the documented ValueError, never another class.
        raise ValueError(
            f"checkpoint {where} is malformed ({type(exc).__name__}: {_short(exc)})"
        ) from None

    # Every check passed: assign, in place (static buffers and a captured graph stay valid),
    # all or nothing under Ctrl-C: a SIGINT here is held until the last write (a second one
    # raises at once). The checkpoint restores everything a torn step tore.
    with held_interrupt(), torch.no_grad():
        for k, v in engine.model.state_dict().items():
            v.copy_(model_state[k].to(v.device))
        _copy_optimizer_state(engine.optimizer, saved["optimizer"])
        for group, lr in zip(engine.optimizer.param_groups, getattr(engine.optimizer, "_lr", ())):
            lr.fill_(float(group["lr"]))  # the device copy a captured step reads
        engine.settings.lr = lrs[0]  # the checkpoint's learning rate wins (module docstring)
        engine._place(epoch, batch)
        if envelope is not None and envelope.sizes != engine.envelope.sizes:
            engine.envelope = envelope
            engine.rebuild()
        engine._torn = None
    _log.info("resumed from checkpoint %s at epoch %d, batch %d", path, epoch, batch)
    return engine


def _checked(engine: Engine, path: Path, where: str):
    """Read and check everything :func:`load` assigns (nothing is assigned here)."""
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {where} does not exist")
    # Only a regular file is read: a named pipe would block torch.load, a device never end
    # (checked with os.stat before any open, as read_json_config does).
    try:
        f = open_regular_file(path, "path", what="a checkpoint written by Engine.save")
    except FileNotFoundError:  # removed since the check above
        raise FileNotFoundError(f"checkpoint {where} does not exist") from None
    except OSError as exc:
        raise ValueError(f"checkpoint {where} is unreadable: {exc}") from None
    try:
        with f:
            saved = torch.load(f, map_location="cpu", weights_only=True)
    except Exception as exc:
        # The cause's class too: the unpickler's KeyError of a damaged file says only "101".
        raise ValueError(
            f"checkpoint {where} cannot be read: it is corrupt or truncated "
            f"({type(exc).__name__}: {str(exc)[:200]}); write it again with Engine.save"
        ) from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise ValueError(f"{where} is not a zg engine checkpoint")
    version = saved.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != VERSION:
        raise ValueError(
            f"checkpoint version {_short(version)} is not supported (this zg reads version "
            f"{VERSION}; a checkpoint of an older zg cannot record this run's identity)"
        )
    for key in ("settings", "model", "optimizer", "envelope", "identity", "epoch", "batch"):
        if key not in saved:
            raise ValueError(f"checkpoint {where} lacks {key!r}")
    _check_settings(engine, saved["settings"], where)
    differ = fingerprint_mismatch(saved.get("graph"), graph_fingerprint(engine.g))
    if differ is not None:
        raise ValueError(f"checkpoint {where} was written for another graph ({differ})")
    _check_identity(engine, saved["identity"], where)
    model_state = _checked_model_state(engine, saved["model"], where)
    position = _checked_position(engine, saved["epoch"], saved["batch"], where)
    envelope = _checked_envelope(engine, saved["envelope"], where)
    lrs = _checked_optimizer_state(engine, saved["optimizer"], where)
    return saved, model_state, position, envelope, lrs


# ----------------------------------------------------------------------------- identity


def identity(engine: Engine) -> dict[str, Any]:
    """What defines ``engine``'s trajectory beyond its settings and graph (see the module
    docstring): ``{"training_nodes": {"count", "digest"}, "model": model_options(model),
    "hooks": hooks_fingerprint(hooks)}``; plain values only. (The optimizer's options are
    read from the saved optimizer state itself.)"""
    nodes = engine.nodes
    return {
        "training_nodes": {"count": int(nodes.numel()), "digest": _digest([nodes.cpu()])},
        "model": model_options(engine.model),
        "hooks": hooks_fingerprint(engine.hooks),
    }


def _plain(value: Any) -> Any:
    """``value`` as a plain, comparable value (None when it is not one an option can be)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return _SKIP if any(i is _SKIP for i in items) else items
    if isinstance(value, torch.dtype):
        return str(value)
    if callable(value) and not isinstance(value, (torch.nn.Module, torch.Tensor)):
        return callable_name(value)
    return _SKIP


_SKIP = object()  # an attribute that is not an option (a tensor, a cache, a module, ...)


def model_options(model: torch.nn.Module) -> dict[str, Any]:
    """The model's options, flat: for every module (``model.named_modules()``, the model itself
    as ``""``), ``"<path>.class"`` its qualified class name and ``"<path>.<attribute>"`` each
    attribute it sets that is a plain value (bool, int, float, str, None, lists of them), a
    dtype or a function (by qualified name): layer widths, dropout rates, heads, activations,
    slopes. Parameters, buffers and submodules are not options (their names and shapes are
    checked with the state); the kernel is not one either."""
    base = set(vars(torch.nn.Module()))
    out: dict[str, Any] = {}
    for path, module in model.named_modules():
        prefix = f"{path}." if path else ""
        out[f"{prefix}class"] = callable_name(type(module))
        for name, value in vars(module).items():
            if name in base or name in _NOT_OPTIONS:
                continue
            plain = _plain(value)
            if plain is not _SKIP:
                out[f"{prefix}{name}"] = plain
    return out


def callable_name(fn: Any) -> str:
    """``module.qualname`` of a function, method, class or callable object (its class); a
    ``functools.partial`` as ``functools.partial(<its function>)``."""
    if isinstance(fn, functools.partial):
        return f"functools.partial({callable_name(fn.func)})"
    target = getattr(fn, "__func__", fn)  # a bound method: its function
    qualname = getattr(target, "__qualname__", None)
    if not isinstance(qualname, str):
        target = type(fn)
        qualname = target.__qualname__
    return f"{getattr(target, '__module__', None)}.{qualname}"


def hooks_fingerprint(hooks: Any) -> dict[str, str | None]:
    """The rule by which hooks enter a checkpoint's identity: for each field of
    :data:`STEP_HOOKS` (the hooks that compute the step), None if unset, else the qualified name
    of the callable (:func:`callable_name`). A changed body under the same name is not seen.
    ``nodes`` enters by content (``training_nodes``); ``before``, ``after``, ``guard``,
    ``poll_every`` and ``grow_factor`` do not enter (they do not change which batches are
    applied, nor how)."""
    return {
        name: None if getattr(hooks, name) is None else callable_name(getattr(hooks, name))
        for name in STEP_HOOKS
    }


def _group_options(group: dict) -> dict[str, Any]:
    """A parameter group's options but its parameters and learning rate (state, restored; an
    LR scheduler's ``initial_lr`` too)."""
    options = {str(k): _plain(v) for k, v in group.items() if k not in _GROUP_STATE}
    return {k: ("<not a plain value>" if v is _SKIP else v) for k, v in sorted(options.items())}


_GROUP_STATE = ("params", "lr", "initial_lr")


def _differences(theirs: Any, mine: dict[str, Any]) -> list[str]:
    if not isinstance(theirs, dict):
        return [f"<the record>: {type(theirs).__name__} there, a mapping here"]
    keys = sorted(set(theirs) | set(mine), key=str)
    return [
        f"{k}: {theirs.get(k, '<absent>')!r} there, {mine.get(k, '<absent>')!r} here"
        for k in keys
        if theirs.get(k, "<absent>") != mine.get(k, "<absent>")
    ]


def _check_identity(engine: Engine, theirs: Any, where: str) -> None:
    """Refuse a checkpoint whose identity (module docstring) differs, naming the field."""
    if not isinstance(theirs, dict):
        raise ValueError(f"checkpoint {where}: its 'identity' is not a mapping")
    mine = identity(engine)
    what = {
        "training_nodes": "the training nodes (StepHooks(nodes=...) or g.train_idx)",
        "model": "the model's options",
        "hooks": "the step's hooks (StepHooks, by qualified name)",
    }
    for field, label in what.items():
        there, here = theirs.get(field, "<absent>"), mine[field]
        if there == here:
            continue
        if isinstance(here, dict):
            diff = _differences(there, here)
        else:
            diff = [f"{there!r} there, {here!r} here"]
        shown = "; ".join(diff[:4]) + ("; ..." if len(diff) > 4 else "")
        raise ValueError(
            f"checkpoint {where} was written by another run: {field} differs, {label} "
            f"({shown}). Build the engine as the run that wrote it was built"
        )


# ----------------------------------------------------------------------------- checks


def _check_settings(engine: Engine, theirs: Any, where: str) -> None:
    if not isinstance(theirs, dict):
        raise ValueError(f"checkpoint {where}: its 'settings' is not a mapping")
    mine = engine.settings.as_dict()
    diff = [k for k in TRAJECTORY_KEYS if theirs.get(k) != mine[k]]
    if diff:
        raise ValueError(
            "checkpoint was written by an engine with different settings: "
            + ", ".join(f"{k}: {theirs.get(k)!r} != {mine[k]!r}" for k in diff)
        )


def _checked_model_state(engine: Engine, model_state: Any, where: str) -> dict:
    current = engine.model.state_dict()
    if not isinstance(model_state, dict) or set(model_state) != set(current):
        names = sorted(map(str, model_state)) if isinstance(model_state, dict) else model_state
        raise ValueError(
            f"checkpoint parameters {names} do not match the model's {sorted(current)}"
        )
    for k, v in model_state.items():
        if not isinstance(v, torch.Tensor) or v.shape != current[k].shape:
            raise ValueError(f"checkpoint parameter {k!r} has the wrong shape or dtype")
        if v.dtype != current[k].dtype:
            raise ValueError(f"checkpoint parameter {k!r} has the wrong shape or dtype")
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise ValueError(
                f"checkpoint {where}: parameter {k!r} holds NaN or inf; a run resumed from it "
                "would train on garbage"
            )
    return model_state


def _checked_position(engine: Engine, epoch: Any, batch: Any, where: str) -> tuple[int, int]:
    for name, value in (("epoch", epoch), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(
                f"checkpoint {where}: position {name} must be an int, got "
                f"{type(value).__name__} {value!r}"
            )
        if not 0 <= value <= _MAX_POSITION:
            raise ValueError(
                f"checkpoint {where}: position {name}={value} is invalid (expected an int in "
                f"[0, 2**62])"
            )
    if batch > len(engine.batches(epoch)):
        raise ValueError(f"checkpoint batch {batch} is past the end of the epoch")
    return epoch, batch


def _checked_envelope(engine: Engine, sizes: Any, where: str) -> Envelope | None:
    """The checkpoint's envelope sizes, checked as :class:`zg.Envelope` checks sizes (positive
    ints, one per layer, each between its destination rows and the graph's nodes): anything
    else, a crafted value included, is a ValueError naming the field ``envelope``."""
    if engine.envelope is None:
        return None
    if not (isinstance(sizes, list) and len(sizes) == len(engine.fanouts)):
        raise ValueError(
            f"checkpoint {where}: envelope {_short(sizes)} does not match the engine's "
            f"{len(engine.fanouts)} layers (a list of one size per layer)"
        )
    try:
        envelope = Envelope(
            sizes,
            "checkpoint",
            fanouts=engine.fanouts,
            batch_size=engine.rows,
            num_nodes=engine.g.num_nodes,
            settings=engine.envelope.settings,
            max_degree=engine.envelope.max_degree,
        )
        envelope.check(engine.fanouts, engine.rows, engine.g.num_nodes)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(
            f"checkpoint {where}: envelope {_short(sizes)} is invalid: {exc}"
        ) from None
    return envelope


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _checked_optimizer_state(engine: Engine, optimizer_state: Any, where: str) -> list[float]:
    """Load the state into a throw-away optimizer over a copy of the model: it must fit. Every
    group's learning rate must be a finite number > 0; returns them."""
    try:
        groups = optimizer_state["param_groups"]
        lrs = [group["lr"] for group in groups]
    except Exception as exc:
        raise ValueError(
            f"checkpoint {where}: its optimizer state is malformed ({type(exc).__name__}: "
            f"{_short(exc)})"
        ) from None
    for i, lr in enumerate(lrs):
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < math.inf:
            raise ValueError(
                f"checkpoint {where}: optimizer param_groups[{i}] lr is {_short(lr)}; a "
                "learning rate is a finite number > 0"
            )
    for i, (saved, current) in enumerate(zip(groups, engine.optimizer.param_groups)):
        diff = _differences(_group_options(saved), _group_options(current))
        if diff:
            raise ValueError(
                f"checkpoint {where} was written by another run: the optimizer's options differ "
                f"(param_groups[{i}] {'; '.join(diff[:4])})"
            )
    settings = engine.settings
    probe = make_optimizer(
        copy.deepcopy(engine.model).cpu(), settings.optimizer, settings.lr, settings.weight_decay
    )
    try:
        probe.load_state_dict(optimizer_state)
        params = [p for g in probe.param_groups for p in g["params"]]
        for i, p in enumerate(params):
            s = optimizer_state["state"].get(i, {})
            for name in ("exp_avg", "exp_avg_sq"):
                if name in s and s[name].shape != p.shape:
                    raise ValueError(
                        f"state {name} of parameter {i} has shape {tuple(s[name].shape)}, "
                        f"expected {tuple(p.shape)}"
                    )
    except Exception as exc:
        raise ValueError(f"checkpoint optimizer state does not fit this model: {exc}") from None
    return [float(lr) for lr in lrs]


# ----------------------------------------------------------------------------- optimizer state


def _optimizer_state_to_cpu(optimizer_state: dict) -> dict:
    out = {"param_groups": [dict(g) for g in optimizer_state["param_groups"]], "state": {}}
    for k, s in optimizer_state["state"].items():
        out["state"][k] = {
            n: (v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v)
            for n, v in s.items()
        }
    return out


def _copy_optimizer_state(optimizer, optimizer_state: dict) -> None:
    """Copy saved optimizer state into the existing state tensors (keeps their addresses)."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for group, saved in zip(optimizer.param_groups, optimizer_state["param_groups"]):
        for key, value in saved.items():
            if key != "params":
                group[key] = value
    for i, p in enumerate(params):
        saved = optimizer_state["state"].get(i)
        if saved is None:
            continue
        current = optimizer.state[p]
        for name, value in saved.items():
            if isinstance(value, torch.Tensor) and isinstance(current.get(name), torch.Tensor):
                current[name].copy_(value.to(current[name].device, current[name].dtype))
            else:
                current[name] = value.to(p.device) if isinstance(value, torch.Tensor) else value
