"""zg.Graph: layout, validation (incl. hypothesis property tests), subgraph, DGL round trip."""

import collections

import numpy as np
import processes
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
from zg import Graph


def small_graph(**kw):
    src = torch.tensor([0, 1, 2, 2, 3, 0])
    dst = torch.tensor([1, 2, 0, 1, 0, 3])
    defaults = dict(
        num_nodes=4,
        x=torch.randn(4, 3),
        y=torch.tensor([0, 1, 1, -1]),
        train_idx=[0, 1],
        val_idx=[2],
    )
    defaults.update(kw)
    return Graph.from_edges(src, dst, **defaults)


def edge_multiset(src, dst):
    return collections.Counter(zip(torch.as_tensor(src).tolist(), torch.as_tensor(dst).tolist()))


# ----------------------------------------------------------------------------- layout


def test_csc_layout_lists_in_neighbours():
    g = small_graph()
    assert g.indptr.dtype == torch.int64 and g.indices.dtype == torch.int64
    assert g.num_nodes == 4 and g.num_edges == 6
    ins = {v: sorted(g.indices[g.indptr[v] : g.indptr[v + 1]].tolist()) for v in range(4)}
    assert ins == {0: [2, 3], 1: [0, 2], 2: [1], 3: [0]}
    assert g.in_degrees().tolist() == [2, 2, 1, 1]
    assert g.out_degrees().tolist() == [2, 1, 2, 1]
    assert g.x.dtype == torch.float32 and g.y.dtype == torch.int64
    assert g.num_classes == 2 and g.feat_dim == 3


def test_edges_round_trip_and_canonical_order():
    src = torch.randint(0, 50, (400,))
    dst = torch.randint(0, 50, (400,))
    g = Graph.from_edges(src, dst, num_nodes=50)
    s, d = g.edges()
    assert edge_multiset(s, d) == edge_multiset(src, dst)
    key = d * 50 + s
    assert bool((key[1:] >= key[:-1]).all()), "edges sorted by (dst, src)"


def test_int32_ids_are_accepted_and_widened():
    g = Graph.from_edges(np.array([0, 1], dtype=np.int32), torch.tensor([1, 0], dtype=torch.int32))
    assert g.indices.dtype == torch.int64 and g.num_nodes == 2


@pytest.mark.parametrize(
    "policy, expected",
    [
        ("keep", {(0, 0): 1, (0, 1): 2, (1, 0): 1}),
        ("remove", {(0, 1): 2, (1, 0): 1}),
        ("add", {(0, 0): 1, (1, 1): 1, (0, 1): 2, (1, 0): 1}),
    ],
)
def test_self_loop_policy(policy, expected):
    g = Graph.from_edges([0, 0, 0, 1], [0, 1, 1, 0], num_nodes=2, self_loops=policy)
    assert edge_multiset(*g.edges()) == expected


def test_duplicate_policy_and_symmetrize():
    g = Graph.from_edges([0, 0, 1], [1, 1, 2], num_nodes=3, duplicates="remove", symmetrize=True)
    assert edge_multiset(*g.edges()) == {(0, 1): 1, (1, 0): 1, (1, 2): 1, (2, 1): 1}
    g = Graph.from_edges([0, 0, 1], [1, 1, 2], num_nodes=3)
    assert g.num_edges == 3


def test_graph_without_edges_is_fine_but_without_nodes_is_not():
    g = Graph.from_edges([], [], num_nodes=3)
    assert g.num_nodes == 3 and g.num_edges == 0 and g.in_degrees().tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="no nodes"):
        Graph.from_edges([], [])
    with pytest.raises(ValueError, match="num_nodes"):
        Graph.from_edges([], [], num_nodes=0)


