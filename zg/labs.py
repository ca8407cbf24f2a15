"""Helpers the graded labs (labs/) call where a notebook alone cannot test a student's code.

Where it sits: outside the training flow.

* :func:`rewind_loop` (Lab 4): the overflow policy of :meth:`zg.Engine.train_epoch` over any
  ``run_batch(b)`` function, so the lab can compare a student's poll / rewind / resume loop with
  the kit's on a toy step. It is built from the same pieces as the engine's loop
  (:class:`zg.step.OverflowPoll`, :meth:`zg.step.OverflowGuard.reset`).
* :func:`forbid` (every lab): while a test runs a student's function, the kit's own functions
  that compute the same result raise, however the student reached them (a module attribute, a
  name imported into the notebook, an alias), so a submission that calls the reference instead
  of writing it earns nothing.
* :func:`checks` (every lab's setup cell): the comparisons and the sync audit the tests use,
  bound when this module is first imported, before any student cell runs, so a cell that
  rebinds ``torch.equal``, ``torch.allclose`` or ``SyncAudit`` changes nothing in a test.
* :class:`FirstWriteWins` (labs whose answers scatter): PyTorch leaves undefined which of
  several writes to one index a ``scatter_`` or ``index_put_`` keeps; under this mode the
  first one wins instead of the last, so a test run both ways fails an answer that depends on
  the order.
* :func:`graded_against` (every lab's setup cell): the kit version the lab's tests were
  written and checked against; another version stops the notebook before any test runs, so a
  grade never changes silently because the kit changed mid-term.
* :func:`hook_on_workers` (Lab 6). Lab 6 asks for a DDP communication hook; a hook run
in one process (world size 1) cannot show whether it communicates, or whether it scales before
the all-reduce, so :func:`hook_on_workers` runs it on real gloo processes
(:func:`zg.grappa.launch.spawn`, as the kit's trainers start workers) and returns what every
rank got beside what it should have got. The kit's own hook is held while the student's runs.

The spawned workers cannot see a notebook's globals, so the hook travels as its source code
(``inspect.getsource``, which works for functions defined in a Jupyter cell) and is defined
again in each worker with ``torch`` and ``torch.distributed as dist`` in scope: the hook must
use nothing else from the notebook.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import tempfile
import textwrap
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode

from ._checks import seed_arg
from .audit import SyncAudit as _SyncAudit
from .errors import ZgError
from .grappa.comm import CommLedger
from .grappa.hook import HookState, estimator_hook
from .grappa.launch import spawn
from .step import OverflowGuard, OverflowPoll, mean_loss

__all__ = [
    "rewind_loop",
    "RewindRun",
    "hook_on_workers",
    "forbid",
    "forbid_within",
    "hold_references",
    "ForbiddenCall",
    "graded_against",
    "checks",
    "Checks",
    "FirstWriteWins",
    "LabVersionMismatch",
]


# ----------------------------------------------------------------------------- every lab

ANY_VERSION_ENV = "ZG_LABS_ANY_VERSION"


class LabVersionMismatch(ZgError, RuntimeError):
    """The kernel's zg is not the version a lab was released and checked against."""


def graded_against(version: str) -> str:
    """Stop unless this kernel runs zg ``version``, the one the lab was released with.

    Every lab's setup cell calls it, in the student's kernel and in the grader's: a lab checked
    against one version and graded against another could change a grade without anyone seeing
    why. Set ``ZG_LABS_ANY_VERSION=1`` to run anyway (a warning then says so). Returns the
    running version.
    """
    from . import __version__

    if not isinstance(version, str) or not version.strip():
        raise TypeError(f"version must be a version string like '0.3.0', got {version!r}")
    if version == __version__:
        return __version__
    import warnings

    from . import __file__ as where

    message = (
        f"this lab was released with zg {version} and its tests were checked against it; this "
        f"kernel runs zg {__version__} ({os.path.dirname(where)}). Install zg {version} (the "
        "wheel in the course's student distribution) and restart the kernel, or ask the course "
        "staff: graded against another version, points could change without anyone seeing why"
    )
    if os.environ.get(ANY_VERSION_ENV) == "1":
        warnings.warn(f"{message} ({ANY_VERSION_ENV}=1: running anyway)", stacklevel=2)
        return __version__
    raise LabVersionMismatch(message + f" (set {ANY_VERSION_ENV}=1 to run anyway)")


