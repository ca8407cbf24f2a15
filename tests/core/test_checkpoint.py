"""zg.checkpoint: an Engine saved and loaded, bit for bit; a bad file changes nothing."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine import engine, params

import zg
from zg import checkpoint, models
from zg.engine import Engine


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=3000, avg_degree=10, num_classes=4, feat_dim=16, seed=0)


def test_resume_mid_epoch_is_bitwise_identical(graph, tmp_path):
    straight = engine(graph, "profiled")
    straight.train_epoch()
    straight.train_epoch()

    first = engine(graph, "profiled")
    first.train_epoch()
    first.train_epoch(max_batches=5)
    assert (first.epoch, first.batch) == (1, 5)
    path = first.save(tmp_path / "ckpt.pt")

    resumed = engine(graph, "profiled")
    resumed.load(path)
    assert (resumed.epoch, resumed.batch) == (1, 5)
    resumed.train_epoch()
    assert all(torch.equal(p, q) for p, q in zip(params(resumed), params(straight)))
    assert resumed.epoch == 2 and resumed.batch == 0


def test_bad_checkpoints_raise_and_leave_the_engine_untouched(graph, tmp_path):
    eng = engine(graph)
    eng.train_epoch(max_batches=2)
    good = eng.save(tmp_path / "good.pt")
    target = engine(graph)
    before = params(target)

    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ValueError, match="corrupt"):
        target.load(corrupt)
    garbage = tmp_path / "garbage.pt"
    torch.save({"hello": 1}, garbage)
    with pytest.raises(ValueError, match="not a zg engine checkpoint"):
        target.load(garbage)
    with pytest.raises(FileNotFoundError):
        target.load(tmp_path / "missing.pt")

    other = Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 128, envelope="worst_case", seed=1)
    with pytest.raises(ValueError, match="different settings"):
        target.load(other.save(tmp_path / "other.pt"))
    state = torch.load(good, weights_only=True)
    state["model"]["layers.0.fc_self.weight"] = torch.zeros(3, 3)
    bad_shape = tmp_path / "shape.pt"
    torch.save(state, bad_shape)
    with pytest.raises(ValueError, match="wrong shape"):
        target.load(bad_shape)
    assert all(torch.equal(p, q) for p, q in zip(params(target), before))
    assert (target.epoch, target.batch) == (0, 0)
    assert not list(tmp_path.glob("*.tmp")), "saves are atomic"


def _rewritten(good, tmp_path, name, change):
    state = torch.load(good, weights_only=True)
    change(state)
    path = tmp_path / f"{name}.pt"
    torch.save(state, path)
    return path


@pytest.fixture(scope="module")
def saved(graph, tmp_path_factory):
    eng = engine(graph)
    eng.train_epoch(max_batches=2)
    return eng.save(tmp_path_factory.mktemp("ckpt") / "good.pt")


@given(
    where=st.sampled_from(["epoch", "batch"]),
    value=st.one_of(
        st.integers(min_value=2**62 + 1, max_value=2**80),
        st.integers(max_value=-1),
        st.booleans(),
        st.floats(allow_nan=True),
        st.text(max_size=3),
        st.none(),
    ),
)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_an_impossible_position_is_refused_and_never_written_back(
    graph, saved, tmp_path, where, value
):
    """epoch = 2**70, epoch = True, a negative batch, a float: refused by name, nothing loaded,
    so nothing impossible is written back at the next save."""
    target = engine(graph)
    before = params(target)

    def change(state):
        state[where] = value

    path = _rewritten(saved, tmp_path, "position", change)
    with pytest.raises(ValueError, match=f"position {where}|past the end"):
        target.load(path)
    assert (target.epoch, target.batch) == (0, 0)
    assert all(torch.equal(p, q) for p, q in zip(params(target), before))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_parameters_are_refused(graph, saved, tmp_path, bad):
    target = engine(graph)
    before = params(target)

    def change(state):
        name = next(iter(state["model"]))
        state["model"][name].view(-1)[0] = bad

    with pytest.raises(ValueError, match="NaN or inf"):
        target.load(_rewritten(saved, tmp_path, "nan", change))
    assert all(torch.equal(p, q) for p, q in zip(params(target), before))


@pytest.mark.parametrize("version", [1, 2, 3, 5, "4", None])
def test_only_the_current_version_is_read(graph, saved, tmp_path, version):
    def change(state):
        state["version"] = version

    with pytest.raises(ValueError, match="version"):
        engine(graph).load(_rewritten(saved, tmp_path, "version", change))


def test_the_engine_methods_are_the_modules_functions(graph, tmp_path):
    """Engine.save / load / state_dict are thin wrappers: the same file either way."""
    eng = engine(graph)
    eng.train_epoch(max_batches=2)
    a = eng.save(tmp_path / "a.pt")
    b = checkpoint.save(eng, tmp_path / "b.pt")
    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    assert sa.keys() == sb.keys() == eng.state_dict().keys()
    assert sa["version"] == checkpoint.VERSION and sa["settings"]["kernel"] == eng.kernel
    other = Engine(graph, models.SAGE(16, 32, 4, 2, dropout=0.5), [5, 5], 128, "worst_case", seed=1)
    checkpoint.load(other, b)
    assert all(torch.equal(p, q) for p, q in zip(params(other), params(eng)))
