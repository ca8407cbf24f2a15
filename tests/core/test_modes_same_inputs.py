"""Every mode checks the same inputs: an odd ``g.x`` (no feature columns, float64 or float16
beside a float32 model, integers, a sparse or strided (non-contiguous) tensor, the wrong width) or a model
with too few classes is refused by ``zg.Engine`` with the same error class and message in every
mode, "dgl" included, before DGL's C++ kernels or torch's matmul see it. And ``zg.Graph``
refuses a sparse ``x`` naming the fix (``x.to_dense()``).
"""

import pytest
import torch
from graphs import tiny
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
from zg.settings import MODES

pytest.importorskip("dgl")
from zg.baselines.dgl import DGLModel

RUNNABLE = [m for m in MODES if m != "graph" or torch.cuda.is_available()]


def _odd_graph(kind: str, width: int):
    """A graph whose ``x`` is odd in one way, and the model width and classes to build for it."""
    g = tiny()
    classes = int(g.num_classes)
    x = torch.randn(g.num_nodes, width)
    in_dim = width
    if kind == "zero_columns":
        x, in_dim = x[:, :0].contiguous(), width
    elif kind == "float64":
        x = x.double()
    elif kind == "float16":
        x = x.half()
    elif kind == "integers":
        x = x.round().long()
    elif kind == "sparse":
        x = x.to_sparse()
    elif kind == "strided":  # every other column of a wider matrix: not contiguous
        x = torch.randn(g.num_nodes, 2 * width)[:, ::2]
    elif kind == "wrong_width":
        in_dim = width + 1
    elif kind == "too_few_classes":
        classes -= 1
    g.x = x  # assigned after the build, as a user may
    return g, in_dim, classes


def _model(mode: str, in_dim: int, classes: int):
    torch.manual_seed(0)
    if mode == "dgl":
        return DGLModel("sage", in_dim, 8, classes, 2, dropout=0.0)
    return zg.models.SAGE(in_dim, 8, classes, 2, dropout=0.0)


def _refusal(mode: str, kind: str, width: int):
    g, in_dim, classes = _odd_graph(kind, width)
    envelope = None if mode in ("dgl", "dynamic") else "worst_case"
    try:
        eng = zg.Engine(g, _model(mode, in_dim, classes), [3, 3], 16, envelope, mode=mode)
        eng.train_epoch(max_batches=1)
    except Exception as exc:
        return type(exc), str(exc)
    return None


KINDS = [
    "zero_columns",
    "float64",
    "float16",
    "integers",
    "sparse",
    "strided",
    "wrong_width",
    "too_few_classes",
]


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), width=st.integers(1, 6))
def test_every_mode_refuses_an_odd_input_with_the_same_error(kind, width):
    refusals = {mode: _refusal(mode, kind, width) for mode in RUNNABLE}
    first = refusals[RUNNABLE[0]]
    assert first is not None, f"{kind}: mode {RUNNABLE[0]!r} trained"
    assert first[0] in (TypeError, ValueError), first
    assert "Check failed" not in first[1] and "double != float" not in first[1]
    for mode, got in refusals.items():
        assert got == first, f"{kind}: mode {mode!r} says {got}, mode {RUNNABLE[0]!r} {first}"


@pytest.mark.parametrize("mode", RUNNABLE)
def test_the_same_graph_unchanged_trains_in_every_mode(mode):
    """The generator's baseline is sound: a plain float32 x of the model's width trains."""
    g, in_dim, classes = _odd_graph("none", 4)
    envelope = None if mode in ("dgl", "dynamic") else "worst_case"
    eng = zg.Engine(g, _model(mode, in_dim, classes), [3, 3], 16, envelope, mode=mode)
    assert eng.train_epoch(max_batches=1).iterations == 1


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_sparse_x_is_refused_by_graph_naming_to_dense(layout):
    x = torch.eye(3)
    x = x.to_sparse() if layout == "coo" else x.to_sparse_csr()
    with pytest.raises(TypeError, match=r"^x must be a dense tensor.*x\.to_dense\(\)"):
        zg.Graph.from_edges(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]), x=x)
