"""zg.inference: the one full-graph evaluator (Engine.evaluate and Grappa's rank 0 alike), against
the whole-graph block forward of zg.grappa.fullgraph and against DGL's full-graph layers."""

import math

import pytest
import torch

import zg
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
