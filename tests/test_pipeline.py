"""The three pipelines share one loop: same batches, same loss and optimizer, and the envelope
pipeline's step never syncs while the dynamic one does."""

import pytest
import torch

import zg
from zg import models
from zg.audit import SyncAudit
from zg.pipeline import DynamicPipeline, EnvelopePipeline, epoch_order, masked_cross_entropy


def graph():
    return zg.datasets.csbm(num_nodes=1500, avg_degree=8, num_classes=4, feat_dim=16,
                            homophily=0.8, seed=0)


def test_epoch_order_is_a_seeded_permutation():
    nodes = torch.arange(100, 200)
    a, b = epoch_order(nodes, 0, 3), epoch_order(nodes, 0, 3)
    assert torch.equal(a, b) and torch.equal(torch.sort(a).values, nodes)
    assert not torch.equal(a, epoch_order(nodes, 0, 4))


def test_masked_cross_entropy_ignores_padding():
    logits = torch.randn(6, 3)
    labels = torch.tensor([0, 1, 2, 0, -1, 5 % 3])
    valid = torch.tensor([True, True, True, True, False, False])
    full = torch.nn.functional.cross_entropy(logits[:4], labels[:4])
    assert torch.allclose(masked_cross_entropy(logits, labels, valid), full)


def test_pipelines_visit_the_same_batches(dgl):
    from zg.baselines.dgl import DGLModel, DGLPipeline

    g = graph()
    kw = dict(fanouts=[5, 5], batch_size=128, seed=4)
    pipes = [DGLPipeline(g, DGLModel("sage", 16, 16, 4, 2), **kw),
             DynamicPipeline(g, models.SAGE(16, 16, 4, 2), **kw),
             EnvelopePipeline(g, models.SAGE(16, 16, 4, 2), **kw)]
    batches = [[s.tolist() for _, s in p.batches(2)] for p in pipes]
    assert batches[0] == batches[1] == batches[2]
    # DGL's loader yields exactly these seeds, in this order.
    dgl_pipe = pipes[0]
    for b, seeds in dgl_pipe.batches(2):
        output_nodes = dgl_pipe.sample(seeds, 2, b).seeds
        assert torch.equal(output_nodes, seeds)


@pytest.mark.parametrize("kind", ["dynamic", "envelope", "dgl"])
def test_every_pipeline_learns(kind, require):
    g = graph()
    if kind == "dgl":
        require("dgl")
        from zg.baselines.dgl import DGLModel, DGLPipeline
        pipe = DGLPipeline(g, DGLModel("sage", 16, 32, 4, 2), [5, 5], 128, lr=1e-2)
    else:
        cls = DynamicPipeline if kind == "dynamic" else EnvelopePipeline
        pipe = cls(g, models.SAGE(16, 32, 4, 2), [5, 5], 128, lr=1e-2)
    first = pipe.train_epoch().loss
    for _ in range(3):
        last = pipe.train_epoch()
    assert last.loss < 0.8 * first
    assert last.iterations == pipe.num_batches()


def test_envelope_step_has_zero_syncs_dynamic_step_has_many():
    g = graph()
    env = EnvelopePipeline(g, models.SAGE(16, 16, 4, 2), [5, 5], 128)
    dyn = DynamicPipeline(g, models.SAGE(16, 16, 4, 2), [5, 5], 128)
    seeds = g.train_idx[:128]
    for pipe in (env, dyn):
        pipe.train_step(seeds, 0, 0)                  # warm-up (optimizer state exists already)
    with SyncAudit() as a:
        env.train_step(seeds, 0, 1)
    assert a.host_syncs == 0 and a.dynamic_shape_ops == 0, a.report()
    with SyncAudit() as a:
        dyn.train_step(seeds, 0, 1)
    assert a.host_syncs > 0


def test_bad_pipeline_arguments():
    g = graph()
    with pytest.raises(ValueError, match="batch_size"):
        EnvelopePipeline(g, models.SAGE(16, 16, 4, 2), [5, 5], 0)
    with pytest.raises(ValueError, match="envelope must be"):
        EnvelopePipeline(g, models.SAGE(16, 16, 4, 2), [5, 5], 64, envelope="tight")
    with pytest.raises(ValueError, match="optimizer must be"):
        DynamicPipeline(g, models.SAGE(16, 16, 4, 2), [5, 5], 64, optimizer="lbfgs")
    bare = zg.Graph.from_edges([0, 1], [1, 0])
    with pytest.raises(ValueError, match="features"):
        DynamicPipeline(bare, models.SAGE(16, 16, 4, 2), [5, 5], 64)


def test_eager_envelope_pipeline_never_applies_an_overflowed_batch():
    """The pipeline's own loop follows the one overflow policy: a tiny envelope gives the
    parameters of a worst-case run (before: truncated batches were applied)."""
    from zg.envelope import Envelope

    g = graph()
    runs = []
    for envelope in (Envelope.worst_case(g, [5, 5], 128), Envelope([150, 130], fanouts=[5, 5],
                                                                    batch_size=128, num_nodes=g.num_nodes)):
        torch.manual_seed(0)
        pipe = EnvelopePipeline(g, models.SAGE(16, 16, 4, 2), [5, 5], 128, envelope=envelope, seed=3)
        stats = [pipe.train_epoch() for _ in range(2)]
        runs.append((pipe, stats))
    (ref, ref_stats), (tiny, tiny_stats) = runs
    assert sum(s.overflows for s in tiny_stats) >= 1 and sum(s.overflows for s in ref_stats) == 0
    assert tiny_stats[0].rewound_batches >= 1
    diff = max(float((p - q).abs().max()) for p, q in zip(ref.model.parameters(), tiny.model.parameters()))
    assert diff <= 1e-5, diff
