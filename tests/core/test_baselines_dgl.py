"""zg.baselines.dgl: mode "dgl" runs DGL's sampler and dgl.nn layers through the same Engine
loop, on the same batches as every zg mode."""

import pytest
import torch

import zg
from zg import models
from zg.audit import SyncAudit
from zg.engine import Engine


def graph():
    return zg.datasets.csbm(
        num_nodes=1500, avg_degree=8, num_classes=4, feat_dim=16, homophily=0.8, seed=0
    )


def test_masked_cross_entropy_ignores_padding():
    from zg.step import masked_cross_entropy

    logits = torch.randn(6, 3)
    labels = torch.tensor([0, 1, 2, 0, -1, 5 % 3])
    valid = torch.tensor([True, True, True, True, False, False])
    full = torch.nn.functional.cross_entropy(logits[:4], labels[:4])
    assert torch.allclose(masked_cross_entropy(logits, labels, valid), full)


@pytest.mark.slow
def test_dgl_mode_visits_the_batches_every_zg_mode_visits(dgl):
    from zg.baselines.dgl import DGLModel

    g = graph()
    engines = [
        Engine(g, DGLModel("sage", 16, 16, 4, 2), [5, 5], 128, mode="dgl", seed=4),
        Engine(g, models.SAGE(16, 16, 4, 2), [5, 5], 128, mode="dynamic", seed=4),
        Engine(g, models.SAGE(16, 16, 4, 2), [5, 5], 128, mode="static", seed=4),
    ]
    batches = [[s.tolist() for s in e.batches(2)] for e in engines]
    assert batches[0] == batches[1] == batches[2]
    # DGL's loader yields exactly these seeds, in this order, and when asked out of order.
    dgl_engine = engines[0]
    order = list(range(len(batches[0]))) + [3, 1, 2]
    for b in order:
        assert dgl_engine.sample(b, epoch=2).seeds.tolist() == batches[0][b]


@pytest.mark.parametrize("mode", ["dynamic", "eager", "static", "dgl"])
def test_every_mode_learns(mode, require):
    g = graph()
    if mode == "dgl":
        require("dgl")
        from zg.baselines.dgl import DGLModel

        model = DGLModel("sage", 16, 32, 4, 2)
    else:
        model = models.SAGE(16, 32, 4, 2)
    eng = Engine(g, model, [5, 5], 128, mode=mode, optimizer=zg.optim.adam(lr=1e-2))
    first = eng.train_epoch().loss
    for _ in range(3):
        last = eng.train_epoch()
    assert last.loss < 0.8 * first
    assert last.iterations == len(eng.batches(0))


def test_envelope_step_has_zero_syncs_dynamic_step_has_many():
    g = graph()
    env = Engine(g, models.SAGE(16, 16, 4, 2), [5, 5], 128, mode="eager", kernel="torch")
    dyn = Engine(g, models.SAGE(16, 16, 4, 2), [5, 5], 128, mode="dynamic")
    for eng in (env, dyn):
        eng.run_batch(0)  # warm-up (optimizer state exists already)
    with SyncAudit() as a:
        env.run_batch(1)
    assert a.host_syncs == 0 and a.dynamic_shape_ops == 0, a.report()
    with SyncAudit() as a:
        dyn.run_batch(1)
    assert a.host_syncs > 0


def test_dgl_mode_refuses_what_it_cannot_run(dgl):
    from zg.baselines.dgl import DGLModel

    g = graph()
    with pytest.raises(TypeError, match="mode='dgl' trains a dgl.nn model"):
        Engine(g, models.SAGE(16, 16, 4, 2), [5, 5], 128, mode="dgl")
    with pytest.raises(TypeError, match="must be a zg model"):
        Engine(g, DGLModel("sage", 16, 16, 4, 2), [5, 5], 128, mode="static")
