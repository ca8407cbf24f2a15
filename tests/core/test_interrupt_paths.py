"""An interruption at any line of the training loop's own path, an epoch that overflows its
envelope included (docs/reliability.md, "State after an interruption").

The promise: whatever line of ``Engine.train_epoch`` an exception lands on (the loop's
bookkeeping, the overflow poll, the envelope's growth and rebuild, the rewind to the first
overflowed batch, the observers' calls), the published position ``(engine.epoch,
engine.batch)`` names the next batch not applied, ``applied_position()`` agrees with it, the
history counts the batches applied, and continuing trains exactly what an uninterrupted run
trains: parameters and optimizer state bit for bit, the same envelope. No process state is
left behind (the SIGINT handler, torch's dispatch-mode stack, grad mode, threads).

The lines are drawn from a traced uninterrupted run: every line of the engine's and the
overflow policy's own code from the poll that sees an overflow to the next batch's step
(every rewind of the epoch), and lines drawn over the rest of the loop's path. A real SIGINT
is sent at the same rewind lines (what a user's Ctrl-C does there).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import warnings

import pytest
import torch
from graphs import tiny
from kit_lines import ZG_DIR, at_line
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

import zg

BATCH = 32
LOOP_FILES = ("engine.py", "step.py", "envelope.py")  # the loop's own path, not the model's


class Stop(KeyboardInterrupt):
    """What a user's Ctrl-C raises (a BaseException, not an Exception)."""


def build(mode: str) -> zg.Engine:
    """An epoch of 6 batches that overflows twice and rewinds (poll every 4 batches)."""
    g = tiny()
    torch.manual_seed(0)
    model = zg.models.SAGE(g.feat_dim, 8, int(g.num_classes), 2)
    envelope = zg.Envelope([BATCH + 4, BATCH + 2])
    return zg.Engine(
        g, model, [3, 3], BATCH, envelope, mode=mode, seed=3, hooks=zg.StepHooks(poll_every=4)
    )


def state(engine) -> list[torch.Tensor]:
    """The parameters and the optimizer's state (moments, step counts), in a fixed order."""
    out = [p.detach().clone() for p in engine.model.parameters()]
    for entry in engine.optimizer.state_dict()["state"].values():
        out += [v.detach().clone() for _, v in sorted(entry.items()) if torch.is_tensor(v)]
    return out


def reference(mode: str) -> tuple[list[torch.Tensor], list[int], int]:
    engine = build(mode)
    stats = engine.train_epoch()
    assert stats.overflows >= 2 and stats.rewound_batches > 0  # the path under test runs
    return state(engine), list(engine.envelope.sizes), stats.iterations


def _frames(frame) -> list[str]:
    names = []
    while frame is not None:
        names.append(f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}")
        frame = frame.f_back
    return names


def lines_of_the_path(mode: str) -> tuple[list[tuple[int, str]], list[int]]:
    """The loop's lines of one epoch, as :func:`at_line` counts the line events of the kit's
    code: ((index, "file:line") of every line from a poll that sees an overflow to the next
    batch's step, at every rewind), and the indices of the other loop lines. A loop line is
    one of the engine's, the overflow policy's or the envelope's own code, not inside a
    batch's step (those are tests/core/test_interruptions.py's)."""
    seen, rewinding = [0], [False]
    window, rest = [], []

    def every(frame, event, arg):
        if event == "call":
            if not frame.f_code.co_filename.startswith(ZG_DIR):
                return None
            if frame.f_code.co_name == "_train_batch":
                rewinding[0] = False  # the next batch's step begins
            return every
        if event == "return" and frame.f_code.co_name == "after" and arg is not None:
            rewinding[0] = frame.f_code.co_filename.endswith("step.py")
        if event == "line":
            seen[0] += 1
            names = _frames(frame)
            if names[0].split(":")[0] in LOOP_FILES and not any(
                n.endswith(":_train_batch") for n in names
            ):
                if rewinding[0]:
                    window.append((seen[0], f"{names[0]}:{frame.f_lineno}"))
                else:
                    rest.append(seen[0])
        return every

    engine = build(mode)
    sys.settrace(every)
    try:
        engine.train_epoch()
    finally:
        sys.settrace(None)
    return window, rest