def test_repr_is_a_useful_summary():
    text = repr(small_graph())
    for part in (
        "num_nodes=4",
        "num_edges=6",
        "feat_dim=3",
        "num_classes=2",
        "train/val/test=2/1/0",
    ):
        assert part in text


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(indptr=[0, 2, 1], indices=[0, 1]), ValueError, "non-decreasing"),
        (dict(indptr=[1, 2, 2], indices=[0, 1]), ValueError, r"indptr\[0\]"),
        (dict(indptr=[0, 1, 3], indices=[0, 1]), ValueError, r"indptr\[-1\]"),
        (dict(indptr=[0], indices=[]), ValueError, "at least one node"),
        (dict(indptr=[0, 1, 2], indices=[0, 5]), ValueError, "indices holds id 5"),
        (dict(indptr=[0, 1, 2], indices=[0, -1]), ValueError, "indices holds a negative id"),
        (dict(indptr=[0.0, 1.0, 2.0], indices=[0, 1]), TypeError, "indptr must hold integer"),
        (dict(indptr=[0, 1, 2], indices=[0.0, 1.0]), TypeError, "indices must hold integer"),
        (dict(indptr=[[0, 1, 2]], indices=[0, 1]), TypeError, "indptr must be 1-dimensional"),
        (dict(indptr=[0, 1, 2], indices=[True, False]), TypeError, "boolean"),
        (dict(indptr="012", indices=[0, 1]), TypeError, "indptr"),
    ],
)
def test_csc_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        Graph(kwargs.pop("indptr"), kwargs.pop("indices"), **kwargs)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(src=[0, 1], dst=[1]), ValueError, "lengths must match"),
        (dict(src=[0, 9], dst=[1, 0], num_nodes=3), ValueError, "src holds id 9"),
        (dict(src=[0, 1], dst=[-1, 0], num_nodes=3), ValueError, "dst holds a negative id"),
        (dict(src=[0.5, 1.0], dst=[1, 0]), TypeError, "src must hold integer"),
        (dict(src=[0, 1], dst=[1, 0], num_nodes=2.0), TypeError, "num_nodes must be an int"),
        (dict(src=[0, 1], dst=[1, 0], num_nodes=True), TypeError, "num_nodes must be an int"),
        (dict(src=[0, 1], dst=[1, 0], num_nodes=10**15), ValueError, "num_nodes"),
        (dict(src=[0, 1], dst=[1, 0], num_nodes=2, x=torch.ones(3, 2)), ValueError, "x has 3 rows"),
        (
            dict(src=[0, 1], dst=[1, 0], x=torch.tensor([[1.0], [float("nan")]])),
            ValueError,
            "NaN or inf",
        ),
        (
            dict(src=[0, 1], dst=[1, 0], x=torch.tensor([[1.0], [float("inf")]])),
            ValueError,
            "NaN or inf",
        ),
        (dict(src=[0, 1], dst=[1, 0], x=np.array([[1e300], [0.0]])), ValueError, "NaN or inf"),
        (dict(src=[0, 1], dst=[1, 0], x=torch.ones(2)), TypeError, "x must be 2-dimensional"),
        (dict(src=[0, 1], dst=[1, 0], num_nodes=2, y=[0, 1, 2]), ValueError, "y has 3 entries"),
        (dict(src=[0, 1], dst=[1, 0], y=[0, -2]), ValueError, "y holds label -2"),
        (dict(src=[0, 1], dst=[1, 0], y=[0, 3], num_classes=3), ValueError, "y holds label 3"),
        (dict(src=[0, 1], dst=[1, 0], y=[0.0, 1.0]), TypeError, "y must hold integer"),
        (
            dict(src=[0, 1], dst=[1, 0], y=[0, 1], train_idx=[0, 2]),
            ValueError,
            "train_idx holds id 2",
        ),
        (
            dict(src=[0, 1], dst=[1, 0], y=[0, 1], train_idx=[0, 0]),
            ValueError,
            "train_idx lists node 0 more than once",
        ),
        (
            dict(src=[0, 1], dst=[1, 0], y=[0, 1], train_idx=[0], test_idx=[1, 0]),
            ValueError,
            "overlap",
        ),
        (
            dict(src=[0, 1], dst=[1, 0], y=[0, 1], val_idx=[-1]),
            ValueError,
            "val_idx holds a negative id",
        ),
        (dict(src=[0, 1], dst=[1, 0], y=[0, -1], train_idx=[1]), ValueError, "unlabelled"),
        (dict(src=[0, 1], dst=[1, 0], val_idx=[0.0]), TypeError, "val_idx must hold integer"),
        (dict(src=[0, 1], dst=[1, 0], self_loops="drop"), ValueError, "self_loops must be one of"),
        (dict(src=[0, 1], dst=[1, 0], duplicates="merge"), ValueError, "duplicates must be one of"),
        (dict(src=0, dst=[1]), TypeError, "src must be a tensor"),
        (dict(src=[[0, 1]], dst=[[1, 0]]), TypeError, "src must be 1-dimensional"),
    ],
)
def test_from_edges_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        Graph.from_edges(kwargs.pop("src"), kwargs.pop("dst"), **kwargs)


