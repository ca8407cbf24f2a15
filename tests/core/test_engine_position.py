"""Engine.seek: the one public way to tell an Engine its position (the start of an epoch).

The reference for "epoch e trained after seek(e)" is the same Engine's step run batch by batch
outside the loop (``Engine.run_batch(b, epoch=e)``, keyed by the same (seed, epoch, batch)):
the parameters must agree bit for bit on the CPU. Seeking is refused where it would break the
rewind guarantee of docs/reliability.md (every batch applied once, in order): inside an
interrupted epoch, while an epoch runs, after a torn step. And nothing in the package but the
Engine writes ``engine.epoch`` / ``engine.batch``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import torch
from graphs import tiny
from hypothesis import given, settings
from hypothesis import strategies as st
from kit_lines import kit_tracer

import zg

ROOT = Path(__file__).resolve().parents[2]
LAST_EPOCH = 2**63 - 2  # the position after it, epoch + 1, is still an int64


def build(mode: str, hooks=None) -> zg.Engine:
    g = tiny()
    model = zg.models.build_seeded("sage", g.feat_dim, 8, g.num_classes, 2, seed=0)
    return zg.Engine(g, model, [3, 3], 64, mode=mode, seed=5, hooks=hooks)


def parameters(engine: zg.Engine) -> list[torch.Tensor]:
    return [p.detach().clone() for p in engine.model.parameters()]


@settings(max_examples=12, deadline=None)
@given(
    epoch=st.one_of(st.integers(0, 50), st.integers(0, LAST_EPOCH)),
    mode=st.sampled_from(["dynamic", "eager", "static"]),
    trained_before=st.integers(0, 1),
)
def test_seek_then_an_epoch_trains_that_epochs_batches(epoch, mode, trained_before):
    seeking, stepping = build(mode), build(mode)
    for _ in range(trained_before):  # seeking from the start of a later epoch too
        seeking.train_epoch()
        stepping.train_epoch()
    seeking.seek(epoch)
    assert (seeking.epoch, seeking.batch) == (epoch, 0)
    stats = seeking.train_epoch()
    assert stats.epoch == epoch and (seeking.epoch, seeking.batch) == (epoch + 1, 0)
    for b in range(len(stepping.batches(epoch))):
        stepping.run_batch(b, epoch=epoch)
    for got, want in zip(parameters(seeking), parameters(stepping)):
        assert torch.equal(got, want)


def test_seek_is_not_a_no_op():
    """Two epochs train different batches: the comparison above can fail."""
    first, second = build("static"), build("static")
    first.seek(3)
    second.seek(4)
    first.train_epoch()
    second.train_epoch()
    assert any(not torch.equal(a, b) for a, b in zip(parameters(first), parameters(second)))


@pytest.mark.parametrize(
    "value, error, message",
    [
        (-1, ValueError, r"epoch must be in \[0, 9223372036854775806\], got -1"),
        (2**63 - 1, ValueError, "epoch must be in"),
        (1.0, TypeError, "epoch must be an int, got float"),
        (True, TypeError, "epoch must be an int, got bool"),
        ("3", TypeError, "epoch must be an int, got str"),
    ],
)
def test_a_bad_epoch_is_refused_naming_it(value, error, message):
    engine = build("dynamic")
    with pytest.raises(error, match=message):
        engine.seek(value)
    assert (engine.epoch, engine.batch) == (0, 0)


def test_seek_refuses_an_epoch_an_interruption_left_partly_applied():
    engine = build("static")
    engine.train_epoch(max_batches=1)
    assert (engine.epoch, engine.batch) == (0, 1)
    with pytest.raises(RuntimeError, match="batch 1 of epoch 0.*train_epoch\\(\\) or load"):
        engine.seek(2)
    assert (engine.epoch, engine.batch) == (0, 1)
    engine.train_epoch()  # the epoch finished: seeking is fine again
    engine.seek(7)
    assert (engine.epoch, engine.batch) == (7, 0)


def test_seek_from_inside_an_epoch_is_refused():
    holder = {}

    def before(epoch, batch):
        if batch == 1:
            holder["engine"].seek(9)

    engine = build("eager", hooks=zg.StepHooks(before=before))
    holder["engine"] = engine
    with pytest.raises(RuntimeError, match="train_epoch is running epoch 0"):
        engine.train_epoch()
    assert (engine.epoch, engine.batch) == (0, 1)  # the interrupted epoch's true position


def test_seek_refuses_a_torn_step(tmp_path):
    """An exception inside the optimizer's in-place update (raised by a tracer at the first
    line after it starts writing) tears the step; seek refuses as train_epoch does, and a
    loaded checkpoint ends the refusal."""
    engine = build("dynamic")
    engine.save(checkpoint := tmp_path / "start.pt")

    def tear(frame, index):  # a line of the optimizer's in-place update
        if frame.f_locals.get("self") is engine.optimizer and engine.optimizer.writing:
            raise Stop

    sys.settrace(kit_tracer(tear)[0])
    try:
        with pytest.raises(Stop):
            engine.train_epoch()
    finally:
        sys.settrace(None)
    assert engine._torn is not None
    with pytest.raises(RuntimeError, match="seek: an exception landed inside"):
        engine.seek(1)
    engine.load(checkpoint)
    engine.seek(1)
    assert (engine.epoch, engine.batch) == (1, 0)


class Stop(KeyboardInterrupt):
    """What a user's Ctrl-C raises."""