def first_of_each(window: list[tuple[int, str]], files=("engine.py", "step.py")) -> list[int]:
    """The first time each line of the engine's and the overflow policy's code runs in the
    window (a line of the envelope's arithmetic changes nothing the engine holds)."""
    first: dict[str, int] = {}
    for k, line in window:
        if line.split(":")[0] in files:
            first.setdefault(line, k)
    return sorted(first.values())


def raise_stop(frame=None):
    raise Stop


def send_sigint(frame=None):
    os.kill(os.getpid(), signal.SIGINT)


def no_process_state_left(threads_before: set) -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert _get_current_dispatch_mode_stack() == []
    assert _get_current_function_mode_stack() == []
    assert torch.is_grad_enabled()
    assert {t.ident for t in threading.enumerate()} <= threads_before


def interrupted_then_continued(mode: str, k: int, action, want) -> None:
    """Interrupt epoch 0 at line ``k``, check what is published, continue to epoch 1's start,
    compare with the uninterrupted run."""
    want_state, want_sizes, batches = want
    threads = {t.ident for t in threading.enumerate()}
    engine = build(mode)
    sys.settrace(at_line(k, action)[0])
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.train_epoch()
    finally:
        sys.settrace(None)
    where = (mode, k)
    no_process_state_left(threads)
    assert engine._torn is None, where  # the loop's own lines never tear a step
    position = (engine.epoch, engine.batch)
    assert engine.applied_position() == position, where
    applied = batches if position == (1, 0) else engine.batch
    if engine.history:  # the interrupted call's record counts the batches it applied
        # (a call stopped after its epoch's record was written keeps that record)
        assert engine.history[-1].interrupted or position == (1, 0), where
        assert sum(h.iterations for h in engine.history) == applied, where
    else:  # stopped before the loop began: nothing applied
        assert applied == 0, where
    while engine.epoch < 1:
        engine.train_epoch()
    assert (engine.epoch, engine.batch) == (1, 0), where
    assert sum(h.iterations for h in engine.history) == batches, where
    assert list(engine.envelope.sizes) == want_sizes, where
    got = state(engine)
    assert len(got) == len(want_state), where
    for a, b in zip(got, want_state):
        assert torch.equal(a, b), where


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_an_exception_at_each_line_of_a_rewind_continues_exactly(mode):
    """Lines of the engine's and the overflow policy's code from the poll that sees an
    overflow to the next batch's step (the envelope's growth, the rebuild, the rewound
    position, the guard's reset, the next batch's start): 12 of them drawn (with the first and
    the last), and 4 loop lines drawn over the rest of the epoch. The fast lane's share: every
    one of these lines, each time it runs, is the slow test's below (``make test``)."""
    want = reference(mode)
    window, rest = lines_of_the_path(mode)
    lines = first_of_each(window)
    assert len(lines) > 30
    rng = random.Random(0)
    drawn = [lines[0], *rng.sample(lines[1:-1], 10), lines[-1]]
    for k in drawn + rng.sample(rest, 4):
        interrupted_then_continued(mode, k, raise_stop, want)


# A bounded loop of a few hundred epochs: the suite's 600 s timeout is for hangs, and this
# test nears it on a loaded 2-core machine.
@pytest.mark.timeout(1800)
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["eager", "static"])
def test_an_exception_at_every_line_of_every_rewind_continues_exactly(mode):
    """Every loop line of every rewind of the epoch, each time it runs (the envelope's
    arithmetic included), and 24 loop lines drawn over the rest of the epoch."""
    want = reference(mode)
    window, rest = lines_of_the_path(mode)
    for k in [k for k, _ in window] + random.Random(1).sample(rest, 24):
        interrupted_then_continued(mode, k, raise_stop, want)