# Hypothesis: throw arbitrary (often malformed) inputs at the constructors. Every attempt must
# end in a well-formed Graph that holds exactly the given edges, or in ValueError/TypeError
# with a message: never another exception, never a silently wrong graph.

id_values = st.one_of(
    st.lists(st.integers(-3, 12), max_size=30),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=5),
    st.lists(st.booleans(), max_size=5),
    st.just([[0, 1], [1, 0]]),
)
id_dtypes = st.sampled_from([None, np.int64, np.int32, np.int16, np.uint8, np.float32])


def as_array(values, dtype):
    if dtype is None:
        return values
    try:
        return np.asarray(values, dtype=dtype)
    except (ValueError, TypeError, OverflowError):
        return values


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    src=id_values,
    dst=id_values,
    src_dtype=id_dtypes,
    dst_dtype=id_dtypes,
    num_nodes=st.one_of(st.none(), st.integers(-2, 12), st.floats(0, 12), st.just(2**40)),
    with_x=st.sampled_from(["none", "ok", "nan", "short"]),
    labels=st.one_of(st.none(), st.lists(st.integers(-2, 4), max_size=14)),
    train=st.one_of(st.none(), st.lists(st.integers(-1, 13), max_size=5)),
    test=st.one_of(st.none(), st.lists(st.integers(-1, 13), max_size=5)),
    self_loops=st.sampled_from(["keep", "remove", "add", "bogus"]),
    duplicates=st.sampled_from(["keep", "remove"]),
)
def test_from_edges_never_crashes_and_never_lies(
    src, dst, src_dtype, dst_dtype, num_nodes, with_x, labels, train, test, self_loops, duplicates
):
    src_in, dst_in = as_array(src, src_dtype), as_array(dst, dst_dtype)
    n_guess = num_nodes if isinstance(num_nodes, int) and 0 < num_nodes < 100 else 13
    x = {
        "none": None,
        "ok": torch.randn(n_guess, 2),
        "short": torch.randn(1, 2),
        "nan": torch.full((n_guess, 2), float("nan")),
    }[with_x]
    try:
        g = Graph.from_edges(
            src_in,
            dst_in,
            num_nodes,
            x=x,
            y=labels,
            train_idx=train,
            test_idx=test,
            self_loops=self_loops,
            duplicates=duplicates,
        )
    except (ValueError, TypeError) as exc:
        assert str(exc), "errors must carry a message"
        return
    # Accepted: the graph must be exactly what was asked for.
    s_in = torch.as_tensor(np.asarray(src_in)).long()
    d_in = torch.as_tensor(np.asarray(dst_in)).long()
    want = edge_multiset(s_in, d_in)
    if self_loops != "keep":
        want = collections.Counter({e: c for e, c in want.items() if e[0] != e[1]})
    if duplicates == "remove":
        want = collections.Counter({e: 1 for e in want})
    if self_loops == "add":
        want.update({(v, v): 1 for v in range(g.num_nodes)})
    assert edge_multiset(*g.edges()) == want
    assert g.indptr[0] == 0 and g.indptr[-1] == g.num_edges
    assert bool((g.indptr[1:] >= g.indptr[:-1]).all())
    assert g.num_edges == 0 or (0 <= int(g.indices.min()) and int(g.indices.max()) < g.num_nodes)
    if x is not None:
        assert torch.isfinite(g.x).all() and g.x.shape[0] == g.num_nodes
    for idx in (g.train_idx, g.test_idx):
        if idx is not None and idx.numel():
            assert len(set(idx.tolist())) == idx.numel()
            assert 0 <= int(idx.min()) and int(idx.max()) < g.num_nodes
    if g.train_idx is not None and g.test_idx is not None:
        assert not set(g.train_idx.tolist()) & set(g.test_idx.tolist())


