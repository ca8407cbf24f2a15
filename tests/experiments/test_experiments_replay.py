"""zg.experiments.replay: the step's buffers stay put, parameter comparisons, and the trace of
executed steps through an overflow (notebook 03)."""

import pytest
import torch

import zg
from zg import experiments as ex
from zg import models
from zg.engine import Engine
from zg.envelope import Envelope
from zg.observe import Trace

FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=2000, avg_degree=8, num_classes=4, feat_dim=16, seed=0)


def engine(g, envelope="worst_case", trace=False):
    torch.manual_seed(0)
    eng = Engine(
        g, models.SAGE(g.feat_dim, 16, g.num_classes, len(FANOUTS)), FANOUTS, 64, envelope, seed=1
    )
    eng.observers = [Trace()] if trace else []
    return eng


@pytest.mark.slow
def test_static_addresses_cover_the_step_and_stay_put(graph):
    eng = engine(graph)
    eng.train_epoch(max_batches=1)
    before = ex.static_addresses(eng)
    marker = (
        "sampler.first" if eng.sampler.kernel == "torch" else "sampler.marker"
    )  # fused kernel: one array
    for key in (
        "engine.epoch_seeds",
        "engine.counter",
        "guard.overflowed",
        "optim.lr.0",
        marker,
        "graph.x",
    ):
        assert key in before, f"expected {key} among the static addresses, got {sorted(before)}"
    # Gradients are made afresh by every step's backward (in a capture: in the graph's pool).
    assert any(k.startswith("param.") for k in before)
    assert not any(k.startswith("grad.") for k in before)
    assert any(k.startswith("optim.") and k.endswith(".exp_avg") for k in before)
    eng.train_epoch(max_batches=3)
    assert ex.static_addresses(eng) == before


def test_parameter_comparisons():
    a = [torch.tensor([1.0, -0.0]), torch.zeros(2, 2)]
    b = [t.clone() for t in a]
    assert ex.bitwise_equal(a, b) and ex.max_abs_difference(a, b) == 0.0
    c = [torch.tensor([1.0, 0.0]), torch.zeros(2, 2)]  # -0.0 == 0.0, but not bitwise
    assert torch.equal(a[0], c[0]) and not ex.bitwise_equal(a, c)
    d = [torch.tensor([1.5, -0.0]), torch.zeros(2, 2)]
    assert ex.max_abs_difference(a, d) == 0.5
    assert not ex.bitwise_equal(a, a[:1])
    with pytest.raises(ValueError):
        ex.max_abs_difference(a, a[:1])
    model = torch.nn.Linear(3, 2)
    copies = ex.parameters(model)
    assert ex.bitwise_equal(copies, list(model.parameters()))
    with torch.no_grad():
        model.weight.add_(1.0)
    assert not ex.bitwise_equal(copies, ex.parameters(model))


def test_step_seconds_times_the_same_batches_on_each_engine(graph):
    """Each engine trains the same batches, one step per batch each: two engines from the same
    weights and seed end equal, and every step has its own positive time."""
    pair = {"a": engine(graph), "b": engine(graph)}
    seconds = ex.step_seconds(pair, range(3))
    assert list(seconds) == ["a", "b"]
    assert all(len(s) == 3 and all(t > 0 for t in s) for s in seconds.values())
    assert int(pair["a"].counter) == int(pair["b"].counter)
    assert ex.bitwise_equal(ex.parameters(pair["a"].model), ex.parameters(pair["b"].model))
    untouched = ex.parameters(engine(graph).model)
    assert not ex.bitwise_equal(untouched, ex.parameters(pair["a"].model))  # it trained


def test_trace_steps_shows_skipped_and_rerun_steps(graph):
    eng = engine(graph, Envelope([64] * len(FANOUTS)), trace=True)
    stats = eng.train_epoch()
    rows = ex.trace_steps(eng)
    assert [r["order"] for r in rows] == list(range(len(rows))) and len(rows) == stats.replays
    skipped = [r for r in rows if not r["applied"]]
    applied = [(r["epoch"], r["batch"]) for r in rows if r["applied"]]
    assert skipped and stats.overflows >= 1
    assert applied == [
        (0, b) for b in range(len(eng.batches(0)))
    ]  # each batch applied once, in order
    with pytest.raises(ValueError, match="no zg.observe.Trace"):
        ex.trace_steps(engine(graph))
