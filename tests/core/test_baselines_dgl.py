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


# ----------------------------------------------------------------------------- zg.DGLSampler


def _dgl_run(dgl_sampler: bool, g, seed: int, replace: bool = False, epochs: int = 2):
    """Train ``epochs`` epochs with DGL's sampler, passed (mode "eager") or by the shorthand
    (mode "dgl"); then run batches 2, 0, 1 of the next epoch outside the loop (a profiler's
    jumps). Returns the engine, its losses and parameters."""
    from zg.baselines.dgl import DGLModel

    torch.manual_seed(seed)
    model = DGLModel("sage", 16, 16, 4, 2)
    if dgl_sampler:
        sampler = zg.DGLSampler(g, [5, 5], replace=replace, seed=seed)
        eng = Engine(g, model, [5, 5], 128, mode="eager", sampler=sampler, seed=seed)
    else:
        eng = Engine(g, model, [5, 5], 128, mode="dgl", seed=seed)
    losses = [eng.train_epoch().loss for _ in range(epochs)]
    losses += [float(eng.run_batch(b, epoch=epochs)) for b in (2, 0, 1)]
    return eng, losses, [p.detach().clone() for p in model.parameters()]


@pytest.fixture
def one_dgl_thread(dgl):
    """DGL samples on its OpenMP threads, each with its own generator: two runs draw the same
    neighbours only with one thread (zg.DGLSampler's docstring)."""
    import dgl.utils

    before = dgl.utils.get_num_threads()
    dgl.utils.set_num_threads(1)
    yield
    dgl.utils.set_num_threads(before)


@pytest.mark.dgl
@pytest.mark.parametrize("seed", [0, 7])
def test_dgl_sampler_passed_like_any_other_trains_bit_for_bit_what_mode_dgl_trains(
    dgl, one_dgl_thread, seed
):
    """mode="dgl" is a shorthand: Engine(..., mode="eager", sampler=zg.DGLSampler(...)) trains
    the same losses and parameters, bit for bit (the step's gate on an exact-size sampler
    selects the values it would write); both record kernel "dgl" and have no envelope."""
    g = graph()
    passed, losses_p, params_p = _dgl_run(True, g, seed)
    short, losses_s, params_s = _dgl_run(False, g, seed)
    assert losses_p == losses_s
    for a, b in zip(params_p, params_s):
        assert torch.equal(a, b)
    assert isinstance(short.sampler, zg.DGLSampler) and short.sampler.seed == seed
    assert passed.kernel == short.kernel == "dgl" and passed.envelope is short.envelope is None
    assert (passed.mode, passed.launch, short.mode, short.launch) == ("eager",) * 2 + ("dgl",) + (
        "eager",
    )


@pytest.mark.dgl
def test_dgl_sampler_with_replacement_is_the_samplers_option(dgl, one_dgl_thread):
    g = graph()
    eng, losses, _ = _dgl_run(True, g, 3, replace=True, epochs=1)
    assert eng.replace is True and eng.settings.replace is True and eng.sampler.replace is True
    _, without, _ = _dgl_run(True, g, 3, replace=False, epochs=1)
    assert losses != without  # another draw


@pytest.mark.dgl
def test_dgl_sampler_refuses_what_it_cannot_run(dgl):
    from zg.baselines.dgl import DGLModel

    g = graph()
    sampler = zg.DGLSampler(g, [5, 5], seed=1)
    with pytest.raises(TypeError, match=r"a sampler of DGL's blocks \(zg.DGLSampler\) trains"):
        Engine(g, models.SAGE(16, 16, 4, 2), [5, 5], 128, mode="eager", sampler=sampler)
    with pytest.raises(TypeError, match="zg.StaticSampler"):
        Engine(g, DGLModel("sage", 16, 16, 4, 2), [5, 5], 128, mode="static", sampler=sampler)
    with pytest.raises(ValueError, match="mode='dgl' names its own sampler"):
        Engine(g, DGLModel("sage", 16, 16, 4, 2), [5, 5], 128, mode="dgl", sampler=sampler)
    with pytest.raises(ValueError, match=r"sampler.fanouts is \[5, 5\] but fanouts is \[3, 3\]"):
        Engine(g, DGLModel("sage", 16, 16, 4, 2), [3, 3], 128, mode="eager", sampler=sampler)
    with pytest.raises(TypeError, match="replace must be a bool"):
        zg.DGLSampler(g, [5, 5], replace=1)
    with pytest.raises(ValueError, match="seed"):
        zg.DGLSampler(g, [5, 5], seed=-1)
    with pytest.raises(ValueError, match="was not prepared"):
        sampler.sample(g.train_idx[:128], 0, 0)
    batches = list(torch.split(g.train_idx, 128))
    uneven = [batches[0][:100], *batches[1:]]
    with pytest.raises(ValueError, match="batch 0 of epoch 0 has 100 seeds, not 128"):
        sampler.prepare(0, 0, uneven)
    sampler.prepare(0, 0, batches)
    with pytest.raises(ValueError, match="seeds are not batch 0 of epoch 0"):
        sampler.sample(batches[1], 0, 0)


def test_without_dgl_the_sampler_and_the_mode_say_how_to_get_it():
    """``import zg`` needs no DGL (zg.DGLSampler is defined without it); building one, or an
    Engine in mode "dgl", is an ImportError saying how to get DGL."""
    import sys

    from zg.interop import blocked_imports

    if "dgl" in sys.modules:
        pytest.skip("DGL is imported in this process already (it cannot be hidden)")
    g = graph()
    with blocked_imports("dgl"):
        with pytest.raises(ImportError, match="this feature needs DGL"):
            zg.DGLSampler(g, [5, 5])
        with pytest.raises(ImportError, match="this feature needs DGL"):
            Engine(g, torch.nn.Linear(16, 4), [5, 5], 128, mode="dgl")
