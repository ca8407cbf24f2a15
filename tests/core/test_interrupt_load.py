"""A checkpoint's load under Ctrl-C: all or nothing (docs/reliability.md, "State after an
interruption").

The promise: a real SIGINT at any line of ``Engine.load`` leaves the engine either exactly as it
was (the interrupt landed while the file was read and checked: nothing was assigned) or exactly
as the checkpoint says (it landed inside the assignments: they are held together and the
KeyboardInterrupt raised after the last), never between; torch's global generator is as the
caller left it either way; and loading again, or training on, behaves as after a clean load.

The whole state compared: parameters, Adam's moments and step counts, the device copy of the
learning rate, the position, the envelope's sizes, the torn-step mark. The checkpoint differs
from the engine in every one of them (an engine trained one epoch more, a grown envelope, a
torn step), so a load left half done cannot compare equal to either side.
"""

from __future__ import annotations

import inspect
import os
import random
import signal
import sys

import pytest
import torch
from graphs import tiny
from kit_lines import at_line, kit_tracer

import zg

BATCH = 32
MODES = ["eager", "static"]


def build(mode: str, envelope=None) -> zg.Engine:
    g = tiny()
    model = zg.models.build("sage", g.feat_dim, 8, int(g.num_classes), 2, seed=0)
    return zg.Engine(g, model, [3, 3], BATCH, envelope, mode=mode, seed=3)


def snapshot(engine: zg.Engine) -> dict:
    """Everything a load assigns, as plain host values."""
    opt = engine.optimizer
    state = []
    for group in opt.param_groups:
        for p in group["params"]:
            state.append(
                {
                    k: (v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v)
                    for k, v in sorted(opt.state.get(p, {}).items())
                }
            )
    return {
        "params": [p.detach().cpu().clone() for p in engine.model.parameters()],
        "state": state,
        "lr": [float(g["lr"]) for g in opt.param_groups],
        "device_lr": [float(t) for t in getattr(opt, "_lr", ())],
        "settings_lr": engine.settings.lr,
        "position": (engine.epoch, engine.batch),
        "envelope": tuple(engine.envelope.sizes) if engine.envelope is not None else None,
        "torn": engine._torn is not None,
    }


def same(a: dict, b: dict) -> bool:
    def eq(x, y):
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and torch.equal(x, y)
        if isinstance(x, dict):
            return isinstance(y, dict) and x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
        if isinstance(x, list | tuple):
            return len(x) == len(y) and all(eq(u, v) for u, v in zip(x, y))
        return x == y

    return all(eq(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Per mode: the checkpoint (two epochs, a grown envelope, another lr), what it holds, and a
    checkpoint of the engine a load lands in (one epoch, the first envelope)."""
    out = {}
    for mode in MODES:
        folder = tmp_path_factory.mktemp(mode)
        engine = build(mode, zg.Envelope([BATCH + 4, BATCH + 2]))  # overflows: it grows
        engine.train_epoch()
        start = build(mode, zg.Envelope([BATCH + 4, BATCH + 2]))
        start.load(engine.save(folder / "start.pt"))  # one epoch, the first envelope
        engine.train_epoch()
        for group in engine.optimizer.param_groups:
            group["lr"] = 0.02
        engine.settings.lr = 0.02
        for t in getattr(engine.optimizer, "_lr", ()):
            t.fill_(0.02)
        path = engine.save(folder / "ckpt.pt")
        out[mode] = (path, snapshot(engine), start.save(folder / "before.pt"))
    return out


def before(mode: str, saved) -> zg.Engine:
    """The engine a load lands in: one epoch behind, the first envelope, a torn-step mark."""
    engine = build(mode, zg.Envelope([BATCH + 4, BATCH + 2]))
    engine.load(saved[mode][2])
    engine._torn = "a step torn on purpose (test)"
    return engine


def lines_of_a_load(mode: str, path, saved) -> tuple[int, list[int]]:
    """How many line events of the kit's code one load runs, and those inside its assignments
    (the held block of zg.checkpoint.load)."""
    code = zg.checkpoint.load.__code__
    source, first = inspect.getsourcelines(zg.checkpoint.load)
    held = first + next(i for i, line in enumerate(source) if "with held_interrupt()" in line)
    inside = []

    def on_line(frame, index):
        stack = frame
        while stack is not None:
            if stack.f_code is code:
                if stack.f_lineno >= held:
                    inside.append(index)
                break
            stack = stack.f_back

    engine = before(mode, saved)
    tracer, seen = kit_tracer(on_line)
    sys.settrace(tracer)
    try:
        engine.load(path)
    finally:
        sys.settrace(None)
    return seen[0], inside


def lines_to_try(mode: str, path, saved, every: bool) -> list[int]:
    total, inside = lines_of_a_load(mode, path, saved)
    assert total > 50 and inside, (total, len(inside))
    if every:  # every line of the assignments, every 8th of the reading and checking before
        return sorted(set(inside) | set(range(1, total + 1, 8)))
    rng = random.Random(len(inside))
    return sorted(
        set(rng.sample(range(1, total + 1), 16) + rng.sample(inside, min(16, len(inside))))
    )


def interrupted_load(mode: str, path, saved, k: int) -> tuple[zg.Engine, dict, bool]:
    engine = before(mode, saved)
    was = snapshot(engine)
    rng_before = torch.random.get_rng_state()
    tracer, _ = at_line(k, lambda frame: os.kill(os.getpid(), signal.SIGINT))
    raised = False
    sys.settrace(tracer)
    try:
        engine.load(path)
    except KeyboardInterrupt:
        raised = True
    finally:
        sys.settrace(None)
    assert torch.equal(torch.random.get_rng_state(), rng_before), k
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, k
    return engine, was, raised


def check_all_or_nothing(mode: str, saved, every: bool) -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler here")
    path, want, _ = saved[mode]
    outcomes = set()
    for k in lines_to_try(mode, path, saved, every):
        engine, was, raised = interrupted_load(mode, path, saved, k)
        now = snapshot(engine)
        loaded = same(now, {**want, "torn": False})
        untouched = same(now, was)
        assert loaded != untouched, (k, raised)  # exactly one of the two, never between
        outcomes.add(loaded)
        # Either way the engine goes on as after a clean load of the same file.
        engine.load(path)
        assert same(snapshot(engine), {**want, "torn": False}), k
    assert outcomes == {True, False}  # some lines before the assignments, some inside them


@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_at_lines_of_a_load_leaves_all_or_nothing(mode, saved):
    """Lines drawn over the whole load and inside its assignments."""
    check_all_or_nothing(mode, saved, every=False)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_at_every_line_of_a_load_leaves_all_or_nothing(mode, saved):
    """Every line of the held assignments (the rebuild of a grown envelope included), and every
    8th line of the file's reading and checks (which assign nothing)."""
    check_all_or_nothing(mode, saved, every=True)


def test_the_hold_raises_after_its_block_and_restores_the_handler():
    from zg._interrupt import held_interrupt

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler here")
    done = []
    with pytest.raises(KeyboardInterrupt):
        with held_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("after the signal")  # the block still runs to its end
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C raises at once
        with held_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            done.append("never")
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
