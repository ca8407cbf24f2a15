"""``Engine(..., mode="compiled")``: the envelope's static step compiled whole, from the torch
code a reader reads.

Where it sits: beside the static step of :class:`zg.Engine` (mode "static"), which it compiles.
The envelope gives every tensor of an iteration a shape fixed before the iteration starts:
exactly what a whole-program compiler needs. So the step a student reads (the sampler's torch
ops, the layers' gathers, the loss, DeviceAdam's arithmetic) is also the fast one: no second,
hand-written copy of it runs.

    seeds -> sample -> compact -> gather -> forward -> loss -> backward -> step

is compiled by ``torch.compile`` (TorchInductor) in three pieces joined by a few eager lines:

1. ``forward`` (one graph, ``fullgraph=True``): read batch ``counter`` of the epoch table,
   sample and compact every hop (:meth:`zg.EnvelopeSampler.sample_static`), fold the overflow
   flag into the guard, gather, forward, loss (:func:`zg.step.train_step` up to its loss);
2. ``backward``: ``loss.backward()`` runs the backward graph AOTAutograd compiled with (1);
3. ``update`` (one graph, ``fullgraph=True``): the overflow gate
   (:meth:`zg.step.OverflowGuard.apply`), the optimizer's update on its flat buffers (the
   arithmetic of :class:`zg.optim.DeviceAdam` / ``DeviceSGD``, the same functions), the loss
   into its buffer, the batch counter advanced.

``fullgraph=True`` makes a graph break an error, never a silent split into eager pieces; the
fixed shapes make each piece compile once per envelope: a steady epoch never recompiles, and an
overflow (the envelope grows, :meth:`zg.Engine.rebuild`) compiles once more for the new sizes.
``compiles`` counts the graphs the compiler built for this engine (the backend is called once
per graph), ``compile_seconds`` the wall time of the steps that compiled;
:func:`compiler_counters` reads torch's own report of the same (graph breaks, graphs captured).

Randomness: sampling is the kit's counter-based hash (:mod:`zg.rng`), the same integer ops
compiled or not, so the same seed samples the same neighbours. Dropout draws from torch's
generator, reseeded before every batch (:func:`zg.rng.seed_dropout`); the compiler is told to
keep torch's own random ops (Inductor's ``fallback_random``) instead of its own generator, so
the compiled step draws the same masks as the eager one.

On CUDA the compiled step is then captured as one CUDA Graph by the engine's own capture (as
mode "graph" captures the eager step), not by ``torch.compile(mode="reduce-overhead")``: its
CUDA-Graph trees skip a graph that mutates inputs other than parameters and buffers
(pytorch/pytorch#103985, #120733), and the step mutates the batch counter, the overflow flags,
the sampler's marker array and the optimizer's moments. (Written, not yet run on a GPU.)

What the compiled launch leaves out: the fused numba kernels (they run below torch's
compiler: ``kernel="torch"``; "auto" means torch here), and the hooks of other trainers that
reach outside the process (``StepHooks.reduce``, ``features``, a shared ``guard``).
"""

from __future__ import annotations

import contextlib
import time
import types
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from ._checks import returned_logits, returned_tensor
from .blocks import Block
from .optim import (
    DeviceAdam,
    DeviceSGD,
    _adam_update,
    _flatten_parameters,
    _laid_out_in,
    _sgd_update,
)
from .sampling import MiniBatch
from .step import train_step

__all__ = ["CompiledStep", "check_compilable", "compile_support", "compiler_counters"]

# The oldest torch the compiled launch was measured on (2.2.1 and 2.13 both compile the step).
MIN_TORCH = (2, 2)


def _torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def compile_support() -> str | None:
    """None when this torch can compile the step, else why not (a sentence naming the version)."""
    if _torch_version() < MIN_TORCH:
        return (
            f"mode='compiled' needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]} (torch.compile of the "
            f"whole step); this is torch {torch.__version__}: use mode='static'"
        )
    try:
        from torch._dynamo.eval_frame import check_if_dynamo_supported

        check_if_dynamo_supported()
    except Exception as exc:  # e.g. a Python newer than this torch's compiler supports
        return f"mode='compiled': torch {torch.__version__} cannot compile here ({exc})"
    return None


def compiler_counters() -> dict[str, int]:
    """torch's own count of what its compiler did in this process (``torch._dynamo.utils.counters``):
    ``graph_breaks``, the graph breaks it recorded (a compiled step adds none: ``fullgraph=True``
    makes a break an error), and ``graphs``, the distinct graphs it captured (a recompile adds
    one). Process-wide, every ``torch.compile`` counted: read it before and after the calls
    whose count you want, and subtract."""
    from torch._dynamo.utils import counters

    return {
        "graph_breaks": sum(counters["graph_break"].values()),
        "graphs": int(counters["stats"]["unique_graphs"]),
    }