class Checks:
    """The comparisons and the audit a lab's tests use, bound when ``zg.labs`` was imported.

    A lab's setup cell binds ``zg_check = zg.labs.checks()`` before any student cell runs, and
    its tests call ``zg_check.equal``, ``.allclose``, ``.isclose``, ``.assert_close`` and
    ``.SyncAudit``: a student cell that rebinds ``torch.equal`` or ``SyncAudit`` afterwards
    changes nothing in a test. The attributes cannot be set. (A cell that rebinds ``zg_check``
    itself, or a kit module's attribute, is what the graders' tamper scan reports.)
    """

    __slots__ = ()
    equal = staticmethod(torch.equal)
    allclose = staticmethod(torch.allclose)
    isclose = staticmethod(torch.isclose)
    assert_close = staticmethod(torch.testing.assert_close)
    SyncAudit = _SyncAudit

    def __setattr__(self, name, value):
        raise AttributeError(f"zg.labs.checks() is read-only: cannot set {name!r}")

    def __repr__(self) -> str:
        return "zg.labs.checks(): equal, allclose, isclose, assert_close, SyncAudit"


_CHECKS = Checks()


def checks() -> Checks:
    """The comparisons bound when ``zg.labs`` was first imported (see :class:`Checks`)."""
    return _CHECKS


def _flipped_write(func, args, kwargs):
    """``func`` (a scatter or index_put without reduction) with its writes in reverse order.

    Writes to one index then land first-to-last reversed, so the first one stays. Returns
    None where the call has no order to reverse (a scalar source, a reduction, a ``None``
    index), and the caller runs it unchanged.
    """
    aten = torch.ops.aten
    name = func._schema.name.split("::")[-1]
    if name in ("scatter", "scatter_"):
        if len(args) < 4 or not isinstance(args[3], torch.Tensor) or kwargs.get("reduce"):
            return None
        self, dim, index, src = args[:4]
        if index.numel() == 0:
            return None
        d = dim % max(index.dim(), 1)
        rows = src[tuple(slice(0, n) for n in index.shape)]  # the entries scatter reads
        return func(self, dim, index.flip(d), rows.flip(d), *args[4:], **kwargs)
    if name in ("index_put", "index_put_", "_index_put_impl_"):
        self, indices, values = args[:3]
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if accumulate or any(i is None for i in indices):
            return None
        idx = []
        for i in indices:
            idx.extend(i.nonzero().unbind(1) if i.dtype == torch.bool else [i])
        idx = torch.broadcast_tensors(*idx)
        if idx[0].numel() == 0:
            return None
        lead = idx[0].shape
        rest = self.shape[len(idx) :]
        vals = values.expand(*lead, *rest).reshape(-1, *rest).flip(0)
        flat = [i.reshape(-1).flip(0) for i in idx]
        put = aten.index_put_ if name.endswith("_") else aten.index_put
        return put.default(self, flat, vals)
    if name in ("index_copy", "index_copy_"):
        self, dim, index, source = args[:4]
        return func(self, dim, index.flip(0), source.flip(dim))
    return None