@settings(max_examples=200, deadline=None)
@given(
    indptr=st.lists(st.integers(-2, 8), max_size=8),
    indices=st.lists(st.integers(-2, 8), max_size=10),
)
def test_csc_constructor_never_crashes(indptr, indices):
    try:
        g = Graph(indptr, indices)
    except (ValueError, TypeError) as exc:
        assert str(exc)
        return
    assert g.indptr.tolist() == indptr and g.indices.tolist() == indices
    assert indptr[0] == 0 and all(a <= b for a, b in zip(indptr, indptr[1:]))
    assert indptr[-1] == len(indices) and all(0 <= i < len(indptr) - 1 for i in indices)


# ----------------------------------------------------------------------------- transforms


def test_subgraph_is_induced_and_maps_back():
    torch.manual_seed(1)
    n = 60
    src, dst = torch.randint(0, n, (500,)), torch.randint(0, n, (500,))
    y = torch.randint(0, 3, (n,))
    g = Graph.from_edges(
        src,
        dst,
        n,
        x=torch.randn(n, 4),
        y=y,
        train_idx=torch.arange(0, 20),
        val_idx=torch.arange(20, 40),
    )
    nodes = torch.randperm(n)[:25]
    sub, global_ids = g.subgraph(nodes)
    assert torch.equal(global_ids, nodes)
    keep = set(nodes.tolist())
    want = collections.Counter(
        (s, d) for s, d in zip(src.tolist(), dst.tolist()) if s in keep and d in keep
    )
    s, d = sub.edges()
    assert edge_multiset(global_ids[s], global_ids[d]) == want
    assert torch.equal(sub.x, g.x[nodes]) and torch.equal(sub.y, g.y[nodes])
    assert sorted(global_ids[sub.train_idx].tolist()) == sorted(k for k in range(20) if k in keep)
    assert sorted(global_ids[sub.val_idx].tolist()) == sorted(k for k in range(20, 40) if k in keep)


def test_subgraph_validation():
    g = small_graph()
    with pytest.raises(ValueError, match="empty"):
        g.subgraph([])
    with pytest.raises(ValueError, match="repeated"):
        g.subgraph([1, 1])
    with pytest.raises(ValueError, match="nodes holds id 7"):
        g.subgraph([7])


def test_to_device_copies_everything():
    g = small_graph()
    h = g.to("cpu")
    assert (
        h is not g and torch.equal(h.indices, g.indices) and torch.equal(h.train_idx, g.train_idx)
    )
    assert h.num_classes == g.num_classes


def test_edge_homophily():
    g = Graph.from_edges([0, 1, 2, 3], [1, 0, 3, 0], y=[0, 0, 1, 1])
    assert g.edge_homophily() == pytest.approx(3 / 4)


# ----------------------------------------------------------------------------- DGL interop


def test_dgl_round_trip(dgl):
    torch.manual_seed(3)
    n = 40
    src, dst = torch.randint(0, n, (300,)), torch.randint(0, n, (300,))
    g = Graph.from_edges(
        src,
        dst,
        n,
        x=torch.randn(n, 5),
        y=torch.randint(0, 4, (n,)),
        train_idx=torch.arange(10),
        val_idx=torch.arange(10, 15),
        test_idx=torch.arange(30, 40),
    )
    d = g.to_dgl()
    assert d.num_nodes() == n and d.num_edges() == 300
    ds, dd = d.edges()
    assert edge_multiset(ds, dd) == edge_multiset(src, dst)
    assert torch.equal(d.in_degrees(), g.in_degrees())
    assert torch.equal(d.ndata["feat"], g.x) and torch.equal(d.ndata["label"], g.y)
    assert int(d.ndata["train_mask"].sum()) == 10
    back = Graph.from_dgl(d)
    for field in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        assert torch.equal(getattr(back, field), getattr(g, field)), field


