"""zg.inference: the one full-graph evaluator (Engine.evaluate and Grappa's rank 0 alike), against
the whole-graph block forward of zg.grappa.fullgraph and against DGL's full-graph layers."""

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
import zg.inference as inference
from zg import models
from zg.grappa.fullgraph import full_forward
from zg.inference import accuracy, evaluate, full_neighbour_logits


def graph(seed=3, feat_dim=6):
    return zg.datasets.csbm(
        num_nodes=250, avg_degree=5, num_classes=3, feat_dim=feat_dim, seed=seed
    )


@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("budget", [64, 1 << 22])
@pytest.mark.parametrize("feat_dim", [6, 40])  # 40: SAGE's first layer projects every node once
def test_chunked_logits_equal_the_whole_graph_block_forward(kind, budget, feat_dim):
    g = graph(feat_dim=feat_dim)
    torch.manual_seed(0)
    model = models.build(kind, g.feat_dim, 8, g.num_classes, 2, dropout=0.0).eval()
    with torch.no_grad():
        reference = full_forward(model, g)  # [N, C]
    assert torch.allclose(full_neighbour_logits(model, g, budget=budget), reference, atol=1e-5)


@pytest.mark.dgl
@pytest.mark.parametrize("feat_dim", [6, 40])
def test_chunked_sage_logits_equal_dgl_full_graph_layers(dgl, feat_dim):
    g = graph(seed=5, feat_dim=feat_dim)
    torch.manual_seed(0)
    model = models.SAGE(g.feat_dim, 8, g.num_classes, 2, dropout=0.0).eval()
    dg = g.to_dgl()
    h = g.x
    for i, layer in enumerate(model.layers):
        ref = dgl.nn.SAGEConv(h.shape[1], layer.fc_self.out_features, "mean")
        with torch.no_grad():
            ref.fc_self.weight.copy_(layer.fc_self.weight)
            ref.fc_self.bias.copy_(layer.fc_self.bias)
            ref.fc_neigh.weight.copy_(layer.fc_neigh.weight)
            if layer.fc_neigh.bias is not None:
                ref.fc_neigh.bias.copy_(layer.fc_neigh.bias)
            if getattr(ref, "bias", None) is not None:
                ref.bias.zero_()
            h = ref(dg, h)
        h = torch.relu(h) if i == 0 else h
    assert torch.allclose(full_neighbour_logits(model, g), h, atol=1e-5)


def bag_of_words(num_nodes, feat_dim, density, seed):
    """Sparse 0/1 features, as Cora's: about ``density`` of the entries are 1."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(num_nodes, feat_dim, generator=gen) < density).float()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    num_nodes=st.integers(1, 40),
    num_edges=st.integers(0, 160),
    feat_dim=st.sampled_from([3, 12, 30]),
    hidden=st.sampled_from([4, 16]),
    layers=st.integers(1, 3),
    kind=st.sampled_from(["sage", "gcn", "gat"]),
    sparse=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_logits_equal_the_whole_graph_block_forward_on_any_graph(
    num_nodes, num_edges, feat_dim, hidden, layers, kind, sparse, seed
):
    """The property: on any graph (duplicate edges, self-loops, nodes without in- or out-edges,
    no edge at all) and any features (sparse enough for the sparse first layer or not), every
    model's full-neighbour logits equal its training layers' forward on one block holding every
    edge; layers that narrow, keep or widen the width alike."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    if sparse:  # at most one non-zero per row of 30 or more: at most 1/30 of the entries
        feat_dim *= 10
        x = torch.zeros(num_nodes, feat_dim)
        rows = torch.rand(num_nodes, generator=gen) < 0.8
        columns = torch.randint(0, feat_dim, (num_nodes,), generator=gen)
        x[rows, columns[rows]] = torch.randn(int(rows.sum()), generator=gen)
        assert feat_dim >= 30 and inference._sparse_rows(x) is not None
    else:
        x = torch.randn(num_nodes, feat_dim, generator=gen)
    g = zg.Graph.from_edges(src, dst, num_nodes, x=x)
    torch.manual_seed(seed)
    model = models.build(kind, feat_dim, hidden, 3, layers, dropout=0.0).eval()
    with torch.no_grad():
        reference = full_forward(model, g)  # [N, 3]
    got = full_neighbour_logits(model, g, budget=16)
    assert got.shape == reference.shape
    assert torch.allclose(got, reference, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["sage", "gcn"])
def test_sparse_features_take_the_sparse_product_with_the_same_logits(kind, monkeypatch):
    """Bag-of-words features (2 % non-zero, as Cora's 1.3 %) enter the first layer as a sparse
    matrix; forcing the dense product gives the same logits, and so does the training layers'
    forward."""
    g = graph(seed=7, feat_dim=200)
    g.x = bag_of_words(g.num_nodes, 200, 0.02, seed=1)
    assert inference._sparse_rows(g.x) is not None
    torch.manual_seed(0)
    model = models.build(kind, 200, 16, g.num_classes, 3, dropout=0.0).eval()
    sparse = full_neighbour_logits(model, g)
    monkeypatch.setattr(inference, "SPARSE_FEATURES_BELOW", 0.0)
    assert inference._sparse_rows(g.x) is None
    dense = full_neighbour_logits(model, g)
    assert torch.allclose(sparse, dense, atol=1e-5)
    with torch.no_grad():
        assert torch.allclose(sparse, full_forward(model, g), atol=1e-5)