class FirstWriteWins(TorchDispatchMode):
    """Run ``scatter_``, ``index_put_`` (``x[i] = v``) and ``index_copy_`` with their writes in
    reverse order, so that of several writes to one index the first stays, not the last.

    PyTorch does not say which duplicate such a write keeps (on a GPU it varies from run to
    run); the CPU happens to keep the last. A lab whose answer must not depend on that runs the
    student's function normally and under this mode, and compares both with the reference.
    Reductions (``scatter_reduce_``, ``index_add_``, ``accumulate=True``) are defined and run
    unchanged. ``flipped`` counts the writes it reversed.
    """

    _NAMES = (
        "scatter",
        "scatter_",
        "index_put",
        "index_put_",
        "_index_put_impl_",
        "index_copy",
        "index_copy_",
    )

    def __init__(self):
        super().__init__()
        self.flipped = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func._schema.name.split("::")[-1] in self._NAMES:
            out = _flipped_write(func, args, kwargs)
            if out is not None:
                self.flipped += 1
                return out
        return func(*args, **kwargs)


class ForbiddenCall(ZgError, AssertionError):
    """A student's function called a kit function the lab asks them to write themselves."""


def _functions_of(target) -> list:
    """The plain Python functions behind ``target``: itself, or every function a class defines
    (methods, static and class methods, properties' getters)."""
    if inspect.isfunction(target):
        return [target]
    if inspect.isclass(target):
        found = []
        for value in vars(target).values():
            value = getattr(value, "__func__", value)  # staticmethod / classmethod
            value = getattr(value, "fget", value)  # property
            if inspect.isfunction(value):
                found.append(value)
        return found
    raise TypeError(f"forbid takes functions and classes, got {type(target).__name__}")


# What each stand-in does, by its code object (one per forbidden function): the message, and
# for forbid_within the original function and the students' function names to look for.
_REFUSALS: dict = {}


def _refused(*args, **kwargs):
    """The code every forbidden function runs while it is held: it finds its entry through its
    own code object (it may not use its globals: they are the original module's)."""
    import sys

    from zg.labs import _held_call

    return _held_call(sys._getframe().f_code, sys._getframe(1), args, kwargs)


def _held_call(code, caller, args, kwargs):
    message, original, namespace, names = _REFUSALS[code]
    if original is None:
        raise ForbiddenCall(message)
    students = {f.__code__ for f in (namespace.get(n) for n in names) if inspect.isfunction(f)}
    frame = caller
    while frame is not None:
        if frame.f_code in students:
            raise ForbiddenCall(f"{message} (from {frame.f_code.co_name})")
        frame = frame.f_back
    return original(*args, **kwargs)


def _hold(fn, lab: str, original=None, namespace=None, names=()) -> tuple:
    """Give ``fn`` the stand-in's code; returns what restores it."""
    if fn.__code__.co_freevars:
        raise TypeError(f"forbid cannot hold {fn.__qualname__}: it is a closure")
    name = f"{fn.__module__}.{fn.__qualname__}"
    # Each stand-in its own code object (a distinct first line number), so two holds of one
    # function never share an entry.
    fields = {"co_name": fn.__name__, "co_filename": name, "co_firstlineno": len(_REFUSALS) + 1}
    if hasattr(fn.__code__, "co_qualname"):  # Python 3.11 and later
        fields["co_qualname"] = fn.__qualname__
    code = _refused.__code__.replace(**fields)
    _REFUSALS[code] = (
        f"{lab} asks you to write this yourself: do not call {name}",
        original,
        namespace,
        tuple(names),
    )
    saved = (fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__)
    fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, None, None
    return saved


@contextlib.contextmanager
def forbid(*targets, lab: str = "this lab"):
    """While the block runs, calling any of ``targets`` (functions, or classes: every function
    they define) raises :class:`ForbiddenCall` naming it. The function objects themselves are
    changed (their code), so every way of reaching them is covered: the module attribute, a
    name imported into the notebook, an alias. They are restored on exit, also after an error.

        with zg.labs.forbid(zg.labs.rewind_loop, zg.step.OverflowPoll, lab="Lab 4"):
            rewinds = train_with_rewind(run, 20, poll_every=4)   # the student's function
    """
    functions = [fn for target in targets for fn in _functions_of(target)]
    saved = []
    try:
        for fn in functions:
            saved.append(_hold(fn, lab))
        yield
    finally:
        for fn, code, defaults, kwdefaults in reversed(saved):
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