def check_compilable(kernel: str, hooks: Any) -> None:
    """Refuse what the compiled launch cannot run (ValueError / RuntimeError naming it)."""
    why = compile_support()
    if why is not None:
        raise RuntimeError(why)
    if kernel == "fused":
        raise ValueError(
            "mode='compiled' compiles the torch code of every kernel; kernel='fused' (numba) runs "
            "below torch's compiler: use kernel='torch' (or 'auto')"
        )
    for name in ("reduce", "features", "guard"):
        if getattr(hooks, name, None) is not None:
            raise ValueError(
                f"mode='compiled' runs one process's step; StepHooks.{name} reaches outside it "
                "(another process or a remote store): use mode='static' (or 'graph' on CUDA)"
            )


@contextlib.contextmanager
def _below_modes():
    """Run a compiled graph below the Python modes in force (an audit's :class:`zg.audit.SyncAudit`):
    the compiler guards on the modes, so a graph called under one would be traced and compiled
    again for it (every audited iteration, a recompile). Inside a graph there is nothing for a
    mode to see: ``fullgraph=True`` refuses the graph breaks a host read (``.item()``, a
    data-dependent shape) would need; the audit sees the eager lines between the graphs."""
    functions = []
    while torch._C._len_torch_function_stack() > 0:
        functions.append(torch._C._pop_torch_function_stack())
    try:
        with _disable_current_modes():
            yield
    finally:
        for mode in reversed(functions):
            torch._C._push_on_torch_function_stack(mode)


def _own_code(fn):
    """``fn`` with a code object of its own. torch.compile keeps its graphs per code object, and
    a code object holds a few (torch's cache limit) before it falls back to running eagerly:
    every engine and every envelope gets its own, so none ever reaches that limit."""
    code = fn.__code__.replace()  # a new code object, the same code
    own = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    own.__kwdefaults__ = fn.__kwdefaults__
    return own


class CompiledStep:
    """The static step of ``engine`` compiled whole (see the module docstring); call it once
    per iteration, where the static step runs. Built per envelope: a new envelope (an overflow
    rebuild) builds a new one, which compiles once at its first call.

    Attributes: ``compiles`` (graphs the compiler built for this envelope's step: forward and
    update, the backward compiled with the forward), ``compile_seconds`` (wall seconds of the
    calls that compiled), ``calls``; ``total_compiles`` and ``total_compile_seconds`` also
    count the engine's earlier envelopes (``previous``, the step this one replaces).
    """

    def __init__(self, engine: Any, previous: CompiledStep | None = None):
        self.engine = engine
        self.compiles = 0
        self.compile_seconds = 0.0
        self.calls = 0
        self._earlier = (
            (previous.total_compiles, previous.total_compile_seconds) if previous else (0, 0.0)
        )
        opt = engine.optimizer
        if isinstance(opt, DeviceAdam):
            for group, flat in zip(opt.param_groups, opt._flat):
                if flat is None:
                    raise ValueError(
                        "mode='compiled' updates each parameter group on its flat buffers; a "
                        "group mixes devices or dtypes: use mode='static'"
                    )
                # The parameters as views of one buffer (what DeviceAdam's first step does).
                params = group["params"]
                if (
                    flat.get("params") is None
                    or _laid_out_in(flat["params"], params, grad=False) is None
                ):
                    flat["params"] = _flatten_parameters(params)
                opt._constants(group, params[0].device)  # made now, read by the graph
        elif not isinstance(opt, DeviceSGD):
            raise TypeError(
                f"mode='compiled' runs DeviceAdam or DeviceSGD, got {type(opt).__name__}"
            )
        backend = self._backend()
        self._forward = torch.compile(_own_code(_forward), backend=backend, fullgraph=True)
        self._update = torch.compile(_own_code(_update), backend=backend, fullgraph=True)

    @property
    def total_compiles(self) -> int:
        return self._earlier[0] + self.compiles

    @property
    def total_compile_seconds(self) -> float:
        return self._earlier[1] + self.compile_seconds

    def _backend(self):
        """TorchInductor, counting the graphs it compiles, keeping torch's random ops."""
        from torch._inductor.compile_fx import compile_fx

        def inductor(graph, example_inputs):
            self.compiles += 1
            return compile_fx(graph, example_inputs, config_patches={"fallback_random": True})

        return inductor

    def __call__(self) -> MiniBatch:
        """One step; returns its MiniBatch (rebuilt from the graph's outputs, no copy)."""
        engine, opt = self.engine, self.engine.optimizer
        before = self.compiles
        start = time.perf_counter()
        with _below_modes():
            out = self._forward(engine)  # (loss, logits, the MiniBatch's tensors)
        self._check(out[0], out[1])
        opt.zero_grad(set_to_none=True)
        out[0].backward()
        opt.writing = True  # in-place writes under way (see zg.engine: a torn step)
        with torch.no_grad():
            grads = [[p.grad for p in group["params"]] for group in opt.param_groups]
            with _below_modes():
                self._update(engine, out[0].detach(), grads)
        opt.steps_taken, opt.writing = opt.steps_taken + 1, False
        self.calls += 1
        if self.compiles != before:
            self.compile_seconds += time.perf_counter() - start
        return _minibatch(out[2:], engine.sampler.sizes)

    def _check(self, loss: torch.Tensor, logits: torch.Tensor) -> None:
        """The checks the eager step makes inside it (:func:`zg.settings.checked_hooks`), made
        on the graph's outputs before anything is applied: host metadata only."""
        engine, hooks = self.engine, self.engine.hooks
        who = (
            "StepHooks.forward(blocks, x)"
            if hooks.forward is not None
            else f"{type(engine.model).__name__}.forward(blocks, x)"
        )
        returned_logits(logits, who, engine.rows, engine._num_labels, engine.device)
        if hooks.loss is not None:
            returned_tensor(
                loss, "StepHooks.loss(logits, labels, mb)", shape=[], device=engine.device,
                requires_grad=True,
            )  # fmt: skip


