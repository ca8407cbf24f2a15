"""zg.grappa.fullgraph.WholeGraph: the whole graph as one batch, kept to the sampler contract
(its last block ends at the seeds), against the trusted references: the graph's own in-edges
(CSC) and the exact full-graph forward of ``full_forward`` (every node's logits, then the
seeds' rows: what batching="full" trained on before its last block ended at the seeds)."""

import copy

import pytest
import torch
import torch.nn.functional as F
from graphs import tiny
from hypothesis import given, settings
from hypothesis import strategies as st

import zg
from zg.grappa.fullgraph import WholeGraph, full_forward, whole_graph_block


def _seeds(n: int, count: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randperm(n, generator=gen)[:count]


@settings(max_examples=25, deadline=None)
@given(count=st.integers(1, 120), seed=st.integers(0, 2**31), layers=st.integers(1, 3))
def test_the_last_block_ends_at_the_seeds_and_every_block_holds_every_in_edge(count, seed, layers):
    g = tiny(120)
    seeds = _seeds(g.num_nodes, count, seed)
    mb = WholeGraph(whole_graph_block(g), [4] * layers).sample(seeds)
    assert len(mb.blocks) == layers and torch.equal(mb.seeds, seeds)
    last = mb.blocks[-1]
    assert last.nbr.shape[0] == count and int(last.num_dst) == count
    assert torch.equal(last.src_nodes[:count], seeds)  # destination rows: the seeds, in order
    order = last.src_nodes
    assert torch.equal(torch.sort(order).values, torch.arange(g.num_nodes))  # every node once
    for block in mb.blocks:
        assert torch.equal(block.src_nodes, order)  # one row order through every layer
        for row in range(block.nbr.shape[0]):
            v = int(order[row])
            got = order[block.nbr[row][block.mask[row]]]  # in-neighbours, as global ids
            assert torch.equal(got, g.indices[g.indptr[v] : g.indptr[v + 1]])  # CSC order
        out_degree = torch.bincount(g.indices, minlength=g.num_nodes).float()  # [N]
        assert torch.equal(block.out_degree, out_degree[order])
    for block in mb.blocks[:-1]:
        assert block.nbr.shape[0] == g.num_nodes
    assert mb.counts.tolist() == [g.num_nodes] * layers


@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
def test_an_epoch_trains_as_the_whole_graph_forward_does(kind):
    """Two epochs through the Engine with WholeGraph equal two SGD steps on the exact full-graph
    forward's seed rows (no dropout, so both draw nothing random)."""
    g = tiny(200)
    seeds = g.train_idx[torch.randperm(g.train_idx.numel())]  # any order: the loss keeps it
    model = zg.models.build_seeded(kind, g.feat_dim, 16, g.num_classes, 2, seed=3, dropout=0.0)
    reference = copy.deepcopy(model)
    initial = {k: v.clone() for k, v in model.layers[0].state_dict().items()}
    hooks = zg.StepHooks(batches=lambda epoch: [seeds])
    eng = zg.Engine(
        g, model, [5, 5], seeds.numel(), mode="eager", hooks=hooks,
        optimizer=zg.optim.sgd(lr=0.5), sampler=WholeGraph(whole_graph_block(g), [5, 5]),
    )  # fmt: skip
    eng.train_epoch()
    eng.train_epoch()
    sgd = torch.optim.SGD(reference.parameters(), lr=0.5)
    for _ in range(2):
        sgd.zero_grad()
        F.cross_entropy(full_forward(reference, g)[seeds], g.y[seeds]).backward()
        sgd.step()
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)
    assert not torch.equal(
        model.layers[0].state_dict()[next(iter(initial))], initial[next(iter(initial))]
    )


def test_bad_seeds_are_refused_naming_them():
    g = tiny(50)
    whole = WholeGraph(whole_graph_block(g), [3, 3])
    with pytest.raises(ValueError, match="seeds"):
        whole.sample(torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="seeds"):
        whole.sample(torch.tensor([50]))
    with pytest.raises(TypeError, match="block must be a zg.Block"):
        WholeGraph(g, [3, 3])