def forbid_within(namespace: dict, names, *targets, lab: str = "this lab") -> None:
    """From now on (a lab's setup cell calls it once), ``targets`` raise :class:`ForbiddenCall`
    when called while one of the functions ``names`` of ``namespace`` (the notebook's
    ``globals()``: the student's functions, looked up at each call, so they may be defined
    later) is running, directly or through any helper; called from anywhere else (the lab's
    own setup and tests) they work as before.

        zg.labs.forbid_within(globals(), ["gradient_error_of"], grappa.gradient_error, lab="Lab 9")
    """
    if not isinstance(namespace, dict):
        raise TypeError(f"namespace must be a dict (globals()), got {type(namespace).__name__}")
    names = [names] if isinstance(names, str) else list(names)
    for target in targets:
        for fn in _functions_of(target):
            held = _REFUSALS.get(fn.__code__)
            if held is not None and held[1] is not None:  # held already (the lab run again)
                _REFUSALS[fn.__code__] = (held[0], held[1], namespace, tuple(names))
                continue
            original = types.FunctionType(
                fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
            )
            original.__kwdefaults__ = fn.__kwdefaults__
            original.__qualname__ = fn.__qualname__
            _hold(fn, lab, original, namespace, names)


def _lab_references() -> dict[int, tuple[list[str], list]]:
    """Per lab: the functions it asks the student to write, and the kit's functions that compute
    the same result (what :func:`hold_references` turns off inside the former)."""
    import sys

    import zg.grappa  # noqa: F401 (loads the modules named below)
    from zg import audit, envelope, optim, sampling
    from zg.grappa import hook
    from zg.kernels import sampling as fused

    # zg.grappa.coverage and .partition are also functions there: the modules by their names.
    coverage, estimators, gradient, partition = (
        sys.modules[f"zg.grappa.{name}"]
        for name in ("coverage", "estimators", "gradient", "partition")
    )
    return {
        1: (["dynamic_compact", "compact_fewer_syncs"], [sampling.DynamicSampler.sample]),
        2: (
            ["first_occurrence", "compact_hop"],
            # The loop and its two stages (sample, compact), and the fused path. The numba
            # twins of the stages (fused.pick, fused.compact) are compiled dispatchers, not
            # Python functions, so they cannot be held; sample_fused, their one driver, is.
            [
                sampling.EnvelopeSampler.sample_static,
                sampling.EnvelopeSampler._sample_hop,
                sampling.EnvelopeSampler._compact_hop,
                sampling.EnvelopeSampler._sample_static_fused,
                fused.sample_fused,
            ],
        ),
        3: (
            ["envelope_sizes", "overflow_rate", "smallest_margin", "memory_bytes"],
            [
                envelope.Envelope.profile.__func__,
                envelope.Envelope._feasible,
                envelope.Envelope.memory_model,
                envelope.block_bytes,
            ],
        ),
        # DeviceSGD.step(apply=...) is the gated step itself. Its no_grad wrapper is a closure,
        # and so is the profiling wrapper torch.optim puts around a class's step once any
        # instance exists: the function innermost of them all is held.
        4: (
            ["train_with_rewind", "gated_sgd_"],
            [rewind_loop, OverflowPoll, inspect.unwrap(optim.DeviceSGD.step)],
        ),
        5: (
            ["coverage_brute_force", "coverage_propagation", "graph_coverage"],
            [coverage.coverage, coverage.local_coverage, coverage._propagate],
        ),
        6: (
            ["stats_of", "batch_scales", "shrink_scales", "scaled_allreduce_hook"],
            [
                hook.estimator_hook,
                estimators.batch_stats,
                estimators.masked_batch_stats,
                estimators.worker_scales,
                estimators._worker_scales_tensor,
                # the scale arithmetic each estimator class holds (Estimator.scales)
                estimators.BatchEstimator.scales,
                estimators.ShrinkEstimator.scales,
                estimators.UniformEstimator.scales,
                estimators.shrink_lambda,
                estimators._shrink_lambda_tensor,
            ],
        ),
        7: (
            ["pairs_met", "round_robin"],
            [
                partition.Partition.pair_coverage,
                partition._round_robin,
                partition._greedy_cover,
                partition._fixed_base,
                partition._partner_sweep,
            ],
        ),
        8: (["launches_per_step"], [audit.count_launches]),
        9: (["gradient_error_of"], [gradient.gradient_error, gradient._summarise]),
    }


