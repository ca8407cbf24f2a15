"""zg.experiments.floor: the step on a batch already sampled is the engine's own step, less
sampling: the same loss and the same update as ``Engine.run_batch`` on the same batch."""

import pytest
import torch
from graphs import tiny

from zg import experiments as ex
from zg import models
from zg.engine import Engine
from zg.step import StageClock

FANOUTS = [4, 3]


def engine(g, mode="dynamic", kernel="torch"):
    torch.manual_seed(0)
    model = models.SAGE(g.feat_dim, 16, g.num_classes, len(FANOUTS))
    eng = Engine(g, model, FANOUTS, 32, mode=mode, seed=3, kernel=kernel)
    eng.observers = []
    return eng


@pytest.mark.parametrize("kernel", ["torch", "auto"])
def test_fixed_batch_step_is_the_engines_step_without_sampling(kernel):
    g = tiny()
    reference, fixed = engine(g, kernel=kernel), engine(g, kernel=kernel)
    batches = ex.resident_batches(fixed, 3)
    for b in (0, 2, 1):  # out of order: each batch keys its own dropout
        want = reference.run_batch(b, epoch=0)
        got = ex.fixed_batch_step(fixed, batches[b], batch=b, epoch=0)
        assert torch.equal(got, want)
        for (name, p), q in zip(reference.model.named_parameters(), fixed.model.parameters()):
            assert torch.equal(p, q), name
    # The gradients of the last step, too (the optimizer's input).
    for p, q in zip(reference.model.parameters(), fixed.model.parameters()):
        assert torch.equal(p.grad, q.grad)


def test_resident_batches_are_the_batches_the_engine_trains_on():
    g = tiny()
    eng = engine(g)
    batches = ex.resident_batches(eng, 2, epoch=1)
    for b, mb in enumerate(batches):
        assert torch.equal(mb.seeds, eng.batches(1)[b])
        # mode "dynamic": exact sizes, no padding rows
        assert [blk.num_src_rows for blk in mb.blocks] == [int(blk.num_src) for blk in mb.blocks]


def test_the_clock_sees_the_floor_stages_only():
    g = tiny()
    eng = engine(g)
    (mb,) = ex.resident_batches(eng, 1)
    clock = StageClock()
    clock.start()
    ex.fixed_batch_step(eng, mb, batch=0, clock=clock)
    seconds = clock.finish()
    assert {s for s, v in seconds.items() if v > 0} <= set(ex.FLOOR_STAGES)
    assert seconds["sample"] == seconds["compact"] == 0.0


def test_bad_arguments_are_named():
    g = tiny()
    eng = engine(g)
    with pytest.raises(ValueError, match="count"):
        ex.resident_batches(eng, 10_000)
    with pytest.raises(TypeError, match="engine"):
        ex.resident_batches(object(), 1)
    with pytest.raises(TypeError, match="mb"):
        ex.fixed_batch_step(eng, object(), batch=0)
    with pytest.raises(ValueError, match="batch"):
        ex.fixed_batch_step(eng, ex.resident_batches(eng, 1)[0], batch=-1)


def test_floor_rows_of_a_result():
    def sp(mean, std):
        return {"mean": mean, "std": std, "n": 2, "values": [mean, mean]}

    doc = {
        "bench": "floor",
        "rows": [
            {"pipeline": "floor", "key": "floor", "seconds": sp(0.5, 0.01), "kernel": "fused"},
            {
                "pipeline": "zg envelope",
                "key": "zg_envelope",
                "seconds": sp(0.6, None),
                "ratio_to_floor": sp(1.2, 0.05),
                "kernel": "fused",
            },
            {"pipeline": "zg captured", "key": "zg_captured", "skipped": "CUDA only"},
        ],
    }
    floor, envelope, captured = ex.floor_rows(doc)
    assert floor == {
        "side": "floor",
        "kernel": "fused",
        "skipped": None,
        "ms_per_iteration": 500.0,
        "ms_std": 10.0,
        "multiple_of_floor": 1.0,
        "multiple_std": None,
    }
    assert envelope["ms_per_iteration"] == pytest.approx(600.0) and envelope["ms_std"] is None
    assert envelope["multiple_of_floor"] == 1.2 and envelope["multiple_std"] == 0.05
    assert captured["skipped"] == "CUDA only" and captured["ms_per_iteration"] is None
    assert captured["multiple_of_floor"] is None
    with pytest.raises(ValueError, match="floor"):
        ex.floor_rows({"bench": "engine", "rows": []})
