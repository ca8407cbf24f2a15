"""Saving and loading an Engine: one file holds the model, the optimizer, the envelope and the
position (epoch, batch), with the settings and the graph it was written for.

Where it sits: beside the loop, not in it. :meth:`zg.Engine.save` and :meth:`zg.Engine.load`
call :func:`save` and :func:`load`. Randomness is keyed by (seed, epoch, batch)
(:mod:`zg.rng`), so the position is the whole RNG state: a resumed run draws exactly the
batches, samples and dropout masks of one that never stopped.

A load reads and checks everything first (format, version, the settings that define the
trajectory, the graph by content, parameter names, shapes and dtypes, optimizer state, the
position) and only then assigns, in place: a corrupt or mismatched file raises ValueError and
leaves the engine exactly as it was, and a captured step's static buffers stay valid.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ._io import atomic_write, fingerprint_mismatch, graph_fingerprint
from .envelope import Envelope
from .optim import make_optimizer

if TYPE_CHECKING:  # the engine imports this module; the type is only named here
    from .engine import Engine

__all__ = ["FORMAT", "VERSION", "TRAJECTORY_KEYS", "state", "save", "load"]

FORMAT = "zg.engine"
VERSION = 3  # the graph is recorded by content (zg._io.graph_fingerprint)

# What a checkpoint must agree on to be loaded: what defines the training trajectory, not how
# it runs (a static run on the CPU may resume as a CUDA Graph on a GPU, or with other kernels).
TRAJECTORY_KEYS = (
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
        "epoch": epoch,
        "batch": batch,
    }


def save(engine: Engine, path: Any) -> Path:
    """Write ``engine``'s checkpoint atomically (temp file + rename, nothing left on failure)."""
    snapshot = state(engine)
    return atomic_write(path, lambda f: torch.save(snapshot, f), name="path", make_parents=True)


def load(engine: Engine, path: Any) -> Engine:
    """Restore the checkpoint at ``path`` into ``engine`` (see the module docstring)."""
    path = Path(path)
    where = repr(str(path))
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {where} does not exist")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"checkpoint {where} is unreadable or corrupt: {exc}") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise ValueError(f"{where} is not a zg engine checkpoint")
    if saved.get("version") != VERSION:
        raise ValueError(
            f"checkpoint version {saved.get('version')!r} is not supported "
            f"(this zg reads version {VERSION})"
        )
    for key in ("settings", "model", "optimizer", "envelope", "epoch", "batch"):
        if key not in saved:
            raise ValueError(f"checkpoint {where} lacks {key!r}")
    _check_settings(engine, saved["settings"], where)
    differ = fingerprint_mismatch(saved.get("graph"), graph_fingerprint(engine.g))
    if differ is not None:
        raise ValueError(f"checkpoint {where} was written for another graph ({differ})")
    model_state = _checked_model_state(engine, saved["model"], where)
    epoch, batch = _checked_position(engine, saved["epoch"], saved["batch"], where)
    envelope = _checked_envelope(engine, saved["envelope"])
    _check_optimizer_state(engine, saved["optimizer"])

    # Every check passed: assign, in place (static buffers and a captured graph stay valid).
    with torch.no_grad():
        for k, v in engine.model.state_dict().items():
            v.copy_(model_state[k].to(v.device))
    _copy_optimizer_state(engine.optimizer, saved["optimizer"])
    for group, lr in zip(engine.optimizer.param_groups, getattr(engine.optimizer, "_lr", ())):
        lr.fill_(float(group["lr"]))  # the device copy a captured step reads
    engine.epoch, engine.batch = epoch, batch
    engine.rewound()
    if envelope is not None and envelope.sizes != engine.envelope.sizes:
        engine.envelope = envelope
        engine.rebuild()
    return engine


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
        names = sorted(model_state) if isinstance(model_state, dict) else model_state
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


def _checked_envelope(engine: Engine, sizes: Any) -> Envelope | None:
    if engine.envelope is None:
        return None
    if not (isinstance(sizes, list) and len(sizes) == len(engine.fanouts)):
        raise ValueError("checkpoint envelope does not match the engine's layers")
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
    return envelope


def _check_optimizer_state(engine: Engine, optimizer_state: Any) -> None:
    """Load the state into a throw-away optimizer over a copy of the model: it must fit."""
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