# A bounded loop of a few hundred epochs: the suite's 600 s timeout is for hangs, and this
# test nears it on a loaded 2-core machine.
@pytest.mark.timeout(1800)
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["eager", "static"])
def test_ctrl_c_at_each_line_of_a_rewind_continues_exactly(mode):
    """A real SIGINT sent at each line of :func:`first_of_each`: raised at the next point
    Python checks for signals (held to the batch's publication inside a batch)."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler here")
    want = reference(mode)
    window, _ = lines_of_the_path(mode)
    for k in first_of_each(window):
        interrupted_then_continued(mode, k, send_sigint, want)


# ----------------------------------------------------------------------------- observers


def process_state() -> tuple:
    """What entering an observer may change for the whole process."""
    return (
        signal.getsignal(signal.SIGINT),
        [id(m) for m in _get_current_dispatch_mode_stack()],
        [id(m) for m in _get_current_function_mode_stack()],
        torch.is_grad_enabled(),
        list(warnings.filters),
        warnings.showwarning,
        # (a CPU-only build of torch has no CUDA sync debug mode)
        getattr(torch._C, "_cuda_get_sync_debug_mode", lambda: None)(),
        {t.ident for t in threading.enumerate()},
    )


def count_lines(run) -> list[tuple[int, str, bool]]:
    """(index, "file:function:line", whether it is its call's first line) of every line event
    of the kit's code while ``run()``."""
    seen: list[tuple[int, str, bool]] = []
    begun: set[int] = set()

    def every(frame, event, arg):
        if event == "call":
            return every if frame.f_code.co_filename.startswith(ZG_DIR) else None
        if event == "line":
            first = id(frame) not in begun
            begun.add(id(frame))
            seen.append((len(seen) + 1, f"{_frames(frame)[0]}:{frame.f_lineno}", first))
        return every

    sys.settrace(every)
    try:
        run()
    finally:
        sys.settrace(None)
    return seen


@pytest.mark.parametrize("where", [False, True])
@pytest.mark.parametrize("strict", [False, True])
def test_a_sync_audit_interrupted_at_any_line_leaves_nothing_behind(strict, where):
    """``with SyncAudit(...)`` around a few host reads, an exception at every line of the kit's
    code from entering to leaving (its recording included): torch's dispatch-mode and
    function-mode stacks, grad mode, warnings filters, the sync debug mode, the SIGINT handler
    and the threads are as before, and a fresh audit then counts what an uninterrupted one
    counts. One line no code of its own can guard: an exception on ``__exit__``'s first line,
    before any of it runs (Python raises a pending Ctrl-C there too); leaving again then
    leaves everything, as the engine's ``AuditSyncs`` does when an epoch is interrupted."""
    held = []

    def audited():
        audit = zg.audit.SyncAudit(where=where, strict=strict)
        held[:] = [audit]
        with audit:
            t = torch.arange(6.0)
            (t * 2).sum().item()
            t.tolist()
        return audit

    want = audited().host_syncs
    before = process_state()
    lines = count_lines(audited)
    assert any(":__enter__:" in name for _, name, _ in lines)
    assert any(":__exit__:" in name for _, name, _ in lines)
    for k, name, first in lines:
        sys.settrace(at_line(k, raise_stop)[0])
        try:
            with pytest.raises(Stop):
                audited()
        finally:
            sys.settrace(None)
        if first and name.startswith("audit.py:__exit__:"):
            held[0].__exit__(None, None, None)
        assert process_state() == before, name
    assert audited().host_syncs == want


def test_an_audit_left_twice_pops_nothing_of_anyone_else():
    """__exit__ again (an observer releasing an audit it closed) leaves an enclosing mode."""
    outer = zg.audit.SyncAudit()
    with outer:
        inner = zg.audit.SyncAudit().__enter__()
        inner.__exit__(None, None, None)
        inner.__exit__(None, None, None)
        assert [m for m in _get_current_dispatch_mode_stack()] == [outer]
    assert _get_current_dispatch_mode_stack() == []


# The observers' and the SIGINT hold's own code: what takes and gives back process state.
TAKING = (
    "observe.py:batch_start",
    "observe.py:batch_end",
    "observe.py:interrupted",
    "audit.py:__enter__",
    "audit.py:__exit__",
    "audit.py:_leave",
    "audit.py:_stop_cuda_watch",
    "_interrupt.py:__enter__",
    "_interrupt.py:__exit__",
    "_interrupt.py:release",
)


def test_an_epoch_interrupted_in_its_observers_enter_or_exit_leaves_nothing_behind():
    """Every line of the epoch's audit (``AuditSyncs`` entering and leaving a SyncAudit around
    the first steady batch) and of the SIGINT hold around each batch, the first time it runs:
    no process state is left, and continuing trains what an uninterrupted run trains."""
    mode = "static"
    want = reference(mode)
    lines = count_lines(build(mode).train_epoch)
    first: dict[str, int] = {}
    for k, name, _ in lines:
        if name.rsplit(":", 1)[0] in TAKING:
            first.setdefault(name, k)
    assert any(n.startswith("audit.py:__enter__") for n in first)
    assert any(n.startswith("_interrupt.py:__exit__") for n in first)
    for k in sorted(first.values()):
        interrupted_then_continued(mode, k, raise_stop, want)


# ----------------------------------------------------------------------------- a Grappa worker


def grappa_worker():
    """A Grappa worker (rank 0 of 1, in this process's gloo group) of the envelope step, whose
    epoch of 8 batches overflows and rewinds: its Engine runs the worker's hooks (the
    estimator's loss and its all_gather, the gradient exchange's all-reduce with the shared
    overflow flag, the account's clock, the roles' after-step)."""
    from zg.grappa import partition
    from zg.grappa.config import TrainConfig
    from zg.grappa.worker import _Worker

    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    cfg = TrainConfig(
        workers=1, step_shapes="envelope", batch_size=24, hidden_dim=16, num_layers=2,
        fanouts=[4, 4], kernel="torch", envelope_quantile=0.2, envelope_margin=0.0,
        poll_every=4,
    ).validated()  # fmt: skip
    worker = _Worker(cfg, g, partition(g, 1, method="random", seed=0), 0, 1, torch.device("cpu"))
    worker.enter(0)
    return worker


# A bounded loop of a few hundred epochs: the suite's 600 s timeout is for hangs, and this
# test nears it on a loaded 2-core machine.
@pytest.mark.timeout(1800)
@pytest.mark.slow
def test_a_grappa_workers_step_interrupted_at_any_line_continues_exactly():
    """Each line of the worker's own step code (zg/grappa: the loss, the exchange, the
    account, the after-step) and of the engine's loop from the poll that sees an overflow to
    the next batch's step, the first time it runs: the worker's Engine publishes a true
    position, its process group still answers, and continuing its Engine reaches the
    uninterrupted worker's parameters and Adam moments bit for bit. (A Grappa run itself
    resumes from its last checkpoint, at an epoch's start: tests/core/test_runs_end_cleanly.py.)"""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        reference_worker = grappa_worker()
        stats = reference_worker.engine.train_epoch()
        assert stats.overflows >= 1 and stats.rewound_batches > 0
        want = state(reference_worker.engine)
        lines = count_lines(grappa_worker().engine.train_epoch)
        first: dict[str, int] = {}
        rewinding = False
        for k, name, _ in lines:
            if name.startswith("step.py:after:"):
                rewinding = True  # from the first poll on (the loop's lines around a rewind)
            if name.startswith("engine.py:_train_batch:"):
                rewinding = False
            own = name.split(":")[0] in ("engine.py", "step.py") and rewinding
            if own or name.split(":")[0] in GRAPPA_FILES:
                first.setdefault(name, k)
        assert sum(n.startswith("exchange.py") for n in first) > 5
        for k in sorted(first.values()):
            worker = grappa_worker()
            engine = worker.engine
            sys.settrace(at_line(k, raise_stop)[0])
            try:
                with pytest.raises(Stop):
                    engine.train_epoch()
            finally:
                sys.settrace(None)
            assert _get_current_dispatch_mode_stack() == [], k
            assert engine._torn is None, k
            assert engine.applied_position() == (engine.epoch, engine.batch), k
            while engine.epoch < 1:
                engine.train_epoch()
            got = state(engine)
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert torch.equal(a, b), k
    finally:
        dist.destroy_process_group()


GRAPPA_FILES = ("worker.py", "exchange.py", "account.py", "comm.py", "estimators.py", "roles.py")