def _forward(engine):
    """Sample -> compact -> gather -> forward -> loss of batch ``engine.counter``: what
    :meth:`zg.Engine._static_step` runs before backward. Returns (loss, the MiniBatch's
    tensors, flat)."""
    b, rows = engine.counter, engine.rows  # int64 [], int
    row = engine.epoch_table.index_select(0, b.view(1)).view(-1)  # [rows + 2 + hops]
    seeds, num_seeds, keys = row[:rows], row[rows], row[rows + 1 :]  # views
    mb = engine.sampler.sample_static(seeds, num_seeds, keys[0], hop_keys=keys[1:])
    hooks, seen = engine.hooks, {}

    def forward(blocks, x):  # the logits, kept to be checked where they come back
        seen["logits"] = (engine.model if hooks.forward is None else hooks.forward)(blocks, x)
        return seen["logits"]

    loss, _, _ = train_step(
        mb, engine.model, engine.optimizer, engine.features, engine.g.y, guard=engine.guard,
        batch=b, loss=hooks.loss, forward=forward, loss_only=True,
    )  # fmt: skip
    blocks = [(k.nbr, k.mask, k.num_src, k.num_dst, k.src_nodes, k.dst_valid) for k in mb.blocks]
    return loss, seen["logits"], mb.seeds, mb.num_seeds, mb.counts, mb.overflowed, mb.wanted, blocks


def _minibatch(tensors, sizes) -> MiniBatch:
    seeds, num_seeds, counts, overflowed, wanted, blocks = tensors
    return MiniBatch(
        seeds=seeds,
        num_seeds=num_seeds,
        blocks=[
            Block(nbr, mask, num_src, num_dst, src_nodes, dst_valid, padding_clean=True)
            for nbr, mask, num_src, num_dst, src_nodes, dst_valid in blocks
        ],
        counts=counts,
        overflowed=overflowed,
        envelope_sizes=sizes,
        wanted=wanted,
    )


def _update(engine, loss, grads):
    """The gate, the optimizer's update, the loss kept and the counter advanced: the rest of
    :meth:`zg.Engine._static_step` after backward. ``grads``: per parameter group, each
    parameter's gradient (or None), as backward left them."""
    opt = engine.optimizer
    apply = engine.guard.apply()  # bool []: False after an overflow
    if isinstance(opt, DeviceAdam):
        for group, lr, flat, grad_of in zip(opt.param_groups, opt._lr, opt._flat, grads):
            params = group["params"]
            constants = opt._constants(group, params[0].device)
            if all(g is not None for g in grad_of):  # DeviceAdam._step_flat's arithmetic
                grad = torch.cat([g.reshape(-1) for g in grad_of])  # [total]
                m, v, step = flat["exp_avg"], flat["exp_avg_sq"], flat["step"]
                _adam_update(
                    flat["params"], grad, m, v, step, group, lr, apply, constants, write=True
                )
                continue
            for p, g in zip(params, grad_of):  # its loop, over the parameters with a gradient
                if g is not None:
                    state = opt.state[p]
                    m, v, step = state["exp_avg"], state["exp_avg_sq"], state["step"]
                    _adam_update(p, g, m, v, step, group, lr, apply, constants, write=True)
    else:
        for group, lr, grad_of in zip(opt.param_groups, opt._lr, grads):
            for p, g in zip(group["params"], grad_of):
                if g is not None:
                    _sgd_update(p, g, lr, group["weight_decay"], apply)
    engine.loss_buf.copy_(loss)
    engine.counter.add_(1)