def test_sparse_rows_hold_exactly_the_non_zero_entries():
    x = torch.zeros(3, 40)  # 5 of 120 entries non-zero: 4 %
    x[0, 1], x[0, 39], x[2, 0], x[2, 3], x[2, 4] = 2.0, -1.0, 5.0, 0.5, 1e-30
    columns, values, offsets = inference._sparse_rows(x)
    assert offsets.tolist() == [0, 2, 2]
    assert columns.tolist() == [1, 39, 0, 3, 4]
    assert values.tolist() == [2.0, -1.0, 5.0, 0.5, x[2, 4].item()]
    dense = torch.randn(50, 8)  # no zero: the dense product
    assert inference._sparse_rows(dense) is None


def test_features_changed_in_place_are_read_as_they_are():
    """Nothing of g.x is kept between evaluations: changing the features in place (the values
    of g.x may change, zg.Graph says) changes the logits as the training forward does."""
    g = graph(seed=2, feat_dim=100)
    g.x = bag_of_words(g.num_nodes, 100, 0.02, seed=3)
    torch.manual_seed(0)
    model = models.SAGE(100, 8, g.num_classes, 2, dropout=0.0).eval()
    before = full_neighbour_logits(model, g)
    g.x[:, :50] = 0.0
    g.x[::3, 7] = 1.0
    after = full_neighbour_logits(model, g)
    with torch.no_grad():
        assert torch.allclose(after, full_forward(model, g), atol=1e-5)
    assert not torch.allclose(before, after)


def test_features_of_the_wrong_width_are_named():
    g = graph(feat_dim=6)
    model = models.SAGE(7, 8, g.num_classes, 2).eval()
    with pytest.raises(ValueError, match=r"g.x has shape \(250, 6\).*\[N, 7\]"):
        full_neighbour_logits(model, g)


@pytest.mark.dgl
@pytest.mark.parametrize("sparse", [False, True])
def test_gcn_logits_equal_dgl_full_graph_layers(dgl, sparse):
    g = graph(seed=9, feat_dim=40)
    if sparse:
        g.x = bag_of_words(g.num_nodes, 40, 0.03, seed=4)
    torch.manual_seed(0)
    model = models.GCN(g.feat_dim, 8, g.num_classes, 2, dropout=0.0).eval()
    dg = g.to_dgl()
    h = g.x
    for i, layer in enumerate(model.layers):
        ref = dgl.nn.GraphConv(
            h.shape[1], layer.weight.shape[1], norm="both", allow_zero_in_degree=True
        )
        with torch.no_grad():
            ref.weight.copy_(layer.weight)
            ref.bias.copy_(layer.bias)
            h = ref(dg, h)
        h = torch.relu(h) if i == 0 else h
    assert torch.allclose(full_neighbour_logits(model, g), h, atol=1e-5)


@pytest.mark.parametrize("budget", [0, -3, 2.5, True])
def test_a_budget_that_is_not_a_positive_int_is_named(budget):
    g = graph()
    model = models.GAT(g.feat_dim, 8, g.num_classes, 2).eval()
    with pytest.raises((TypeError, ValueError), match="budget"):
        full_neighbour_logits(model, g, budget=budget)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("sparse", [False, True])
def test_cuda_logits_equal_the_cpu_ones(kind, sparse):
    """The same evaluator on a GPU (embedding_bag's CUDA kernels, the sparse first layer's
    non-zero search there): the CPU's logits up to summation order."""
    g = graph(seed=11, feat_dim=60)
    if sparse:
        g.x = bag_of_words(g.num_nodes, 60, 0.03, seed=5)
    torch.manual_seed(0)
    model = models.build(kind, 60, 16, g.num_classes, 3, dropout=0.0).eval()
    on_cpu = full_neighbour_logits(model, g)
    on_gpu = full_neighbour_logits(model.cuda(), g.to("cuda"))
    assert on_gpu.is_cuda
    assert torch.allclose(on_gpu.cpu(), on_cpu, atol=1e-4, rtol=1e-4)


def test_evaluate_restores_the_training_mode_and_reports_each_split():
    g = graph()
    torch.manual_seed(0)
    model = models.SAGE(g.feat_dim, 8, g.num_classes, 2, dropout=0.5).train()
    acc = evaluate(model, g, ("val", "test", "train"))
    assert model.training
    model.eval()
    logits = full_forward(model, g)
    for split in ("val", "test", "train"):
        idx = getattr(g, f"{split}_idx")
        assert acc[split] == accuracy(logits[idx], g.y[idx])
    assert math.isnan(accuracy(torch.zeros(0, 3), torch.zeros(0, dtype=torch.int64)))


def test_grappa_evaluates_with_the_same_function():
    assert zg.grappa.evaluate is evaluate
