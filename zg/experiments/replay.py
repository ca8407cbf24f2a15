"""zg.experiments.replay: what makes a step replayable, and proof that replay changes nothing
(notebook 03).

Where it sits: around :class:`zg.Engine`'s static step (capture on CUDA, the same buffers run
eagerly on the CPU). :func:`static_addresses` lists the address of every buffer the step reads
or writes (a CUDA Graph replays raw addresses, so they must never move); :func:`trace_steps`
reads which batch every executed step ran and whether its optimizer step was applied (the
overflow -> skip -> rewind -> resume story); :func:`parameters`, :func:`max_abs_difference`
and :func:`bitwise_equal` compare the models two runs end with; :func:`step_seconds` times the
same batches on several engines side by side (the static step eager and compiled). Figures:
:func:`zg.viz.execution_trace`, :func:`zg.viz.step_times`.

    before = ex.static_addresses(engine); engine.train_epoch()
    assert ex.static_addresses(engine) == before
    rows = ex.trace_steps(engine)                   # engine.observers has a zg.observe.Trace
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

__all__ = [
    "static_addresses",
    "parameters",
    "max_abs_difference",
    "bitwise_equal",
    "trace_steps",
    "step_seconds",
]


def static_addresses(eng: Any) -> dict[str, int]:
    """``name -> data_ptr()`` of every buffer a captured step reads or writes.

    A CUDA Graph replays raw addresses, so a step is capturable only if the tensors that
    outlive an iteration never move: the engine's epoch table, batch counter and flag
    buffers, the overflow guard, the sampler's marker arrays, the graph's arrays, every
    parameter and optimizer state tensor (the learning rate included). Gradients are not
    among them: like activations, each step's backward makes them afresh and the step's own
    optimizer update consumes them (in a captured step they live in the graph's memory pool,
    where every replay writes the same addresses).
    """
    named: dict[str, torch.Tensor] = {}
    for name in (
        "epoch_seeds",
        "epoch_counts",
        "counter",
        "epoch_keys",
        "loss_buf",
    ):
        if isinstance(getattr(eng, name, None), torch.Tensor):
            named[f"engine.{name}"] = getattr(eng, name)
    for name in ("overflowed", "first", "local", "first_wanted", "enabled", "applied"):
        named[f"guard.{name}"] = getattr(eng.guard, name)
    for i, lr in enumerate(getattr(eng.optimizer, "_lr", [])):
        named[f"optim.lr.{i}"] = lr
    sampler = getattr(eng, "source", None)
    for name in ("_first", "_marker"):  # the torch path's marker array, or the fused kernel's
        if isinstance(getattr(sampler, name, None), torch.Tensor):
            named[f"sampler.{name.lstrip('_')}"] = getattr(sampler, name)
    named["graph.x"], named["graph.indptr"], named["graph.indices"] = (
        eng.g.x,
        eng.g.indptr,
        eng.g.indices,
    )
    for name, p in eng.model.named_parameters():
        named[f"param.{name}"] = p
    index = {id(p): name for name, p in eng.model.named_parameters()}
    for p, state in eng.optimizer.state.items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                named[f"optim.{index.get(id(p), '?')}.{key}"] = value
    return {name: t.data_ptr() for name, t in named.items()}


def parameters(model: torch.nn.Module) -> list[torch.Tensor]:
    """Detached copies of ``model``'s parameters (on the CPU), to compare runs later."""
    return [p.detach().cpu().clone() for p in model.parameters()]


def max_abs_difference(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    """Largest absolute elementwise difference between two parameter lists of equal shapes."""
    a, b = list(a), list(b)
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        raise ValueError("the two parameter lists differ in length or shapes")
    return max(
        (float((x.double() - y.double()).abs().max()) for x, y in zip(a, b) if x.numel()),
        default=0.0,
    )


def bitwise_equal(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    """True if every tensor of ``a`` equals its partner in ``b`` bit for bit."""
    a, b = list(a), list(b)
    return len(a) == len(b) and all(
        x.shape == y.shape
        and x.dtype == y.dtype
        and torch.equal(
            x.view(torch.uint8) if x.numel() else x, y.view(torch.uint8) if y.numel() else y
        )
        for x, y in zip(a, b)
    )


def trace_steps(eng: Any) -> list[dict]:
    """Every step an engine with a :class:`zg.observe.Trace` observer executed, in order:
    ``order`` (0, 1, ...), ``epoch``, ``batch``, ``applied`` (False: the optimizer step was
    skipped on the device because an earlier batch had overflowed; the batch ran again after
    the rewind)."""
    from ..observe import Trace

    traces = [o for o in getattr(eng, "observers", []) if isinstance(o, Trace)]
    if not traces:
        raise ValueError(
            "the engine has no zg.observe.Trace observer; nothing was recorded "
            "(engine.observers.append(zg.observe.Trace()) before training)"
        )
    traces[0].flush()  # reads the device-side records once
    return [
        {"order": i, "epoch": t["epoch"], "batch": t["batch"], "applied": bool(t.get("applied"))}
        for i, t in enumerate(traces[0].steps)
    ]


def step_seconds(engines: Mapping[str, Any], batches: Iterable[int], epoch: int = 0) -> dict:
    """``name -> [seconds of each step]``: every engine runs each of ``batches`` of ``epoch``
    (:meth:`zg.Engine.run_batch`, so it trains), the engines taking turns batch by batch, so
    a busy spell of a shared machine falls on all of them alike. Each time is the wall time of
    one ``run_batch`` call, the device synchronised on either side on CUDA."""
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    for batch in batches:
        for name, eng in engines.items():
            cuda = eng.device.type == "cuda"
            if cuda:
                torch.cuda.synchronize(eng.device)
            start = time.perf_counter()
            eng.run_batch(batch, epoch=epoch)
            if cuda:
                torch.cuda.synchronize(eng.device)
            seconds[name].append(time.perf_counter() - start)
    return seconds
