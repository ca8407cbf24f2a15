"""State that is true after an interruption (docs/reliability.md).

The promise: ``Engine.train_epoch`` publishes its position with every batch, so an exception at
any point of an epoch (Ctrl-C in a notebook, a hook's error) leaves ``(engine.epoch,
engine.batch)`` naming the next batch not yet applied (and ``engine.history`` a record of the
interrupted call, ``interrupted=True``, counting the batches it applied), and a checkpoint written from a hook
mid-epoch holds that position. Continuing (or loading that checkpoint into a fresh engine)
trains exactly the batches an uninterrupted run trains, in the same order: the parameters
agree bit for bit. A batch that overflowed its envelope was never applied, even when the host
has not polled the flag yet: the position rewinds to it.

Generated over every batch of an epoch, before and after its step, in every mode, with and
without an overflowing envelope.
"""

from __future__ import annotations

import pytest
import torch
from graphs import tiny
from kit_lines import at_line, kit_tracer

import zg

BATCH = 32
MODES = ["dynamic", "eager", "static"]


class Stop(KeyboardInterrupt):
    """What a user's Ctrl-C raises (a BaseException, not an Exception)."""


def build(mode: str, envelope=None, hooks=None):
    g = tiny()
    torch.manual_seed(0)
    if mode == "dgl":
        pytest.importorskip("dgl")
        from zg.baselines.dgl import DGLModel

        model = DGLModel("sage", g.feat_dim, 8, int(g.num_classes), 2)
    else:
        model = zg.models.SAGE(g.feat_dim, 8, int(g.num_classes), 2)
    envelope = None if mode in ("dynamic", "dgl") else envelope
    return zg.Engine(g, model, [3, 3], BATCH, envelope, mode=mode, seed=3, hooks=hooks)


def parameters(engine) -> list[torch.Tensor]:
    return [p.detach().clone() for p in engine.model.parameters()]


def reference(mode: str, envelope=None) -> list[torch.Tensor]:
    engine = build(mode, envelope)
    engine.train_epoch()
    engine.train_epoch()
    return parameters(engine)


def interrupting(where: str, at: int):
    """StepHooks that raise :class:`Stop` once, before or after batch ``at`` of epoch 0."""
    fired = []

    def hook(epoch, batch):
        if (epoch, batch) == (0, at) and not fired:
            fired.append(True)
            raise Stop

    return zg.StepHooks(poll_every=4, **{where: hook}), fired


def small_envelope():
    """An envelope that overflows on some batches of the tiny graph (sizes just above the
    batch's rows)."""
    return zg.Envelope([BATCH + 4, BATCH + 2])


@pytest.mark.parametrize("overflowing", [False, True])
@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("mode", MODES)
def test_an_interrupted_epoch_continues_exactly(mode, where, overflowing):
    if overflowing and mode in ("dynamic", "dgl"):
        pytest.skip("no envelope to overflow")
    envelope = small_envelope() if overflowing else None
    want = reference(mode, envelope)
    batches = len(build(mode, envelope).batches(0))
    for at in range(batches):
        hooks, fired = interrupting(where, at)
        engine = build(mode, envelope, hooks)
        with pytest.raises(Stop):
            engine.train_epoch()
        assert fired
        # The position names the next batch not applied: never past the interrupted one.
        expected = (0, at + 1) if where == "after" else (0, at)
        if expected[1] == batches:
            expected = (1, 0)  # the epoch's last batch was applied: the next epoch's first
        assert (engine.epoch, engine.batch) <= expected
        if not overflowing:
            assert (engine.epoch, engine.batch) == expected
        # The history too: the interrupted call's record counts the batches applied before it.
        last = engine.history[-1]
        assert last.interrupted and last.iterations == (
            engine.batch if engine.epoch == 0 else batches
        )
        while engine.epoch < 2:  # the rest of epoch 0, then epoch 1
            engine.train_epoch()
        assert (engine.epoch, engine.batch) == (2, 0)
        for a, b in zip(parameters(engine), want):
            assert torch.equal(a, b), (mode, where, at)


def test_an_overflow_the_host_has_not_seen_rewinds_the_position():
    """Interrupted right after an overflowed batch, before the poll: the position is that
    batch (it and every batch after it were skipped on the device)."""
    envelope = zg.Envelope([BATCH + 1, BATCH + 1])  # every full batch overflows
    hooks, _ = interrupting("after", 2)
    engine = build("static", envelope, hooks)
    with pytest.raises(Stop):
        engine.train_epoch()
    assert engine.batch == 0


@pytest.mark.parametrize("overflowing", [False, True])
@pytest.mark.parametrize("mode", ["eager", "static"])
def test_a_checkpoint_written_from_a_hook_mid_epoch_resumes_exactly(mode, overflowing, tmp_path):
    envelope = small_envelope() if overflowing else None
    want = reference(mode, envelope)
    batches = len(build(mode, envelope).batches(0))
    for at in range(batches):
        path = tmp_path / f"at{at}.pt"
        holder = {}

        def after(epoch, batch, at=at, path=path, holder=holder):
            if (epoch, batch) == (0, at):
                holder["engine"].save(path)

        holder["engine"] = build(mode, envelope, zg.StepHooks(poll_every=4, after=after))
        holder["engine"].train_epoch()
        fresh = build(mode, envelope).load(path)
        assert (fresh.epoch, fresh.batch) <= ((0, at + 1) if at + 1 < batches else (1, 0))
        while fresh.epoch < 2:
            fresh.train_epoch()
        for a, b in zip(parameters(fresh), want):
            assert torch.equal(a, b), (mode, at)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["before", "after"])
