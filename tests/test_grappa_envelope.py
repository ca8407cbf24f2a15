"""Grappa workers that run the ZeroGNN fixed-shape step (``sampler="envelope"``): no host
syncs in a worker's sampling, and an epoch that overflows some worker's envelope is rewound
exactly and rerun, so a tiny envelope trains exactly as the never-overflowing worst case."""

import pytest
import torch

import zg
from zg import grappa
from zg.audit import SyncAudit
from zg.grappa.train import IsolatedSource, TrainConfig

pytestmark = pytest.mark.timeout(300)

SMALL = dict(batch_size=48, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60,
             run_timeout=240, lr=0.02)


def tiny():
    return zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)


def source(g, sampler, rank=0, workers=2):
    cfg = TrainConfig(workers=workers, sampler=sampler, **SMALL).validated()
    part = grappa.partition(g, workers, method="random", seed=0)
    src = IsolatedSource(cfg, g, part, rank, workers, torch.device("cpu"), cfg.estimator_object)
    src.start_super_epoch(0)
    return src


def test_envelope_worker_samples_without_host_syncs():
    g = tiny()
    env, dyn = source(g, "envelope"), source(g, "dynamic")
    seeds = next(iter(env.batches(0)))
    env.begin_epoch()
    with SyncAudit() as audit:
        blocks, x, rows, y, w = env.sample(seeds, 0, 0)
    assert audit.host_syncs == 0 and audit.dynamic_shape_ops == 0, audit.report()
    assert rows == slice(0, seeds.numel()) and y.shape == w.shape == (seeds.numel(),)
    assert blocks[-1].nbr.shape[0] == env.sampler.batch_size          # padded, fixed shape
    with SyncAudit() as audit:
        dyn.sample(seeds, 0, 0)
    assert audit.host_syncs > 0, audit.report()


def test_envelope_worker_node_sets_are_exact():
    """The padded blocks hold exactly the nodes the sampler drew: rows map back to the seeds."""
    g = tiny()
    env = source(g, "envelope", rank=1)
    env.begin_epoch()
    for it, seeds in enumerate(env.batches(3)):
        blocks, x, rows, y, w = env.sample(seeds, 3, it)
        top = blocks[-1]
        assert torch.equal(top.src_nodes[: seeds.numel()], seeds)      # dst rows come first
        assert torch.equal(y, env.local.y[seeds])
        assert x.shape == (blocks[0].src_nodes.numel(), g.feat_dim)
    assert not bool(env.epoch_overflowed())                             # profiled + margin


def dropout_ignores_padding() -> bool:
    """Whether this torch build's CPU dropout gives the first rows the same mask, and leaves
    the generator in the same state, whatever the number of (padding) rows after them. Where
    it does not, a bigger envelope draws different dropout masks: same distribution, other
    numbers, so runs with different envelope sizes agree only with dropout off."""
    masks, states = [], []
    for rows in (64, 100):
        torch.manual_seed(0)
        masks.append(torch.nn.functional.dropout(torch.ones(rows, 16), 0.5)[:64])
        states.append(torch.rand(4))
    return torch.equal(*masks) and torch.equal(*states)


@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_tiny_envelope_rewinds_and_matches_the_worst_case(tmp_path, dropout):
    if dropout and not dropout_ignores_padding():
        pytest.skip("this torch build's CPU dropout masks depend on the padded size")
    g = tiny()
    common = dict(workers=2, estimator="batch", repartition_every=2, epochs=4, seed=3,
                  sampler="envelope", dropout=dropout, **SMALL)
    tiny_run = dict(common, envelope_quantile=0.01, envelope_margin=0.0,
                    model_path=str(tmp_path / "tiny.pt"))
    worst_run = dict(common, envelope="worst_case", model_path=str(tmp_path / "worst.pt"))
    tiny_hist, worst_hist = grappa.train_many(g, [tiny_run, worst_run])
    replays = [e["envelope_replays"] for e in tiny_hist["epochs"]]
    assert sum(replays) >= 1, replays                                     # it did overflow
    assert all(e["envelope_replays"] == 0 for e in worst_hist["epochs"])
    for a, b in zip(tiny_hist["epochs"], worst_hist["epochs"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["iterations"] == b["iterations"]
    assert tiny_hist["final"]["test_acc"] == worst_hist["final"]["test_acc"]
    p, q = torch.load(tmp_path / "tiny.pt"), torch.load(tmp_path / "worst.pt")
    for name in p:
        assert torch.allclose(p[name], q[name], rtol=1e-5, atol=1e-6), name


def test_envelope_sampler_configs_fail_clearly():
    with pytest.raises(ValueError, match="sampler"):
        TrainConfig(sampler="fixed").validated()
    with pytest.raises(ValueError, match="sampler='envelope'"):
        TrainConfig(sampler="envelope", mode="full").validated()
    with pytest.raises(ValueError, match="sampler='envelope'"):
        TrainConfig(sampler="envelope", trainer="feature_fetch").validated()
    with pytest.raises(ValueError, match="envelope_quantile"):
        TrainConfig(sampler="envelope", envelope_quantile=0.0).validated()
    with pytest.raises(ValueError, match="envelope"):
        TrainConfig(sampler="envelope", envelope="tight").validated()
