"""zg.experiments.floor: the part of an iteration that any pipeline must pay.

Where it sits: over the second half of the chain. Whatever a pipeline does to sample, every
iteration then gathers its input features, runs the model forward, takes the loss, runs
backward and steps the optimizer:

    seeds -> sample -> compact | gather -> forward -> loss -> backward -> step
                                 '----------------- the floor ---------------'

The floor is that half alone, on a batch that is already sampled and resident (fixed blocks, no
sampling, no host read): :func:`resident_batches` samples the batches once, and
:func:`fixed_batch_step` runs the rest of the engine's own step on one of them
(:func:`zg.step.train_step`, with the engine's model, optimizer, features and labels, and its
dropout seeding). With an engine in mode "dynamic" the blocks have each batch's exact sizes, no
padding: the shapes of a real sampled batch. ``bench/floor.py`` times it beside whole
iterations of each pipeline and reports each as a multiple of it; :func:`zg.viz.floor_split`
draws the result.

    eng = zg.Engine(g, model, [15, 10, 5], 1024, mode="dynamic")
    batches = ex.resident_batches(eng, 4)                # sampled once, kept on the device
    loss = ex.fixed_batch_step(eng, batches[0], batch=0) # gather -> forward -> loss -> backward -> step
    table = ex.floor_rows(ex.results.load("floor"))      # the committed result, one line per side
"""

from __future__ import annotations

from typing import Any

import torch

from .._checks import int_arg
from ..engine import Engine
from ..rng import batch_key, seed_dropout
from ..sampling import MiniBatch
from ..step import train_step

__all__ = ["FLOOR_STAGES", "resident_batches", "fixed_batch_step", "floor_rows"]

# The stages of the floor, in the order of the chain (a subset of zg.step.STAGES).
FLOOR_STAGES = ("gather", "forward", "loss", "backward", "step")


def resident_batches(engine: Engine, count: int, epoch: int = 0) -> list[MiniBatch]:
    """Batches ``0 .. count - 1`` of ``epoch``, sampled once by ``engine``'s own source (the
    same batches its steps train on) and kept on its device. In mode "dynamic" each batch's
    blocks have its exact sizes; in the envelope modes, the envelope's."""
    if not isinstance(engine, Engine):
        raise TypeError(f"engine must be a zg.Engine, got {type(engine).__name__}")
    if engine.mode == "dgl":
        raise ValueError("mode 'dgl' samples DGL blocks, which a zg model does not read")
    count = int_arg(count, "count", low=1)
    epoch = int_arg(epoch, "epoch", low=0)
    available = len(engine.batches(epoch))
    if count > available:
        raise ValueError(f"count {count} is more than the {available} batches of epoch {epoch}")
    return [engine.sample(b, epoch) for b in range(count)]


def fixed_batch_step(
    engine: Engine, mb: MiniBatch, *, batch: int, epoch: int = 0, clock: Any | None = None
) -> torch.Tensor:
    """gather -> forward -> loss -> backward -> step of ``engine`` on the sampled batch ``mb``.

    What :meth:`zg.Engine.run_batch` does after sampling, with the engine's model, optimizer,
    features and labels, and its dropout reseeded for (``epoch``, ``batch``) as the engine
    reseeds it; without the overflow guard (a batch already sampled cannot overflow). So on
    the batch the engine would sample for (``epoch``, ``batch``), it computes the same loss and
    the same update. It trains: use an engine whose state you no longer need. ``clock``: a
    :class:`zg.step.StageClock` the stages lap into. Returns the loss (0-d, detached, device).
    """
    if not isinstance(engine, Engine):
        raise TypeError(f"engine must be a zg.Engine, got {type(engine).__name__}")
    if not isinstance(mb, MiniBatch):
        raise TypeError(f"mb must be a zg.MiniBatch, got {type(mb).__name__}")
    batch = int_arg(batch, "batch", low=0)
    epoch = int_arg(epoch, "epoch", low=0)
    seed_dropout(batch_key(engine.seed, epoch, batch))
    loss, _, _ = train_step(
        mb,
        engine.model,
        engine.optimizer,
        engine.features,
        engine.g.y,
        # The engine's hooks as its own step calls them: results (the model's logits included)
        # checked where they come back.
        loss=engine._checked_hooks["loss"],
        forward=engine._checked_hooks["forward"],
        clock=clock,
    )
    return loss


def floor_rows(doc: dict) -> list[dict]:
    """One flat line per side of a ``bench/floor.py`` result (a loaded zg-result/1 document):
    ``side``, ``ms_per_iteration`` and ``ms_std`` (mean and sample std over seeds),
    ``multiple_of_floor`` and ``multiple_std`` (1.0 and None for the floor itself), ``kernel``
    and ``skipped`` (the reason a side was not measured, else None: its numbers are None)."""
    if not isinstance(doc, dict) or doc.get("bench") != "floor":
        raise ValueError("doc must be a loaded bench/floor.py result (its bench is 'floor')")
    out = []
    for r in doc["rows"]:
        line = {"side": r["pipeline"]}
        seconds = r.get("seconds")
        ratio = r.get("ratio_to_floor")
        if r["key"] == "floor":
            ratio = {"mean": 1.0, "std": None}
        line["ms_per_iteration"] = None if seconds is None else 1e3 * seconds["mean"]
        line["ms_std"] = None if seconds is None or seconds["std"] is None else 1e3 * seconds["std"]
        line["multiple_of_floor"] = None if ratio is None else ratio["mean"]
        line["multiple_std"] = None if ratio is None else ratio["std"]
        line["kernel"], line["skipped"] = r.get("kernel"), r.get("skipped")
        out.append(line)
    return out