def test_dgl_mode_keeps_a_true_position(where):
    """DGL's own sampler draws from generators seeded when its loader starts, so a loader
    started mid-epoch samples other neighbours than one that ran through (not bit for bit, as
    zg's keyed samplers are); the position after an interruption is still the next batch."""
    batches = len(build("dgl").batches(0))
    for at in range(batches):
        hooks, _ = interrupting(where, at)
        engine = build("dgl", None, hooks)
        with pytest.raises(Stop):
            engine.train_epoch()
        expected = (0, at + 1) if where == "after" else (0, at)
        assert (engine.epoch, engine.batch) == (expected if expected[1] < batches else (1, 0))
        while engine.epoch < 1:
            engine.train_epoch()
        assert (
            engine.history[-1].iterations == batches - expected[1]
            if expected[1] < batches
            else True
        )


# ----------------------------------------------------------------------------- at any line


CRITICAL = ("optim.py:step", "sampling.py:_compact_hop")  # writes that persist across calls


def _lines_of_an_epoch(mode: str) -> tuple[int, list[int]]:
    """(lines the kit runs in one epoch, those of them inside a critical write: the
    optimizer's in-place update, the sampler's marks)."""
    import sys

    critical = []

    def note(frame):
        names = []
        while frame is not None:
            names.append(f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}")
            frame = frame.f_back
        if any(n in CRITICAL for n in names):
            critical.append(seen[0])

    engine = build(mode)
    every, seen = kit_tracer(lambda frame, index: note(frame))  # at_line's counting
    sys.settrace(every)
    try:
        engine.train_epoch()
    finally:
        sys.settrace(None)
    return seen[0], critical


def _lines_to_try(mode: str, seed: int) -> list[int]:
    """12 lines over the whole epoch and 12 inside its critical writes."""
    import random

    total, critical = _lines_of_an_epoch(mode)
    rng = random.Random(seed)
    return sorted(rng.sample(range(1, total + 1), 12) + rng.sample(critical, 12))


@pytest.mark.parametrize("mode", MODES)
def test_an_exception_at_any_line_never_resumes_wrong(mode):
    """An exception raised at a line of the kit's code chosen over the whole first epoch (a
    hook's error, or a signal handler that raises, lands there): continuing trains exactly what
    an uninterrupted run trains, bit for bit, unless the exception tore the optimizer's
    in-place update; then, and only then, the engine refuses to train or save, naming
    Engine.load, and a checkpoint loaded ends the refusal."""
    import sys

    want = reference(mode)
    torn_seen = 0
    for k in _lines_to_try(mode, 0):
        landed = []

        def boom(frame, landed=landed):
            stack = []
            while frame is not None:
                stack.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")
                frame = frame.f_back
            landed.append(stack)
            raise Stop

        engine = build(mode)
        tracer, _ = at_line(k, boom)
        sys.settrace(tracer)
        try:
            with pytest.raises(Stop):
                engine.train_epoch()
        finally:
            sys.settrace(None)
        assert landed
        if engine._torn is not None:
            torn_seen += 1
            inside = [f for f in landed[0] if f.split(":")[0].endswith("optim.py")]
            assert any(f.endswith(":step") for f in inside), (k, landed[0][:6])
            for call in (engine.train_epoch, lambda engine=engine: engine.save("unused.pt")):
                with pytest.raises(RuntimeError, match="Engine.load"):
                    call()
            continue
        while engine.epoch < 2:
            engine.train_epoch()
        for p, q in zip(parameters(engine), want):
            assert torch.equal(p, q), (k, landed[0][:6])
    assert torn_seen  # some of the lines tried were inside the optimizer's update


@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_at_any_line_waits_for_its_batch(mode):
    """A real Ctrl-C (SIGINT to this process) at a line chosen over the whole first epoch:
    held until the batch in progress is published, so continuing always trains exactly what an
    uninterrupted run trains, bit for bit; never a torn step."""
    import os
    import signal
    import sys

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler here")
    want = reference(mode)
    for k in _lines_to_try(mode, 1):
        engine = build(mode)
        tracer, _ = at_line(k, lambda frame: os.kill(os.getpid(), signal.SIGINT))
        sys.settrace(tracer)
        try:
            with pytest.raises(KeyboardInterrupt):
                engine.train_epoch()
        finally:
            sys.settrace(None)
        assert engine._torn is None, k
        while engine.epoch < 2:
            engine.train_epoch()
        for p, q in zip(parameters(engine), want):
            assert torch.equal(p, q), k


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("caller_grad", [True, False])
def test_an_epoch_trains_with_autograd_whatever_the_callers_mode(mode, caller_grad):
    """train_epoch under the caller's torch.no_grad() trains what it trains outside it, and
    the caller's grad mode comes back however the call ends (an exception raised inside a
    no_grad block of the step, where torch >= 2.3 restores the mode through the active
    TorchFunctionModes, included)."""
    want = reference(mode)
    engine = build(mode)
    with torch.set_grad_enabled(caller_grad):
        engine.train_epoch()
        assert torch.is_grad_enabled() is caller_grad
        engine.train_epoch()
        assert torch.is_grad_enabled() is caller_grad
    for p, q in zip(parameters(engine), want):
        assert torch.equal(p, q)

    def torn(epoch, batch):  # an exception that left a no_grad block without its __exit__
        if batch == 1:
            torch.set_grad_enabled(False)
            raise Stop

    stopped = build(mode, hooks=zg.StepHooks(after=torn))
    with torch.set_grad_enabled(caller_grad):
        with pytest.raises(Stop):
            stopped.train_epoch()
        assert torch.is_grad_enabled() is caller_grad