def hold_references(namespace: dict, lab: int) -> list[str]:
    """A lab's setup cell: ``zg.labs.hold_references(globals(), 5)``. The kit's functions that
    compute what lab ``lab`` asks for raise :class:`ForbiddenCall` inside the student's
    functions (:func:`forbid_within`), and work as before in the lab's own setup and tests.
    Returns the names held, for the lab to print."""
    table = _lab_references()
    if lab not in table:
        raise ValueError(f"lab must be one of {sorted(table)}, got {lab!r}")
    names, targets = table[lab]
    forbid_within(namespace, names, *targets, lab=f"Lab {lab}")
    return [f"{t.__module__}.{t.__qualname__}" for t in targets]


# ----------------------------------------------------------------------------- Lab 4


@dataclass
class RewindRun:
    """What :func:`rewind_loop` did: executed steps (rewound ones included), rewound steps,
    overflow events, host polls, and the loss of every applied batch (by batch index)."""

    executed: int = 0
    rewound: int = 0
    overflows: int = 0
    polls: int = 0
    losses: dict[int, torch.Tensor] = field(default_factory=dict)

    def mean_loss(self) -> float:
        """One host read for the whole run."""
        return mean_loss(self.losses)


def rewind_loop(
    run_batch: Callable[[int], torch.Tensor],
    start: int,
    end: int,
    guard: OverflowGuard,
    poll_every: int,
    rewind: Callable[[int], None],
) -> RewindRun:
    """Run batches ``start .. end-1`` under the overflow policy.

    ``run_batch(b)`` runs batch ``b`` (its step gated by ``guard``) and returns its loss tensor;
    :class:`zg.step.OverflowPoll` decides when the host looks. On an overflow: ``rewind(first)``
    grows the envelope and rebuilds, the guard is reset, and the loop resumes at ``first``.
    """
    out = RewindRun()
    poll = OverflowPoll(guard, poll_every, start, end)
    b = start
    while b < end:
        out.losses[b] = run_batch(b)
        first = poll.after(b)
        b += 1
        if first is not None:
            out.losses = {k: v for k, v in out.losses.items() if k < first}
            rewind(first)
            guard.reset()
            b = first
    out.executed, out.rewound = poll.executed, poll.rewound
    out.overflows, out.polls = poll.overflows, poll.polls
    return out


# ----------------------------------------------------------------------------- Lab 6


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _rank_input(rank: int) -> torch.Tensor:
    return torch.randn(16, 8, generator=torch.Generator().manual_seed(100 + rank))  # [16, 8]