def _position_writes(path: Path) -> list[str]:
    """Assignments to ``<...>engine.epoch`` / ``<...>engine.batch`` (or ``eng.``) in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        flat = []
        for t in targets:
            flat += t.elts if isinstance(t, ast.Tuple) else [t]
        for t in flat:
            if not (isinstance(t, ast.Attribute) and t.attr in ("epoch", "batch")):
                continue
            owner = t.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name in ("engine", "eng"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_nothing_outside_the_engine_writes_its_position():
    writes = [w for p in sorted((ROOT / "zg").rglob("*.py")) for w in _position_writes(p)]
    assert writes == []
    # The finder finds what it looks for.
    probe = ROOT / "zg" / "engine.py"
    assert _position_writes(probe) == []  # the Engine writes self.epoch, not engine.epoch
    sample = ROOT / "tests" / "core" / "test_engine_position.py"
    assert len(_position_writes(sample)) == 1  # the line below


def _never_called(engine):
    engine.epoch = 3


# ----------------------------------------------------------------------------- regroup


@pytest.mark.parametrize("mode", ["dynamic", "eager", "static"])
def test_a_regrouped_engine_trains_as_a_new_engine_on_the_new_data(mode):
    """Epoch 0 on one graph, then epoch 1 on another: regrouping the engine gives the same
    parameters, bit for bit, as building a new Engine over the same model and optimizer (what
    a Grappa worker did at each repartition before it kept one Engine)."""
    first, second = _graphs()
    envelope = None if mode == "dynamic" else "worst_case"
    runs = []
    for regroup in (True, False):
        model = zg.models.build_seeded("sage", first.feat_dim, 8, first.num_classes, 2, seed=0)
        engine = zg.Engine(first, model, [3, 3], 64, envelope, mode=mode, seed=5)
        engine.train_epoch()
        if regroup:
            engine.regroup(second, 48, envelope, seed=9)
        else:
            engine = zg.Engine(
                second, model, [3, 3], 48, envelope, mode=mode, seed=9,
                optimizer=engine.optimizer,
            )  # fmt: skip
            engine.seek(1)
        stats = engine.train_epoch()
        assert stats.epoch == 1 and engine.rows == min(48, second.train_idx.numel())
        runs.append(parameters(engine))
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def _graphs():
    """Two graphs of different sizes over the same features and classes (csbm, seeds 0, 1)."""
    one = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    two = zg.datasets.csbm(num_nodes=220, avg_degree=5, num_classes=3, feat_dim=8, seed=1)
    return one, two


def test_regroup_keeps_the_position_hooks_and_observers_and_moves_to_the_new_data():
    first, second = _graphs()
    seen = []
    hooks = zg.StepHooks(after=lambda epoch, b: seen.append((epoch, b)), poll_every=3)
    model = zg.models.build_seeded("sage", first.feat_dim, 8, first.num_classes, 2, seed=0)
    engine = zg.Engine(first, model, [3, 3], 64, mode="static", seed=5, hooks=hooks)
    engine.observers.append(zg.observe.Trace())
    engine.train_epoch()
    first_count = len(engine.batches(0))  # 180 nodes in batches of 64
    optimizer, observers = engine.optimizer, list(engine.observers)
    nodes = second.train_idx[:40]
    engine.regroup(second, 16, nodes=nodes)
    assert engine.g.num_nodes == second.num_nodes and engine.settings.num_nodes == 220
    assert torch.equal(engine.nodes, nodes) and engine.hooks.nodes is nodes
    assert engine.hooks.after is hooks.after and engine.settings.poll_every == 3
    assert engine.optimizer is optimizer and engine.model is model
    assert engine.observers == observers and (engine.epoch, engine.batch) == (1, 0)
    assert engine.seed == 5 and engine.rows == 16 and engine.settings.batch_size == 16
    seen.clear()
    engine.train_epoch()
    assert seen == [(1, b) for b in range(3)]  # 40 nodes in batches of 16
    assert sorted(torch.cat(engine.batches(1)).tolist()) == sorted(nodes.tolist())
    assert [e for e, _, _ in engine.applied_trace()] == [0] * first_count + [1] * 3
    assert len(engine.history) == 2


def test_regroup_checks_its_arguments_and_refuses_where_seek_does():
    first, second = _graphs()
    model = zg.models.build_seeded("sage", first.feat_dim, 8, first.num_classes, 2, seed=0)
    engine = zg.Engine(first, model, [3, 3], 64, mode="static", seed=5)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        engine.regroup(second, 0)
    with pytest.raises(TypeError, match="g must be a zg.Graph"):
        engine.regroup("second", 16)
    other = zg.datasets.csbm(num_nodes=100, avg_degree=5, num_classes=3, feat_dim=5, seed=1)
    with pytest.raises(ValueError, match="feat"):
        engine.regroup(other, 16)  # the model reads 8 features
    assert engine.g.num_nodes == 300  # nothing changed
    engine.train_epoch(max_batches=1)
    with pytest.raises(RuntimeError, match="regroup: the engine stands at batch 1 of epoch 0"):
        engine.regroup(second, 16)


def _bad_regroups(second):
    """(a user's bad regroup arguments, the TypeError / ValueError it must raise, what the
    message names): one per argument."""
    model_sized = zg.datasets.csbm(num_nodes=100, avg_degree=5, num_classes=3, feat_dim=5, seed=1)
    return [
        (dict(g=second, batch_size=0), ValueError, "batch_size must be >= 1"),
        (dict(g=second, batch_size=1.5), TypeError, "batch_size must be an int"),
        (dict(g="second", batch_size=16), TypeError, "g must be a zg.Graph"),
        (dict(g=model_sized, batch_size=16), ValueError, "feat"),
        (dict(g=second, batch_size=16, seed=-1), ValueError, "seed"),
        (dict(g=second, batch_size=16, seed="9"), TypeError, "seed"),
        (
            dict(g=second, batch_size=16, nodes=torch.tensor([0, 500])),
            ValueError,
            "StepHooks.nodes",
        ),
        (dict(g=second, batch_size=16, nodes=torch.tensor([3, 3])), ValueError, "StepHooks.nodes"),
        (dict(g=second, batch_size=16, envelope="tight"), ValueError, "envelope must be"),
        (
            dict(g=second, batch_size=16, envelope=zg.Envelope([9999, 16])),
            ValueError,
            "envelope size",
        ),
        (
            dict(g=second, batch_size=16, sampler=zg.EnvelopeSampler(second, [3], 16)),
            ValueError,
            "sampler.fanouts",
        ),
        (
            dict(
                g=second,
                batch_size=16,
                envelope="worst_case",
                sampler=zg.EnvelopeSampler(second, [3, 3], 16),
            ),
            ValueError,
            "envelope",
        ),
    ]


def test_the_public_regroup_refuses_a_users_bad_arguments_naming_each():
    """The kit's own regrouping checks nothing again (Engine._regroup_checked); a user's call of
    the public regroup keeps every check of the constructor, each error naming its argument,
    and changes nothing when it refuses."""
    first, second = _graphs()
    model = zg.models.build_seeded("sage", first.feat_dim, 8, first.num_classes, 2, seed=0)
    engine = zg.Engine(first, model, [3, 3], 64, mode="static", seed=5)
    before = (engine.g, engine.sampler, engine.settings.as_dict(), engine.rows)
    for bad, error, named in _bad_regroups(second):
        with pytest.raises(error, match=named):
            engine.regroup(**bad)
        assert (engine.g, engine.sampler, engine.settings.as_dict(), engine.rows) == before


@pytest.mark.parametrize("mode", ["dynamic", "eager", "static"])
def test_the_kits_regroup_trains_bit_for_bit_what_the_checked_regroup_trains(mode):
    """Engine._regroup_checked (a Grappa worker's: no check again) and Engine.regroup (a user's:
    every check) hand the engine the same data: the same parameters after an epoch on it, the
    same settings, rows and training nodes."""
    first, second = _graphs()
    envelope = None if mode == "dynamic" else "worst_case"
    nodes = second.train_idx[5:70]
    runs = []
    for checked in (True, False):
        model = zg.models.build_seeded("sage", first.feat_dim, 8, first.num_classes, 2, seed=0)
        engine = zg.Engine(first, model, [3, 3], 64, envelope, mode=mode, seed=5)
        engine.train_epoch()
        regroup = engine.regroup if checked else engine._regroup_checked
        regroup(second, 24, envelope, seed=9, nodes=nodes)
        engine.train_epoch()
        runs.append((parameters(engine), engine.settings.as_dict(), engine.rows, engine.nodes))
    (params_a, settings_a, rows_a, nodes_a), (params_b, settings_b, rows_b, nodes_b) = runs
    assert settings_a == settings_b and rows_a == rows_b and torch.equal(nodes_a, nodes_b)
    assert nodes_b is not nodes and nodes_b.data_ptr() != nodes.data_ptr()  # its own copy
    for a, b in zip(params_a, params_b):
        assert torch.equal(a, b)