def test_dgl_splits_survive_both_directions(dgl):
    """DGL -> zg -> DGL keeps every mask (and unlabelled nodes); zg -> DGL -> zg keeps the ids."""
    n = 30
    d = dgl.graph((torch.tensor([0, 1, 2, 5, 9, 9]), torch.tensor([1, 2, 0, 9, 5, 9])), num_nodes=n)
    d.ndata["feat"] = torch.randn(n, 4)
    d.ndata["label"] = torch.where(torch.arange(n) < 25, torch.arange(n) % 3, torch.tensor(-1))
    masks = {split: torch.zeros(n, dtype=torch.bool) for split in ("train", "val", "test")}
    masks["train"][[0, 3, 7, 11]] = True
    masks["val"][[1, 4, 20]] = True
    masks["test"][[2, 24]] = True
    for split, mask in masks.items():
        d.ndata[f"{split}_mask"] = mask
    g = Graph.from_dgl(d, name="from-dgl")
    assert g.name == "from-dgl" and g.num_classes == 3
    assert g.train_idx.tolist() == [0, 3, 7, 11] and g.val_idx.tolist() == [1, 4, 20]
    assert g.test_idx.tolist() == [2, 24]
    back = g.to_dgl()
    for split, mask in masks.items():
        assert torch.equal(back.ndata[f"{split}_mask"], mask), split
    assert torch.equal(back.ndata["label"], d.ndata["label"])
    assert edge_multiset(*back.edges()) == edge_multiset(*d.edges())
    # zg -> DGL -> zg with splits given out of order: the same id sets come back (sorted).
    shuffled = small_graph(train_idx=[1, 0], val_idx=[2], test_idx=None)
    again = Graph.from_dgl(shuffled.to_dgl())
    assert again.train_idx.tolist() == [0, 1] and again.val_idx.tolist() == [2]
    assert again.test_idx is None


def test_from_dgl_rejects_non_graphs_and_heterographs(dgl):
    with pytest.raises(TypeError, match="dgl.DGLGraph"):
        Graph.from_dgl("not a graph")
    hetero = dgl.heterograph({("a", "r", "b"): ([0], [0])})
    with pytest.raises(ValueError, match="homogeneous"):
        Graph.from_dgl(hetero)


# ----------------------------------------------------------------------------- PyG interop


@pytest.fixture
def pyg(require):
    return require("torch_geometric")


def test_pyg_round_trip(pyg):
    torch.manual_seed(3)
    n = 40
    src, dst = torch.randint(0, n, (300,)), torch.randint(0, n, (300,))
    y = torch.randint(0, 4, (n,))
    y[35:] = -1  # unlabelled nodes
    g = Graph.from_edges(
        src,
        dst,
        n,
        x=torch.randn(n, 5),
        y=y,
        train_idx=torch.arange(10),
        val_idx=torch.arange(10, 15),
        test_idx=torch.arange(30, 35),
        name="mine",
    )
    data = g.to_pyg()
    assert isinstance(data, pyg.data.Data) and data.num_nodes == n
    assert data.edge_index.shape == (2, 300) and data.edge_index.dtype == torch.int64
    assert edge_multiset(data.edge_index[0], data.edge_index[1]) == edge_multiset(src, dst)
    # PyG's own in-degree (messages flow edge_index[0] -> edge_index[1]) is zg's CSC in-degree.
    assert torch.equal(pyg.utils.degree(data.edge_index[1], n, dtype=torch.int64), g.in_degrees())
    assert torch.equal(data.x, g.x) and torch.equal(data.y, g.y)
    assert data.train_mask.dtype == torch.bool and int(data.train_mask.sum()) == 10
    assert torch.equal(torch.nonzero(data.test_mask).flatten(), g.test_idx)
    back = Graph.from_pyg(data, name="mine")
    for field in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        assert torch.equal(getattr(back, field), getattr(g, field)), field
    assert back.name == "mine" and back.num_classes == g.num_classes
    bare = Graph.from_edges([0, 1], [1, 2], num_nodes=4).to_pyg()  # no x, y or splits
    assert bare.x is None and bare.y is None and "train_mask" not in bare
    assert Graph.from_pyg(bare).num_nodes == 4


def test_from_pyg_reads_pyg_conventions(pyg):
    """OGB-style [N, 1] float labels with NaN, masks, isolated nodes, no features."""
    data = pyg.data.Data(edge_index=torch.tensor([[0, 1, 1, 3], [1, 0, 2, 3]]), num_nodes=6)
    data.y = torch.tensor([[0.0], [2.0], [float("nan")], [1.0], [float("nan")], [0.0]])
    data.train_mask = torch.tensor([True, True, False, False, False, False])
    data.test_mask = torch.tensor([False, False, False, True, False, True])
    g = Graph.from_pyg(data)
    assert g.num_nodes == 6 and g.num_edges == 4 and g.x is None
    assert g.y.tolist() == [0, 2, -1, 1, -1, 0] and g.y.dtype == torch.int64
    assert g.train_idx.tolist() == [0, 1] and g.val_idx is None and g.test_idx.tolist() == [3, 5]
    assert edge_multiset(*g.edges()) == edge_multiset([0, 1, 1, 3], [1, 0, 2, 3])
    assert Graph.from_pyg(pyg.data.Data(num_nodes=3)).num_edges == 0