def _grads_through(ddp: torch.nn.Module, model: torch.nn.Module, rank: int) -> list:
    model.zero_grad()
    ddp(_rank_input(rank)).square().mean().backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def _hook_worker(
    rank: int,
    world_size: int,
    source: str,
    name: str,
    scales: Sequence[float],
    bucket_cap_mb: float,
    seed: int,
    out_dir: str,
) -> None:
    namespace = {"torch": torch, "dist": dist, "__name__": "student_hook"}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    hook = namespace[name]
    # What the gradient must be on every rank: sum over ranks r of scales[r] * (r's local gradient).
    reference = _model(seed)
    expected = None
    for r in range(world_size):
        local = _grads_through(reference, reference, r)
        expected = (
            [scales[r] * g for g in local]
            if expected is None
            else [e + scales[r] * g for e, g in zip(expected, local)]
        )
    model = _model(seed)
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    state = SimpleNamespace(scale=float(scales[rank]), ledger=CommLedger(world_size))
    ddp.register_comm_hook(state, hook)
    # Write it, don't call it: while the student's hook runs, the kit's own (the same scaled
    # all-reduce) raises, however the hook reaches it; the kit's run below is the reference.
    try:
        with forbid(estimator_hook, lab="Lab 6"):
            got = _grads_through(ddp, model, rank)
    except Exception as exc:
        refused = _forbidden_cause(exc)
        if refused is None:
            raise
        raise ForbiddenCall(f"rank {rank}: {refused}") from None
    kit_model = _model(seed)
    kit = DDP(kit_model, bucket_cap_mb=bucket_cap_mb)
    kit_state = HookState(CommLedger(world_size))
    kit_state.scale = float(scales[rank])
    kit.register_comm_hook(kit_state, estimator_hook)
    kit_got = _grads_through(kit, kit_model, rank)
    torch.save(
        {
            "got": got,
            "expected": expected,
            "kit": kit_got,
            "ledger": state.ledger.take(),
            "kit_ledger": kit_state.ledger.take(),
        },
        os.path.join(out_dir, f"{rank}.pt"),
    )


def _forbidden_cause(exc: BaseException) -> ForbiddenCall | None:
    """The :class:`ForbiddenCall` behind ``exc`` (DDP hands a hook's error on as a RuntimeError
    that holds its text), or None."""
    seen = exc
    while seen is not None:
        if isinstance(seen, ForbiddenCall):
            return seen
        seen = seen.__cause__ or seen.__context__
    found = re.search(r"Lab \d+ asks you to write this yourself: [^\n]*", str(exc))
    return ForbiddenCall(found.group(0)) if found else None


def hook_on_workers(
    hook: Callable,
    scales: Sequence[float],
    *,
    bucket_cap_mb: float = 25.0,
    seed: int = 0,
    timeout: float = 60.0,
) -> list:
    """Run the communication hook ``hook(state, bucket)`` under DDP on ``len(scales)`` gloo
    processes: rank r has its own input, ``state.scale = scales[r]`` and ``state.ledger`` a
    :class:`zg.grappa.comm.CommLedger`. Returns one dict per rank: ``got`` (the gradients DDP
    left, a list of tensors), ``expected`` (``sum_r scales[r] * grad_r``), ``kit`` (what
    :func:`zg.grappa.hook.estimator_hook` gives), ``ledger`` and ``kit_ledger`` (``take()`` of
    each ledger). While ``hook`` runs, ``estimator_hook`` raises (:func:`forbid`): a hook that
    hands the work to the kit's raises :class:`ForbiddenCall` here."""
    if not callable(hook) or not hasattr(hook, "__name__"):
        raise TypeError(f"hook must be a function, got {type(hook).__name__}")
    world_size = len(scales)
    if world_size < 2:
        raise ValueError("give at least two scales: one per worker, at least two workers")
    seed = seed_arg(seed)
    source = textwrap.dedent(inspect.getsource(hook))
    with tempfile.TemporaryDirectory(prefix="zg-lab-hook-") as out_dir:
        spawn(
            _hook_worker,
            world_size,
            args=(source, hook.__name__, [float(s) for s in scales], bucket_cap_mb, seed, out_dir),
            timeout=timeout,
            run_timeout=4 * timeout,
            backend="gloo",
        )
        return [torch.load(os.path.join(out_dir, f"{r}.pt")) for r in range(world_size)]