def test_from_pyg_rejects_what_it_cannot_carry(pyg):
    with pytest.raises(TypeError, match="torch_geometric.data.Data"):
        Graph.from_pyg("not a graph")
    hetero = pyg.data.HeteroData()
    hetero["paper"].num_nodes = 3
    with pytest.raises(TypeError, match="homogeneous"):
        Graph.from_pyg(hetero)
    data = pyg.data.Data(edge_index=torch.tensor([[0], [1]]), num_nodes=3)
    data.train_mask = torch.ones(3, 2, dtype=torch.bool)  # several splits as columns
    with pytest.raises(ValueError, match="train_mask.*pick one"):
        Graph.from_pyg(data)
    data = pyg.data.Data(
        edge_index=torch.tensor([[0], [1]]), num_nodes=3, y=torch.tensor([0.5, 1.0, 2.0])
    )
    with pytest.raises(TypeError, match="data.y must hold integer class labels"):
        Graph.from_pyg(data)
    data = pyg.data.Data(edge_index=torch.tensor([0, 1]), num_nodes=3)
    with pytest.raises(ValueError, match=r"edge_index must have shape \[2, E\]"):
        Graph.from_pyg(data)
    data = pyg.data.Data(edge_index=torch.tensor([[0], [5]]), num_nodes=3)
    with pytest.raises(ValueError, match="dst holds id 5"):
        Graph.from_pyg(data)


# ----------------------------------------------------------------------------- in-place changes

_IN_PLACE = """
import sys, torch, zg
g = zg.datasets.csbm(num_nodes=400, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
change, kernel, where = sys.argv[1], sys.argv[2], sys.argv[3]
if change == "indices":
    g.indices.add_(10**6)
elif change == "indices_negative":
    g.indices[7] = -3
elif change == "indptr_tail":
    g.indptr[5:].add_(50)
elif change == "indptr_fall":
    g.indptr[10] = g.indptr[11] + 5
try:
    if where == "engine":
        zg.Engine(g, zg.models.SAGE(8, 8, 3, 2), [4, 4], 64, kernel=kernel).train_epoch()
    elif where == "sampler":
        zg.EnvelopeSampler(g, [4, 4], 64, kernel=kernel).sample(torch.arange(64))
    elif where == "dynamic":
        zg.DynamicSampler(g, [4, 4]).sample(torch.arange(64))
    else:
        zg.Envelope.profile(g, [4, 4], 64)
except ValueError as exc:
    print("refused:", exc)
    sys.exit(0)
print("not refused")
sys.exit(3)
"""


@pytest.mark.slow
@pytest.mark.parametrize("change", ["indices", "indices_negative", "indptr_tail", "indptr_fall"])
@pytest.mark.parametrize("where", ["engine", "sampler", "dynamic", "profile"])
def test_a_structure_changed_in_place_is_refused_never_read_out_of_bounds(change, where):
    """g.indices.add_(10**6) or g.indptr[5:].add_(...) after building a Graph once crashed the
    interpreter (the default envelope is profiled with the fused sampler): now every place that
    takes a graph checks its structure and names it. In a child process, so a crash fails the
    test instead of killing pytest."""
    import os
    import sys

    kernel = "auto" if where in ("engine", "sampler") else "torch"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = processes.run(
        [sys.executable, "-c", _IN_PLACE, change, kernel, where],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr[-2000:])
    assert "refused:" in out.stdout and "changed in place" in out.stdout, out.stdout
    named = "g.indices" if change.startswith("indices") else "g.indptr"
    assert named in out.stdout, out.stdout


def test_check_structure_accepts_every_valid_graph_and_names_the_array():
    g = zg.datasets.csbm(num_nodes=200, avg_degree=5, num_classes=3, feat_dim=4, seed=1)
    g.check_structure()
    g.indices[3] = g.num_nodes
    with pytest.raises(ValueError, match=r"mine\.indices holds node id 200"):
        g.check_structure("mine")
